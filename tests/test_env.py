"""What a run records of its environment."""
from workloads import env


def test_a_run_records_the_settings_that_change_what_pytorch_does(monkeypatch):
    """A compile cache switched off (an experiment's setting) is part of the run's environment, so
    its runs form their own set in the report; the per-cell compile cache folder is not."""
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/resnet50-0123456789ab")
    monkeypatch.setenv("HOME_LIKE_VARIABLE", "ignored")
    settings = env.fingerprint()["settings"]
    assert "TORCHINDUCTOR_AUTOGRAD_CACHE=0" in settings.split()
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in settings.split()
    assert "TORCHINDUCTOR_CACHE_DIR" not in settings and "HOME_LIKE" not in settings
