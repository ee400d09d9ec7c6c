"""Energy over a measured window: the arithmetic on a recorded power series, the throttle flag from
NVML's clock-event reasons, J/sample from mean power and throughput, and on a CPU the host's RAPL
counters where readable, else why not."""
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate
from profiles import energy, nvml_sampler

# A power series as NVML's sampler records it: 100 W for 1 s, then a ramp to 300 W over 1 s.
SERIES = [{"t": t, "power_w": w, "sm_mhz": c, "mem_mhz": 2619, "temp_c": tc, "reasons": r}
          for t, w, c, tc, r in [(0.0, 100.0, 1980, 40, 0), (1.0, 100.0, 1980, 41, 0), (2.0, 300.0, 1755, 45, 0x4)]]


def values(metrics):
    return {m["metric"]: m["value"] for m in metrics}


def test_the_trapezoid_rule_on_a_recorded_series():
    assert energy.integrate([s["t"] for s in SERIES], [s["power_w"] for s in SERIES]) == pytest.approx(100 + 200)


def test_the_counter_gives_the_energy_and_the_samples_cross_check_it():
    m = values(energy.summarize(SERIES, seconds=2.0, counter_j=330.0))
    assert m["energy"] == 330.0 and m["mean_power"] == 165.0 and m["energy_counter"] == 1.0
    assert m["energy_sampled_vs_counter"] == pytest.approx(100 * 150 / 165 - 100)  # sampled 150 W on average
    assert (m["sm_clock_min"], m["sm_clock_median"], m["temperature_median"]) == (1755, 1980, 41)
    assert m["throttled_share"] == pytest.approx(100 / 3)  # one sample held by the software power cap


def test_without_a_counter_the_integrated_samples_stand_in_over_the_whole_window():
    m = values(energy.summarize(SERIES, seconds=2.2, counter_j=None))
    assert m["energy_counter"] == 0.0 and m["energy"] == pytest.approx(300 * 2.2 / 2.0)
    assert "energy_sampled_vs_counter" not in m


def test_idle_or_application_clocks_are_no_throttling():
    idle = [{**s, "reasons": 0x1 | 0x2} for s in SERIES]
    assert values(energy.summarize(idle, 2.0, 300.0))["throttled_share"] == 0


def test_energy_per_sample_is_mean_power_over_throughput():
    record = {"metrics": [{"metric": "mean_power", "value": 500.0}, {"metric": "throughput", "value": 2000.0}]}
    m = values(aggregate.energy_per_sample(record))
    assert m["energy_per_sample"] == 0.25 and math.isclose(m["samples_per_kwh"], 3.6e6 / 0.25)
    assert aggregate.energy_per_sample({"metrics": [{"metric": "throughput", "value": 10.0}]}) == []


def test_rapl_counters_give_the_host_energy_and_a_wrap_counts_once(tmp_path):
    domain = tmp_path / "intel-rapl:0"
    domain.mkdir()
    (domain / "max_energy_range_uj").write_text("1000000\n")
    (domain / "energy_uj").write_text("900000\n")
    meter = energy.RaplMeter(tmp_path)
    with meter.running():
        (domain / "energy_uj").write_text("100000\n")  # wrapped: 0.2 J went by
    m = values(meter.metrics())
    assert m["energy"] == pytest.approx(0.2) and m["mean_power"] > 0


def test_a_host_without_rapl_says_why(tmp_path):
    meter = energy.RaplMeter(tmp_path / "none")
    with meter.running():
        pass
    assert meter.metrics() == [] and "no readable RAPL energy counter" in meter.why


def test_a_timing_run_on_this_cpu_records_its_energy_or_why_not(cpu_config, tmp_path):
    from tests.conftest import spec_of
    from trainperf import sweep
    result = sweep.run_cell(spec_of(cpu_config, "lstm", "baseline"), tmp_path)
    assert result["status"] == "ok"
    has = any(m["metric"] == "energy" for m in result["metrics"])
    assert has or ("RAPL" in result["timing"]["energy"]["why"] and not result["timing"]["energy"]["measurable"])


def test_the_meters_cost_pairs_a_cells_metered_runs_with_its_bare_ones():
    """Throughput with the meter over without, per repetition, of the same cell only: timing over
    bare end to end, step over step-bare for the step alone."""
    import pandas as pd
    rset = "GPU-a|abc123|2026-12-06"
    rows = [{"workload": "lstm", "variant": v, "profiler": p, "rep": r, "metric": "throughput", "value": x, "run_set": rset}
            for v, p, xs in (("optimized", "timing", [99, 98.9, 99.2, 99]), ("optimized", "bare", [100, 100, 100.1, 100]),
                             ("baseline", "timing", [10, 10, 10, 10]), ("optimized", "step", [200, 200.2, 199.8, 200]),
                             ("optimized", "step-bare", [201, 201, 201, 201]))
            for r, x in enumerate(xs)]
    metrics = pd.DataFrame(rows)
    cells = metrics.drop(columns=["metric", "value"]).assign(status="ok")
    cost = aggregate.meter_cost(metrics, cells).set_index("profiler")  # the baseline ran without the meter nowhere
    assert list(cost.index) == aggregate.METER[:2] == ["timing/bare", "step/step-bare"]
    assert (cost.before == "optimized").all() and (cost.n == 4).all() and (cost.status == "loss").all()
    assert cost.loc["timing/bare", "median"] == pytest.approx(0.99, abs=0.002)
    assert cost.loc["step/step-bare", "median"] == pytest.approx(200 / 201, abs=0.001)


class FieldValue:  # the shape of pynvml's c_nvmlFieldValue_t that instant_power reads
    def __init__(self, status, value_type, **value):
        self.nvmlReturn, self.valueType, self.value = status, value_type, type("Value", (), value)()


@pytest.mark.parametrize("field,expected", [
    (FieldValue(0, 1, uiVal=412_345), 412.345),  # NVML_SUCCESS, an unsigned int in mW
    (FieldValue(0, 3, ullVal=98_000), 98.0),
    (FieldValue(2, 1, uiVal=0), None),  # the driver has no such field: the averaged reading stands in
])
def test_the_instantaneous_power_field_is_read_in_watts_or_left_to_the_average(field, expected):
    """No NVML on this machine: a stand-in with pynvml's names gives the field's answers."""
    import pynvml
    nvml = type("Nvml", (), {"NVML_FI_DEV_POWER_INSTANT": pynvml.NVML_FI_DEV_POWER_INSTANT, "NVML_SUCCESS": 0,
                             "nvmlDeviceGetFieldValues": staticmethod(lambda h, ids: [field])})
    assert nvml_sampler.instant_power(nvml, None) == (pytest.approx(expected) if expected else None)


H100 = Path(__file__).parent / "data" / "h100-energy"


def test_real_gpu_records_carry_energy_clocks_and_throttling_and_the_tables_derive_joules_per_sample(tmp_path):
    """Timing records of one H100 carry NVML's counter energy with the sampled cross-check, clocks,
    temperature and the throttle share; a `bare` record (no meter) carries none; the summary
    derives each timing cell's J/sample as its mean power over its throughput."""
    from trainperf import config, variants
    paths = sorted(H100.glob("*.json"))
    records = {p.stem: aggregate.load_records([p])[0] for p in paths}
    for name, r in records.items():
        m = values(r["metrics"])
        if name.endswith("--timing"):
            assert m["energy_counter"] == 1.0 and m["energy"] > 0 and m["sm_clock_min"] > 0
            assert {"energy_sampled_vs_counter", "temperature_median", "throttled_share"} <= set(m)
        else:
            assert "energy" not in m and "mean_power" not in m
    summary = aggregate.main(paths, [], tmp_path, catalog=variants.catalog(config.load()))
    j = summary[(summary.metric == "energy_per_sample") & (summary.variant == "optimized")]
    m = values(records["resnet50--optimized--timing"]["metrics"])
    assert len(j) == 1 and j["median"].iloc[0] == pytest.approx(m["mean_power"] / m["throughput"], rel=1e-3)



def test_the_agreement_table_keeps_the_averaged_and_the_instantaneous_readings_apart(tmp_path):
    """One H100 cell in two sets of runs: set 3 sampled NVML's 1 s average, set 4 its instantaneous
    field; each set's sampled-over-counter figure stays in its own row, named by its reading."""
    from analysis import sections
    paths = sorted((Path(__file__).parent / "data" / "h100-power-readings").glob("*.json"))
    aggregate.main(paths, [], tmp_path)
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    rows = sections.agreement(metrics).set_index("how").value
    recorded = {p.stem: values(aggregate.load_records([p])[0]["metrics"])["energy_sampled_vs_counter"] for p in paths}
    assert rows.to_dict() == pytest.approx({"NVML's 1 s average": recorded["set3-averaged"],
                                            "instantaneous": recorded["set4-instantaneous"]})
    windows = {p.stem: (lambda m: m["energy"] / m["mean_power"])(values(aggregate.load_records([p])[0]["metrics"]))
               for p in paths}
    assert sorted(sections.agreement(metrics).window) == pytest.approx(sorted(windows.values()))
    by = sections.agreement_by_window(sections.agreement(metrics))
    assert by.runs.sum() == 2 and set(by.how) == {"NVML's 1 s average", "instantaneous"}
    text = sections.meter_section(metrics, pd.DataFrame(columns=["profiler"]))
    assert "| resnet50 | NVML's 1 s average | 1 | 1 |" in text and "| resnet50 | instantaneous | 1 | 1 |" in text


def test_a_cell_held_below_its_clocks_in_most_samples_is_a_caveat():
    """The summary's caveats name each timing cell whose runs had a power or thermal clock-event
    reason in at least half their samples (median over runs), most held first; others are not named."""
    from analysis import summary as first
    rows = [("vit_b_16", "optimized", 96.6), ("resnet50", "optimized", 12.0), ("lstm", "optimized", 100.0)]
    summary = pd.DataFrame([{"workload": w, "variant": v, "profiler": "timing", "metric": "throttled_share", "median": x,
                             "status": "ok", "n": 3, "failed": 0, "reason": None} for w, v, x in rows])
    c = first.caveats(summary, pd.DataFrame(columns=["run_set"]))
    assert c["throttled"] == [("lstm/optimized", 100.0), ("vit_b_16/optimized", 96.6)]


def test_only_the_samples_inside_the_window_count():
    """The sampling process runs from the observer's start; the window keeps what it spans."""
    taken = [{**s, "util": u, "averaged": a} for s, u, a in zip(SERIES, (10, 90, 95), (True, False, False))]
    samples, util, averaged = energy.window(taken, 0.5, 2.0)
    assert samples == SERIES[1:] and util == [90, 95] and not averaged
    assert energy.window(taken, 0.0, 1.0)[2]


def test_without_nvml_the_sampling_process_says_why_and_ends():
    """This machine has no NVIDIA driver: the process started beside the run ends with the window
    and its reason reaches the record; no samples, no metrics."""
    sampler = energy.GpuSampler(period=0.01)
    with sampler.running():
        pass
    assert sampler._child.returncode is not None
    assert sampler.metrics() == [] and sampler.why.startswith("NVML unavailable")


def test_the_counter_alone_gives_the_energy_where_no_sample_fell_in_a_short_window():
    m = values(energy.summarize([], 0.2, 33.0))
    assert m == {"energy": 33.0, "mean_power": 165.0, "energy_counter": 1.0}
    assert energy.summarize(SERIES[:1], 0.2, None) == [] and energy.summarize([], 0.2, None) == []

