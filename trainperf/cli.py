"""`trainperf`: run one cell, make the datasets, list the matrix, aggregate the results."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from trainperf.config import CONFIG
from workloads.record import write_json


COMMANDS: dict[str, tuple] = {}  # name -> (function, help, arguments), in the order `--help` lists them


def arg(*names, **options) -> tuple:
    """One argument of a command, as argparse's add_argument takes it."""
    return names, options


def one_of(*arguments: tuple) -> tuple:
    """Arguments of which a command takes exactly one (argparse's required exclusive group)."""
    return "one_of", arguments


def command(name: str, help: str, *arguments: tuple):
    """Register a command with its arguments, declared beside the function that runs it."""
    def register(func):
        COMMANDS[name] = (func, help, arguments)
        return func
    return register


PRESET = arg("--preset", help="a preset of the config (default: auto)")
CONFIG_ARG = arg("--config", default=CONFIG)


def _config(args) -> dict:
    from trainperf import config, matrix
    overrides = {"preset": args.preset} if getattr(args, "preset", None) else {}
    return matrix.resolve(config.load(args.config, overrides))


@command("run", "run one cell of the matrix",
         arg("workload", nargs="?"), arg("variant", nargs="?", default="baseline"),
         arg("--profiler", default="timing"), arg("--rep", type=int, default=0), PRESET, CONFIG_ARG,
         arg("--spec", help="a cell spec as JSON (what the Snakefile passes)"),
         arg("--out", help="write the run's record (metrics.json) here"))
def cmd_run(args) -> int:
    from trainperf import matrix
    from trainperf.sweep import run_cell
    from workloads.record import keep
    if args.spec:
        spec = json.loads(args.spec)
    else:
        cell = matrix.cell(_config(args), args.workload, args.variant, args.profiler, args.rep)
        if cell["status"] == "skipped":
            print(f"skipped: {cell['reason']}", file=sys.stderr)
            if args.out:
                write_json(args.out, {**cell, "spec": None})
            return 0
        spec = cell["spec"]
    record = run_cell(spec, Path(args.out).parent if args.out else None)
    rank, ranks = int(os.environ.get("RANK", 0)), matrix.processes(spec)
    if ranks > 1 and record["status"] != "ok":
        record["reason"] = f"rank {rank} of {ranks}: {record['reason']}"
    if args.out and (rank == 0 or record["status"] != "ok"):  # rank 0 speaks for a DDP cell
        keep(args.out, record)
    elif not args.out and rank == 0:
        print(json.dumps({k: record[k] for k in ("keys", "status", "reason")} |
                         {"metrics": record.get("metrics", [])}, indent=1))
    if ranks > 1 and record["status"] != "ok":
        return 1  # the launcher then stops the other ranks, which would wait for this one forever
    from workloads import ddp
    ddp.finish()
    return 0


@command("sweep", "run several cells in one process (what the Snakefile calls)",
         one_of(arg("--jobs", help="JSON list of [spec, record path] pairs"),
                arg("--jobs-file", help="a file holding that list (what the Snakefile passes)")),
         arg("--out", required=True, help="write the list of records here when all are done"))
def cmd_sweep(args) -> int:
    from trainperf import sweep
    listed = json.loads(Path(args.jobs_file).read_text() if args.jobs_file else args.jobs)
    jobs = [(spec, Path(out)) for spec, out in listed]
    sweep.sweep(jobs, Path(args.out).stem)
    write_json(args.out, {"records": [str(out) for _, out in jobs], "failed": sweep.failures(jobs)})
    return 0


@command("check", "fail where every cell of a workload failed in the given sweeps",
         arg("sweeps", nargs="*", help="the sweeps' outputs (runs/<machine>/sweeps/*.json)"))
def cmd_check(args) -> int:
    """Exit 1, naming them, where every cell a workload ran in these sweeps failed."""
    ran, failed = {}, {}
    for path in args.sweeps:
        sweep = json.loads(Path(path).read_text())
        for out in sweep["records"]:
            ran.setdefault(Path(out).parts[-5], 0)
            ran[Path(out).parts[-5]] += 1
        for f in sweep.get("failed", []):
            failed.setdefault(f["keys"]["workload"], []).append(f)
    broken = [w for w, n in ran.items() if len(failed.get(w, [])) == n]
    for w in broken:
        first = failed[w][0]
        print(f"trainperf: every cell of {w} failed ({len(failed[w])} cells; {first['keys']['variant']}: "
              f"{first['reason']}); the records made before are kept", file=sys.stderr)
    return 1 if broken else 0


@command("compile", "build torch.compile's cache for compiled cells before they are timed",
         arg("--jobs", help="JSON list of [spec, record path] pairs: one per cache folder (the compile stage)"),
         arg("--parallel", type=int, default=1, help="folders built at once (default 1)"),
         arg("--spec", help="one cell spec as JSON: build its folder in this process"),
         arg("--out", help="with --spec: write its record here"))
def cmd_compile(args) -> int:
    from trainperf import precompile
    from workloads import harness
    if args.spec:
        write_json(args.out, harness.compile_only(json.loads(args.spec)))
        return 0
    jobs = [(spec, Path(out)) for spec, out in json.loads(args.jobs)]
    precompile.stage(jobs, args.parallel, os.cpu_count() or 1)
    return 0


@command("limits", "model FLOPs per step and this machine's matmul peaks",
         arg("--specs", required=True, help="JSON: workload name -> one of its cell specs"), arg("--out", required=True),
         arg("--peaks", help="JSON file of the peaks measured on this machine, one per set of runs "
             "(same environment, commit and day): this set's is reused, else measured and added"))
def cmd_limits(args) -> int:
    import torch
    from workloads import env
    from trainperf import limits
    from workloads import harness
    chosen = {name: harness.workload_of(spec) for name, spec in json.loads(args.specs).items()}
    device, fingerprint = torch.device("cuda" if env.has_cuda() else "cpu"), env.fingerprint()
    measured = limits.measure(chosen, device, fingerprint, Path(args.peaks) if args.peaks else None)
    if args.peaks:  # the workloads counted before stay: a run of some workloads adds to the others
        kept = Path(args.peaks).with_name("flops.json")
        flops = {**(json.loads(kept.read_text()) if kept.is_file() else {}), **measured["flops_per_sample"]}
        write_json(kept, flops)
        measured["flops_per_sample"] = dict(sorted(flops.items()))
    write_json(args.out, {**measured, "env": fingerprint})
    return 0


@command("data", "generate a dataset",
         arg("kind", choices=["images", "tokens"]), arg("--out", required=True),
         arg("--n", type=int, required=True, help="images or tokens"), arg("--classes", type=int, default=10),
         arg("--seed", type=int, default=0))
def cmd_data(args) -> int:
    from workloads import data
    if args.kind == "images":
        info = data.make_images(args.out, args.n, args.classes, args.seed)
    else:
        info = data.make_tokens(args.out, args.n, seed=args.seed)
    print(json.dumps(info))
    return 0


@command("matrix", "list every cell and whether it runs or is skipped", PRESET, CONFIG_ARG)
def cmd_matrix(args) -> int:
    from trainperf import matrix
    for c in matrix.cells(_config(args)):
        k = c["keys"]
        print(f"{k['workload']:14} {k['variant']:40} {k['profiler']:7} rep{k['rep']}  "
              f"{c['status']}" + (f": {c['reason']}" if c["reason"] else ""))
    return 0


@command("estimate", "how long a preset would take on the machine of a results folder, from its runs there "
         "(before a run, not instead of one)",
         arg("folder", help="results/<machine>: its cells.csv and compiles.csv"), arg("--preset", default="headline"),
         arg("--workloads", nargs="+", help="only these workloads (default: the config's)"),
         arg("--variants", nargs="+", help="only these variants (default: the preset's)"),
         arg("--profilers", nargs="+", help="only these profilers (default: the config's)"), CONFIG_ARG)
def cmd_estimate(args) -> int:
    """How long a preset would take on the machine of a results folder, from its runs there."""
    from trainperf import config, estimate, matrix
    folder = Path(args.folder)
    if not (folder / "cells.csv").is_file():
        raise ValueError(f"{folder}: no cells.csv here; estimate reads a results folder the pipeline wrote "
                         "(results/<machine>)")
    gpu = folder.name != "cpu"
    chosen = {k: v for k, v in (("workloads", args.workloads), ("variants", args.variants),
                                 ("profilers", args.profilers)) if v}
    cfg = config.load(args.config, {"gpu_jobs": gpu, "machine": folder.name, "preset": args.preset, **chosen})
    e = estimate.estimate({**matrix.resolve(cfg), "gpus": 1 if gpu else 0}, folder)
    for r in e["table"].itertuples():
        print(f"{r.workload:14} {r.profiler:9} {r.runs:4d} runs {r.seconds / 60:6.1f} min"
              + (f"  ({r.unknown} never run on {folder.name}: not counted)" if r.unknown else ""))
    print(f"compile stage, cold caches: {e['compile_s'] / 60:.1f} min"
          + (f" ({e['compile_unknown']} folders never built on {folder.name}: not counted)" if e["compile_unknown"] else ""))
    print(f"total: {e['total_s'] / 60:.1f} min of runs and compiling on {folder.name} (each run's median there); not "
          "counted: each sweep's start (a process per workload, profiler and repetition), the data, limits and report "
          "rules, and the confirming repetitions of ratios undecided at 3 pairs")
    return 0


@command("probe", "a cell's first steps, each read on the host (loss, GradScaler, weights, compile cache): "
         "where a NaN starts",
         arg("workload"), arg("variant"), arg("--steps", type=int, default=30), PRESET, CONFIG_ARG)
def cmd_probe(args) -> int:
    from trainperf import matrix
    from workloads import probe
    cell = matrix.cell(_config(args), args.workload, args.variant)
    if cell["status"] == "skipped":
        raise ValueError(f"{args.workload}/{args.variant} is skipped here: {cell['reason']}")
    for row in probe.probe(cell["spec"], args.steps):
        print(json.dumps(row), flush=True)
    return 0


@command("pending", "a machine's cells without a record (skipped, or not run yet) as JSON",
         arg("--machine", required=True, help="the machine's name, as in runs/<machine>/"),
         arg("--gpus", type=int, required=True, help="its GPUs (0: the cpu preset)"),
         arg("--repetitions", type=int, help="timing repetitions to expect (default: the preset's)"),
         arg("--reason", default="not run", help="the reason given to a cell not run yet"),
         arg("--aside", nargs=2, action="append", default=[], metavar=("DIR", "WHY"),
             help="a folder of records set aside (laid out as runs/<machine>/) and why they are not used: "
             "their cells are listed as set aside (repeatable)"),
         CONFIG_ARG, arg("--out", required=True))
def cmd_pending(args) -> int:
    """The cells of a machine's matrix without a record, for `aggregate --skipped`: those the
    matrix skips there (with why) and those not run yet (with --reason)."""
    from trainperf import config, matrix
    gpu = args.gpus > 0
    cfg = config.load(args.config, {"gpu_jobs": gpu, "machine": args.machine, "preset": "gpu" if gpu else "cpu"})
    if args.repetitions:
        cfg["presets"][cfg["preset"]]["repetitions"] = args.repetitions
    cfg = {**matrix.resolve(cfg), "gpus": args.gpus}
    cells = [c for c in matrix.cells(cfg) if c["status"] == "skipped"
             or not Path(matrix.record_path(cfg, **c["keys"])).exists()]

    def entry(c: dict) -> dict:
        """A cell whose record was set aside (in an --aside folder, laid out as runs/<machine>/) says
        so, with that folder's reason (the first folder that holds it)."""
        path = Path(matrix.record_path(cfg, **c["keys"])).relative_to(f"runs/{args.machine}")
        why = next((why for folder, why in args.aside if (Path(folder) / path).exists()), None)
        if not c["reason"] and why:
            return {"keys": c["keys"], "status": "set aside", "reason": why}
        return {"keys": c["keys"], "reason": c["reason"] or args.reason}
    write_json(args.out, [entry(c) for c in cells])
    print(f"{len(cells)} cells without a record -> {args.out}")
    return 0


@command("aggregate", "run records -> metrics.csv, summary.csv, cells.csv",
         arg("runs", nargs="+", help="run records (metrics.json) or sweep lists of them"),
         arg("--skipped", help="JSON file of skipped cells"),
         arg("--compiles", nargs="*", default=[], help="the compile stage's records (runs/<machine>/compiled/*.json)"),
         arg("--out-dir", required=True),
         arg("--config", default=CONFIG, help="the config whose variants' kinds and order the tables carry"),
         arg("--gpu-hour-price", type=float, help="the price of one GPU-hour: the report's cost per million samples"))
def cmd_aggregate(args) -> int:
    import workloads
    from analysis import aggregate
    from trainperf import config, variants
    skipped = json.loads(Path(args.skipped).read_text()) if args.skipped else []
    catalog = variants.catalog(config.load(args.config))
    study = {"gpu_hour_price": args.gpu_hour_price, "workloads": workloads.names()}  # the report names any not measured
    aggregate.main(args.runs, skipped, args.out_dir, args.compiles, catalog, study,
                   committed_only=True)  # what it writes is published: no record of an uncommitted tree
    return 0


@command("undecided", "the cells of every ratio whose interval holds 1.0 from too few pairs (what the "
         "pipeline's confirming repetitions run again)",
         arg("ratios", help="a ratios.csv (trainperf aggregate)"),
         arg("--pairs", type=int, required=True, help="the pairs a ratio not established is measured up to"),
         arg("--out", required=True))
def cmd_undecided(args) -> int:
    import pandas as pd
    from analysis import paired
    cells = paired.undecided(pd.read_csv(args.ratios), args.pairs)
    write_json(args.out, cells)
    print(f"{len(cells)} cells in ratios not established from fewer than {args.pairs} pairs -> {args.out}")
    return 0


@command("new", "scaffold a workload file and its test",
         arg("name", help="the workload's name (a Python module name, e.g. my_model)"),
         arg("--kind", choices=["vision", "sequence"], required=True),
         arg("--root", default=".", help="the project's root (default: here)"))
def cmd_new(args) -> int:
    from trainperf import scaffold
    files = scaffold.new(args.name, args.kind, args.root)
    print(scaffold.NEXT_STEPS.format(files=", ".join(map(str, files)), workload=files[0], name=args.name))
    return 0


@command("compare", "two results folders: per cell B / A with its interval; exit 1 on a regression beyond "
         "the threshold",
         arg("a", help="the reference results folder, e.g. results/h200"),
         arg("b", help="the results folder compared with it, e.g. results/h100"),
         arg("--threshold", type=float, default=0.05,
             help="a regression: B / A's whole interval below 1 - threshold (default 0.05)"),
         arg("--out", help="write the comparison as CSV too"))
def cmd_compare(args) -> int:
    from analysis import compare
    from analysis.tables import num, table
    df = compare.compare(args.a, args.b, args.threshold)
    if args.out:
        df.to_csv(args.out, index=False)
    shown = df.assign(a=df.a.map(num), b=df.b.map(num), **{"B / A": [
        f"{r:.3g}x" + ("" if math.isnan(lo) else f" [{lo:.3g}, {hi:.3g}]") + ("" if p else " not paired")
        for r, lo, hi, p in zip(df.ratio, df.lo, df.hi, df.paired)]})
    print(f"B = {args.b} against A = {args.a} (throughput; threshold {args.threshold:.0%}):\n")
    print(table(shown[["workload", "variant", "profiler", "a", "b", "B / A", "n", "verdict"]]))
    worse = df[df.verdict == "regression"]
    for r in worse.itertuples():
        print(f"trainperf: regression: {r.workload}/{r.variant} ({r.profiler}) {r.ratio:.3g}x [{r.lo:.3g}, {r.hi:.3g}]",
              file=sys.stderr)
    return 1 if len(worse) else 0


@command("machines", "results/README.md: every machine's results folder side by side",
         arg("root", nargs="?", default="results", help="the folder of the machines' results folders"))
def cmd_machines(args) -> int:
    from analysis import machines
    print(machines.render(args.root))
    return 0


@command("report", "results/<machine>/ tables -> REPORT.md, APPENDIX.md, figures and report.html",
         arg("results", help="the results folder, e.g. results/h200"))
def cmd_report(args) -> int:
    from analysis import html, report
    print(report.render(args.results))
    print(html.render(args.results))
    return 0


@command("env", "print this machine's environment fingerprint")
def cmd_env(args) -> int:
    from workloads import env
    print(json.dumps({"machine": env.machine_slug(), **env.fingerprint()}, indent=1))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainperf", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for name, (func, help, arguments) in COMMANDS.items():
        s = sub.add_parser(name, help=help)
        for names, options in arguments:
            if names == "one_of":
                group = s.add_mutually_exclusive_group(required=True)
                for n, o in options:
                    group.add_argument(*n, **o)
            else:
                s.add_argument(*names, **options)
        s.set_defaults(func=func)
    return p


def main(argv=None) -> int:
    from workloads.base import WorkloadError
    from trainperf.config import ConfigError
    args = parser().parse_args(argv)
    if args.command == "run" and not args.spec and not args.workload:
        parser().error("run needs a workload name or --spec")
    if args.command == "compile" and not (args.jobs or (args.spec and args.out)):
        parser().error("compile needs --jobs, or --spec and --out")
    try:
        return args.func(args)
    except (ConfigError, KeyError, FileNotFoundError, FileExistsError, ValueError, WorkloadError) as e:
        message = e if isinstance(e, OSError) or not e.args else e.args[0]  # OSError: errno + path
        print(f"trainperf: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
