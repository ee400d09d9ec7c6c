# The cells run in sweeps: one process per workload x profiler x repetition imports once and runs
# its variants one after another, each in a fresh model (trainperf/sweep.py says how failures stay
# isolated). A workload's repetition r starts once its timing sweep of repetition r-1 has
# finished, so each repetition sweeps all its variants (drift spread evenly). The datasets are
# deterministic from the seed, so a dataset rebuilt on another machine does not invalidate the
# runs: ancient() ignores its time stamp. torch.compile's caches live in the project (.cache/inductor), one folder per
# combination of the knobs that can change a traced graph (workloads/compiled.py says why), shared
# by the cells and later pipelines on this machine: a graph compiled once is loaded, not compiled.
# The compile stage builds them all before the first sweep, several at once (trainperf/precompile.py).


if COMPILES:

    rule compile:
        """Every torch.compile cache folder of the matrix, `compile_jobs` at a time, before any
        sweep starts (a folder already built loads in seconds: a rerun costs little)."""
        input:
            [ancient(p) for p in sorted({spec["data"] for spec in COMPILES.values()})],
        output:
            compile_records(),
        params:
            jobs=json.dumps([[spec, path] for spec, path in zip(COMPILES.values(), compile_records())]),
            parallel=R["compile_jobs"],
        log:
            f"runs/{MACHINE}/logs/compile.log",
        resources:
            gpu=GPU,
        shell:
            "TRAINPERF_COMPILE_CACHE=$PWD/.cache/inductor trainperf compile --jobs {params.jobs:q} "
            "--parallel {params.parallel} > {log} 2>&1"


rule sweep:
    input:
        unpack(sweep_inputs),
    output:
        f"runs/{MACHINE}/sweeps/{{workload}}.{{profiler}}.rep{{rep}}.json",
    log:
        f"runs/{MACHINE}/logs/{{workload}}.{{profiler}}.rep{{rep}}.log",
    params:
        cells=lambda wc: sweep_params(wc)["cells"],
        specs=lambda wc: sweep_params(wc)["specs"],
        jobs=lambda wc: sweep_path(wc.workload, wc.profiler, wc.rep, suffix="jobs"),
    resources:
        gpu=lambda wc: GPUS[wc.workload],
    shell:
        "TRAINPERF_COMPILE_CACHE=$PWD/.cache/inductor trainperf sweep --jobs-file {params.jobs} --out {output} "
        "2>&1 | tee {log}"

