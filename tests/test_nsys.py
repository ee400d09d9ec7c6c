"""The Nsight Systems parser on a real capture the suite made on the H200 (LSTM baseline, six
measured steps): its numbers agree with independent SQL over the same file and with the run's own
timing; a broken export is an error that names the file."""
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from profiles import nsys
from profiles.tools import WrappingObserver

CAPTURE = Path(__file__).parent / "data/h200-captures/lstm-baseline-nsys"


@pytest.fixture(scope="module")
def parsed():
    out = nsys.parse(CAPTURE / "nsys.sqlite")
    return {m["metric"]: m["value"] for m in out["metrics"]}, out


def sql(query):
    with sqlite3.connect(f"file:{CAPTURE / 'nsys.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def test_window_and_kernel_counts_match_plain_sql(parsed):
    m, _ = parsed
    lo, hi, steps = sql("SELECT MIN(start), MAX(end), COUNT(*) FROM NVTX_EVENTS WHERE text = 'step'")[0]
    record = json.loads((CAPTURE / "metrics.json").read_text())
    assert steps == m["profiled_steps"] == len(record["steps"])
    (kernels,) = sql(f"SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= {lo} AND start < {hi}")[0]
    assert m["kernels_per_step"] == kernels / steps
    assert m["profiled_step_time"] == pytest.approx((hi - lo) / 1e6 / steps)


def test_busy_share_agrees_with_a_rasterized_timeline(parsed):
    m, _ = parsed
    lo, hi = sql("SELECT MIN(start), MAX(end) FROM NVTX_EVENTS WHERE text = 'step'")[0]
    busy = np.zeros((hi - lo) // 1000 + 1, bool)  # one cell per microsecond
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        for s, e in sql(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{table} WHERE start >= {lo} AND start < {hi}"):
            busy[(s - lo) // 1000:(min(e, hi) - lo) // 1000 + 1] = True
    assert m["gpu_busy"] == pytest.approx(100 * busy.mean(), abs=1.0)
    assert m["gpu_busy"] + 100 * m["idle_time"] * m["profiled_steps"] / (m["profiled_step_time"] * m["profiled_steps"]) \
        == pytest.approx(100, abs=0.01)


def test_phases_and_input_wait_agree_with_the_runs_own_timing(parsed):
    m, _ = parsed
    record = json.loads((CAPTURE / "metrics.json").read_text())
    timing = {x["metric"]: x["value"] for x in record["metrics"]}
    assert m["phase_input"] == pytest.approx(timing["input_wait"], rel=0.1)
    phases = sum(m[f"phase_{p}"] for p in nsys.PHASES)
    assert m["phase_forward"] > 0 and m["phase_backward"] > 0 and phases <= m["profiled_step_time"]


def test_top_kernels_and_gaps_are_consistent(parsed):
    m, out = parsed
    shares = [k["share"] for k in out["kernels"]]
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 100
    assert all(k["mangled"] and k["calls_per_step"] > 0 for k in out["kernels"])
    assert sum(out["gaps"].values()) == pytest.approx(m["idle_gaps_per_step"] * m["profiled_steps"])
    assert m["sync_calls_per_step"] >= 1  # the baseline reads the loss every step


def test_host_time_in_cuda_calls_agrees_with_plain_sql(parsed):
    """The baseline reads the loss every step: the thread that marks the steps waits for the GPU in
    the copy of the loss to the host (pageable memory: the copy blocks). The parser's host time in
    CUDA calls, and in those that wait, match plain SQL over the same file."""
    m, out = parsed
    lo, hi, steps = sql("SELECT MIN(start), MAX(end), COUNT(*) FROM NVTX_EVENTS WHERE text = 'step'")[0]
    (tid,) = sql("SELECT globalTid FROM NVTX_EVENTS WHERE text = 'step' ORDER BY start LIMIT 1")[0]
    where = f"r.globalTid = {tid} AND r.start >= {lo} AND r.start < {hi}"
    (total,) = sql(f"SELECT SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE {where}")[0]
    (to_host,) = sql(f"SELECT SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_MEMCPY c "
                     f"ON c.correlationId = r.correlationId AND c.copyKind = 2 WHERE {where}")[0]
    synced = sum(d for name, d in sql(f"SELECT s.value, r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                      f"JOIN StringIds s ON s.id = r.nameId WHERE {where}") if nsys.SYNC_CALLS.search(name))
    assert m["api_time_training_thread"] == pytest.approx(total / 1e6 / steps)
    assert m["gpu_wait_training_thread"] == pytest.approx((to_host + synced) / 1e6 / steps)
    assert to_host > 0.5 * total  # the loss read dominates the baseline's host time in CUDA calls
    top = out["api_calls"][0]
    assert top["thread"] == "training" and top["waits"] and "Memcpy" in top["name"]
    # the training thread's sync calls per step add up from the calls the record lists
    listed = [c for c in out["api_calls"] if c["thread"] == "training" and nsys.SYNC_CALLS.search(c["name"])]
    assert m["sync_calls_per_step"] == pytest.approx(sum(c["per_step"] for c in listed))
    # backward's kernels are launched from autograd's own thread, named as the capture names it
    assert any(c["thread"] == "pt_autograd_0" and "Launch" in c["name"] for c in out["api_calls"])


def test_no_collectives_in_a_single_gpu_capture(parsed):
    m, _ = parsed
    assert m["allreduce_share"] == 0 and m["allreduce_time"] == 0


def test_a_capture_of_several_ranks_is_read_for_the_first_one(parsed, tmp_path):
    """A data-parallel cell's capture holds every rank's process: the parser reads the process of
    the first measured step. A second process, copied from the first one 1 ms later, changes nothing."""
    m, _ = parsed
    path = tmp_path / "nsys.sqlite"
    path.write_bytes((CAPTURE / "nsys.sqlite").read_bytes())
    with sqlite3.connect(path) as db:
        for table, pid in (("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
                           ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"), ("NVTX_EVENTS", "globalTid")):
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            shifted = [f"{c} + 1000000" if c in ("start", "end") else f"{c} + (1 << 24)" if c == pid else c
                       for c in cols]
            db.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(shifted)} FROM {table}")
    two = {x["metric"]: x["value"] for x in nsys.parse(path)["metrics"]}
    assert sql("SELECT COUNT(*) FROM NVTX_EVENTS WHERE text = 'step'")[0][0] == two["profiled_steps"]
    assert two == pytest.approx(m)


@pytest.mark.parametrize("damage", ["truncated", "not sqlite", "missing"])
def test_a_broken_export_is_an_error_naming_the_file(tmp_path, damage):
    path = tmp_path / "nsys.sqlite"
    if damage == "truncated":
        path.write_bytes((CAPTURE / "nsys.sqlite").read_bytes()[:200_000])
    elif damage == "not sqlite":
        path.write_text("this is not a database")
    with pytest.raises(ValueError, match=str(path)):
        nsys.parse(path)


def test_a_missing_tool_skips_its_cells_with_the_reason():
    config = {"tools": {"nsys": "no-such-nsys-binary"}}
    assert "nsys not found" in nsys.Nsys.unavailable(config, cuda=True)
    assert nsys.Nsys.unavailable(config, cuda=False) == "nsys needs a CUDA GPU; this machine has none"
    assert issubclass(nsys.Nsys, WrappingObserver)


def test_graph_launches_whose_kernels_were_not_traced_are_an_error(parsed, tmp_path):
    """nsys traces a CUDA graph as one launch unless told `--cuda-graph-trace=node`; its kernels then
    never appear and the GPU reads as idle. A copy of the real capture with one cudaGraphLaunch call
    added in the window is refused; once a kernel carries a graph node id, it is read, counting it."""
    m, _ = parsed
    path = tmp_path / "nsys.sqlite"
    path.write_bytes((CAPTURE / "nsys.sqlite").read_bytes())
    with sqlite3.connect(path) as db:
        name_id = db.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
        db.execute("INSERT INTO StringIds (id, value) VALUES (?, 'cudaGraphLaunch_v10000')", (name_id,))
        cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
        db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ({', '.join(cols)}) SELECT "
                   + ", ".join("?" if c == "nameId" else c for c in cols)
                   + " FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start > (SELECT MIN(start) FROM NVTX_EVENTS "
                   "WHERE text = 'step') ORDER BY start LIMIT 1", (name_id,))
    with pytest.raises(ValueError, match=r"1 CUDA graph launches whose kernels .* --cuda-graph-trace=node"):
        nsys.parse(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = 1 WHERE rowid = "
                   "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC LIMIT 1)")
    graphs = {x["metric"]: x["value"] for x in nsys.parse(path)["metrics"]}
    assert graphs["graph_launches_per_step"] == pytest.approx(1 / m["profiled_steps"])
    assert m["graph_launches_per_step"] == 0


def test_sync_calls_are_the_training_threads_and_the_others_apart(parsed):
    """The loop's own syncs are counted on the thread that marks the steps; other threads' (autograd's,
    a loader's, DALI's) apart: plain SQL over the same file splits them the same way."""
    m, _ = parsed
    lo, hi, steps = sql("SELECT MIN(start), MAX(end), COUNT(*) FROM NVTX_EVENTS WHERE text = 'step'")[0]
    (tid,) = sql("SELECT globalTid FROM NVTX_EVENTS WHERE text = 'step' ORDER BY start LIMIT 1")[0]
    calls = sql(f"SELECT s.value, r.globalTid = {tid} FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                f"WHERE r.start >= {lo} AND r.start < {hi}")
    mine = sum(1 for name, own in calls if own and nsys.SYNC_CALLS.search(name))
    others = sum(1 for name, own in calls if not own and nsys.SYNC_CALLS.search(name))
    assert mine >= steps  # the baseline reads the loss every step
    assert m["sync_calls_per_step"] == pytest.approx(mine / steps)
    assert m["sync_calls_other_threads"] == pytest.approx(others / steps)


def test_kernels_per_forward_are_those_launched_inside_the_forward_ranges():
    """ResNet-50's baseline capture: the kernels whose launch call the training thread made inside
    a `forward` range, per forward, as plain SQL counts them."""
    path = CAPTURE.parent / "resnet50-baseline-nsys" / "nsys.sqlite"
    m = {x["metric"]: x["value"] for x in nsys.parse(path)["metrics"]}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        lo, hi = db.execute("SELECT MIN(start), MAX(end) FROM NVTX_EVENTS WHERE text = 'step'").fetchone()
        (tid,) = db.execute("SELECT globalTid FROM NVTX_EVENTS WHERE text = 'step' ORDER BY start LIMIT 1").fetchone()
        ranges = f"FROM NVTX_EVENTS f WHERE f.text = 'forward' AND f.globalTid = {tid} AND f.start >= {lo} AND f.start < {hi}"
        (forwards,) = db.execute(f"SELECT COUNT(*) {ranges}").fetchone()
        (kernels,) = db.execute(
            f"SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            f"ON r.correlationId = k.correlationId AND r.globalTid = {tid} "
            f"WHERE EXISTS (SELECT 1 {ranges} AND r.start >= f.start AND r.start < f.end)").fetchone()
    assert forwards >= 3 and kernels > 100 * forwards  # an eager fp32 ResNet-50: a few hundred per forward
    assert m["kernels_per_forward"] == pytest.approx(kernels / forwards)
    assert m["layout_kernels_per_forward"] == 0  # eager NCHW: no layout conversion
    assert m["kernels_per_forward"] < m["kernels_per_step"] / 2  # the backward launches more than the forward
