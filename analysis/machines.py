"""results/README.md: every published machine side by side, from each results/<machine>/ folder's
tables: the machines (GPU, measured matmul peaks, host cores), what each workload trains at, each
fix's gain and each claim's verdict per machine, beside the published figures."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from analysis import diagnosis, report, summary as first
from analysis.tables import CI, fmt, num, ratio_text, table


def folders(root: str | Path) -> list[Path]:
    """The machines' results folders under root (those with tables), the CPU preset's left out."""
    return sorted(p for p in Path(root).iterdir() if (p / "summary.csv").is_file() and p.name != "cpu")


def machines_table(dirs: list[Path]) -> str:
    rows = {}
    for d in dirs:
        envs = json.loads((d / "env.json").read_text())
        limits = json.loads((d / "limits.json").read_text()) if (d / "limits.json").is_file() else {}
        col = {"GPU": " / ".join(sorted({str(e.get("gpu", "")) for e in envs})),
               "host CPU": " / ".join(sorted({str(e.get("cpu", "")) for e in envs})),
               "host CPU cores": " / ".join(sorted({str(e.get("cpu_count", "")) for e in envs})),
               "driver, CUDA, torch": " / ".join(sorted({f"{e.get('driver')}, {e.get('cuda')}, {e.get('torch')}" for e in envs})),
               "sets of runs": str(len({(e.get("gpu_uuid"), e.get("git_commit"), e.get("dates")) for e in envs}))}
        col |= {f"matmul peak measured here, {p} (TFLOP/s)": num(v) for p, v in limits.get("peak_tflops", {}).items()}
        if "bandwidth_gbps" in limits:
            col["memory bandwidth measured here, a 1 GiB copy (GB/s)"] = num(limits["bandwidth_gbps"])
        rows[d.name] = col
    df = pd.DataFrame(rows)
    return table(df.reset_index().rename(columns={"index": ""}).fillna(""))


def headline_table(tables: dict[str, dict]) -> str:
    frames = {m: first.headline(t["summary"], t["ratios"], t["variants"]) for m, t in tables.items()}
    keys = list(dict.fromkeys((r.workload, r.variant) for h in frames.values() for r in h.itertuples()))
    order = first.workload_order({w for w, _ in keys})
    rows = []
    rank = {"baseline": 0, first.REFERENCE: 1, "optimized": 3}  # an article chain's end between (2)
    for w, v in sorted(keys, key=lambda k: (order.index(k[0]), rank.get(k[1], 2))):
        row = {"workload": w, "variant": v}
        for m, h in frames.items():
            r = h[(h.workload == w) & (h.variant == v)] if len(h) else h  # a machine without timing cells: blank
            row[m] = "" if r.empty else failed(r.iloc[0].speedup, v) or \
                f"{fmt(*r.iloc[0][['median', 'lo', 'hi']])} {r.iloc[0].unit}" + (
                    "" if v == "baseline" else f", {ratio_text(r.iloc[0].speedup)}")
        rows.append(row)
    return table(pd.DataFrame(rows))


def failed(speedup, variant: str) -> str | None:
    """'failed: optimized failed in 2 of 3 runs' where the variant itself failed in any run of its
    speedup's set (its throughput then not shown); None otherwise."""
    why = speedup.get("why") if isinstance(speedup, (dict, pd.Series)) else None
    mine = isinstance(why, str) and why.startswith(f"{variant} failed") and speedup.get("status") == "failed"
    return f"failed: {why}" if mine else None


BLOCK = ("<!-- the headline: `trainperf machines` writes it from results/ -->", "<!-- end of the headline -->")


def headline_block(tables: dict[str, dict]) -> str:
    """Per workload, baseline -> optimized on each machine with optimized's paired speedup: the
    README's headline."""
    frames = {m: first.headline(t["summary"], t["ratios"], t["variants"]) for m, t in tables.items()}
    rows = {}
    for m, h in frames.items():
        for w in h.workload.unique() if len(h) else []:
            ends = h[h.workload == w].set_index("variant")
            if {"baseline", "optimized"} <= set(ends.index):
                b, o = ends.loc["baseline"], ends.loc["optimized"]
                bad = failed(o.speedup, "optimized")
                after = f"{o.unit} -> {bad}" if bad else f"-> {num(o['median'])} {o.unit}, {ratio_text(o.speedup)}"
                rows.setdefault(w, {"workload": w})[m] = f"{num(b['median'])} {after}"
    order = first.workload_order(rows)
    if not rows:
        return ""
    tallies = {m: first.tally(report.claims_rows(t).verdict) for m, t in tables.items()}
    said = " ".join(f"**{m}**: " + "; ".join(f"{k}: {n}" for k, n in t.items()) + "." for m, t in tallies.items() if t)
    return table(pd.DataFrame([rows[w] for w in order]).fillna("not run")) + (
        f"\nThe articles' claims, their tests by verdict ([results/README.md](results/README.md) has each): {said}\n"
        if said else "")


def update_readme(path: Path, block: str) -> bool:
    """Rewrite the text between the README's two BLOCK markers; a README without them stays as it is."""
    text = path.read_text() if path.is_file() else ""
    if BLOCK[0] not in text or BLOCK[1] not in text:
        return False
    head, rest = text.split(BLOCK[0], 1)
    path.write_text(head + BLOCK[0] + "\n\n" + block + "\n" + BLOCK[1] + rest.split(BLOCK[1], 1)[1])
    return True


def gains_table(tables: dict[str, dict]) -> str:
    rows = []
    for m, t in tables.items():
        v = t["variants"]
        for w in first.workload_order(t["summary"].workload.unique()):
            for fix, side in v[(v.workload == w) & (v.kind == "fix")][["about", "side"]].itertuples(index=False):
                g = first.fix_gain(t["ratios"], v, w, fix, side)
                rows.append({"workload": w, "fix": fix, "side": side, "machine": m,
                             "gain": "" if g is None else f"{ratio_text(g)} ({first.basis(g)})"})
    if not rows:
        return "No fix was measured against its baseline on these machines.\n"
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["workload", "fix", "side"], columns="machine", values="gain", aggfunc="first",
                          sort=False).fillna("")
    return table(wide[(wide != "").any(axis=1)].reset_index())


FOLLOWS = 0.10  # a throughput ratio within this of a measured limit's ratio follows that limit


def limit_ratio(limits: dict[str, dict], ref: str, m: str, get) -> tuple[float | None, str]:
    """A measured limit's ratio m / ref (`get` reads it from a limits.json), or None and which
    machine did not measure it."""
    a, b = get(limits[ref]), get(limits[m])
    if a is None or b is None:
        return None, "not measured on " + " and ".join(x for x, v in ((ref, a), (m, b)) if v is None)
    return b / a, f"{b / a:.3g}x"


def follows(ratio: float, said: dict[str, tuple[float | None, str]]) -> str:
    """Which measured limit a throughput ratio follows within FOLLOWS, or that it follows none."""
    measured = [k for k, (x, _) in said.items() if x]
    near = [k for k in measured if abs(ratio / said[k][0] - 1) <= FOLLOWS]
    if near or not measured:
        return ", ".join(near) or "no limit measured on both"
    return "neither" if len(measured) == len(said) else f"not the {measured[0]} (the only one measured on both)"


def differences_table(tables: dict[str, dict], limits: dict[str, dict]) -> str:
    """Per workload, optimized's throughput on each machine over the first's (medians of runs on each:
    not paired), beside the same ratio of the measured matmul peak at optimized's precision and of
    the memory bandwidth, and what holds optimized on each machine (the report's rule)."""
    machines = list(tables)
    ref, rows = machines[0], []
    for w in first.workload_order({w for t in tables.values() for w in t["summary"].workload.unique()}):
        tput = {m: first.row(t["summary"], w, "optimized", first.throughput_metric(t["summary"], w)) for m, t in tables.items()}
        v = tables[ref]["variants"]
        prec = v[(v.workload == w) & (v.variant == "optimized")].precision
        for m in machines[1:]:
            if tput[ref] is None or tput[m] is None or prec.empty:
                continue
            ratio = tput[m]["median"] / tput[ref]["median"]
            said = {"matmul peak": limit_ratio(limits, ref, m, lambda x: x.get("peak_tflops", {}).get(prec.iloc[0])),
                    "memory bandwidth": limit_ratio(limits, ref, m, lambda x: x.get("bandwidth_gbps"))}
            rows.append({"workload": w, "machines": f"{m} / {ref}", "optimized": f"{ratio:.3g}x",
                         "matmul peak at optimized's precision": said["matmul peak"][1] + (
                             f" ({prec.iloc[0]})" if said["matmul peak"][0] else ""),
                         "memory bandwidth": said["memory bandwidth"][1], "follows": follows(ratio, said),
                         "what holds optimized on each": "; ".join(
                             f"{x}: {diagnosis.holding(tables[x]['summary'], w, 'optimized')}" for x in (ref, m))})
    return table(pd.DataFrame(rows)) if rows else ""


def claims_table(tables: dict[str, dict]) -> str:
    per = {m: report.claims_rows(t) for m, t in tables.items()}
    base = next(iter(per.values()))
    rows = base[["id", "hardware", "documented", "pair"]].copy()
    for m, c in per.items():  # worded as the report's digest words them
        rows[m] = [report.verdict_said(*t) for t in zip(c.verdict, c.value, c.unit, c.n.fillna(0), c.pair, c.lo, c.hi)]
    return table(rows.rename(columns={"hardware": "the source's GPU", "documented": "the source's figure"}))


def render(root: str | Path) -> Path:
    dirs, path = folders(root), Path(root) / "README.md"
    if not dirs:
        path.write_text("# Results\n\nNo GPU machine's results here yet: `snakemake --cores 1` on a GPU machine "
                        "writes results/<machine>/ and this page.\n")
        return path
    tables = {d.name: {**report.load_tables(d), "summary": pd.read_csv(d / "summary.csv")} for d in dirs}
    anchors = yaml.safe_load(report.ANCHORS.read_text())
    parts = ["# Results: every machine side by side\n",
             "Generated from each machine's folder (`trainperf machines results`); each folder's REPORT.md has the "
             "evidence. Throughput: median [min, max] over runs; a gain or speedup: median of ratios paired within "
             "one set of runs [95 % interval; from 3 pairs, their range, which holds the true median 3 times in 4]. "
             "A ratio never pairs runs of two machines: compare two folders cell by cell with "
             "`trainperf compare results/<a> results/<b>`.\n",
             "## The machines\n", machines_table(dirs),
             "Each peak is the one its limits.json holds (measured by the set of runs it names), the best of 7 repeats; "
             "a blank or a missing row: a set made before the suite measured it.\n",
             "## What each workload trains at (speedup over the machine's own baseline)\n", headline_table(tables),
             "Published elsewhere: " + "; ".join(f"{a['workload']}, {a['source']}, {a['gpu']}: {a['figure']}" for a in anchors) + ".\n",
             "## Each fix's gain, per machine\n",
             f"Each fix on the report's basis: {first.GAIN_RULE}.\n", gains_table(tables),
             "## The documented claims, per machine\n", claims_table(tables)]
    diff = differences_table(tables, {d.name: json.loads((d / "limits.json").read_text()) if (d / "limits.json").is_file()
                                      else {} for d in dirs})
    if diff:
        parts[-2:-2] = ["## Where the machines differ, and what the measurements say of why\n",
                        "Optimized's throughput on one machine over the other's (medians of each machine's runs, "
                        "never paired), beside the same ratio of the limits each machine measured of itself. "
                        f"**follows**: the throughput ratio is within {FOLLOWS:.0%} of that limit's ratio. Where it "
                        "follows no limit, the last column says what paces optimized on each machine, from its own "
                        "records.\n", diff]
    path.write_text("\n".join(parts))
    update_readme(Path(root).resolve().parent / "README.md", headline_block(tables))
    return path
