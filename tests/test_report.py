"""The report is built from the tables alone and is deterministic; its sections and flags follow
the data (real H200 records from tests/data)."""
import shutil
from pathlib import Path

import pytest

from analysis import aggregate, report
from analysis.tables import num

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "h200"
    aggregate.main(H200, [], out)
    return out


def test_report_is_deterministic_and_complete(results):
    first = report.render(results).read_text()
    assert report.render(results).read_text() == first
    for section in ("## Environment", "## resnet50", "### Ablation", "## Documented claims", "## Failed and skipped"):
        assert section in first
    assert "NVIDIA H200" in first and "CPU preset" not in first
    assert (results / "figures" / "speedup-resnet50.png").stat().st_size > 5000


def test_report_numbers_come_from_the_summary(results):
    text = report.render(results).read_text()
    row = next(line for line in text.splitlines() if line.startswith("| optimized |"))
    summary = aggregate.summarize(*aggregate.tidy(aggregate.load_records(H200)))
    tput = summary[(summary.workload == "resnet50") & (summary.variant == "optimized") & (summary.metric == "throughput")]
    assert num(tput["median"].iloc[0]) in row
    assert "transformer_lm | optimized | timing | failed | non-finite loss" in text


def test_cpu_results_say_they_are_not_comparable(results, tmp_path):
    cpu = tmp_path / "cpu"
    shutil.copytree(results, cpu)
    assert "not comparable" in report.render(cpu).read_text()


@pytest.mark.parametrize("x,text", [(5543.1, "5,543"), (32.88, "32.9"), (0.0412, "0.0412")])
def test_number_format(x, text):
    assert num(x) == text
