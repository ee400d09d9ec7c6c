# Every run record (and every skipped cell with its reason) -> tidy tables for this machine.


checkpoint undecided:
    """After the first repetitions: the cells of every ratio whose interval holds 1.0 from fewer
    than CONFIRM pairs, which the confirming repetitions run again (only this matrix's records)."""
    input:
        sweeps=sweeps_of(),
        compiles=compile_records(),
    output:
        f"runs/{MACHINE}/undecided.json",
    params:
        tables=f"runs/{MACHINE}/first-pass",
        pairs=CONFIRM,
    log:
        f"runs/{MACHINE}/logs/undecided.log",
    shell:
        "(trainperf aggregate {input.sweeps} --out-dir {params.tables} && "
        "trainperf undecided {params.tables}/ratios.csv --pairs {params.pairs} --out {output}) > {log} 2>&1"


rule aggregate:
    """Every record on this machine (runs/<machine>/, whichever pipeline made it): a run of some
    workloads or variants adds to the tables of the others."""
    input:
        sweeps=sweeps_of(),
        confirming=confirming,
        compiles=compile_records(),
        skipped=f"runs/{MACHINE}/skipped.json",
    output:
        metrics=f"results/{MACHINE}/metrics.csv",
        cells=f"results/{MACHINE}/cells.csv",
        summary=report(f"results/{MACHINE}/summary.csv", caption="../report/summary.rst", category="Tables"),
        env=f"results/{MACHINE}/env.json",
        skipped=f"results/{MACHINE}/records/skipped.json",
    params:
        runs=lambda wc, input: str(Path(input.skipped).parent),  # the machine's runs: every record there
        price="" if R.get("gpu_hour_price") is None else f"--gpu-hour-price {R['gpu_hour_price']}",
    log:
        f"runs/{MACHINE}/logs/aggregate.log",
    shell:
        "cp {input.skipped} {output.skipped} && trainperf aggregate {params.runs} "
        "--compiles $(find {params.runs}/compiled -name '*.json' 2>/dev/null | sort) "
        "--skipped {output.skipped} {params.price} --out-dir $(dirname {output.summary}) > {log} 2>&1"


rule records:
    """The raw run records every table is made from, and the sweeps' logs, packed beside the
    results (the profilers' traces stay in runs/: too large to publish)."""
    input:
        sweeps_of(),
        confirming,
        compile_records(),
    output:
        records=f"results/{MACHINE}/records/metrics-json.tgz",
        logs=f"results/{MACHINE}/records/logs.tgz",
    log:
        f"runs/{MACHINE}/logs/records.log",
    shell:
        "cd $(dirname {log})/.. && tar -czf $OLDPWD/{output.records} "
        "$(find . -name metrics.json -o -path './compiled/*.json' | sort) && "
        "tar -czf $OLDPWD/{output.logs} --exclude records.log logs $(find . -path './compiled/*.log') 2> $OLDPWD/{log}"


rule report:
    input:
        rules.aggregate.output,
        f"results/{MACHINE}/limits.json",
    output:
        md=report(f"results/{MACHINE}/REPORT.md", caption="../report/report_md.rst", category="Report"),
        appendix=f"results/{MACHINE}/APPENDIX.md",
        html=f"results/{MACHINE}/report.html",
        figures=report(directory(f"results/{MACHINE}/figures"), patterns=["{name}.png"], caption="../report/figures.rst",
               category="Figures"),
    log:
        f"runs/{MACHINE}/logs/report.log",
    shell:
        "trainperf report $(dirname {output.md}) > {log} 2>&1"


rule machines:
    """results/README.md: every machine's results folder side by side (this one's included)."""
    input:
        f"results/{MACHINE}/REPORT.md",
    output:
        "results/README.md",
    log:
        f"runs/{MACHINE}/logs/machines.log",
    shell:
        "trainperf machines results > {log} 2>&1"


rule limits:
    """The model FLOPs per sample (counted each time) and the matmul peaks and memory bandwidth, measured
    once per set of runs (runs/<machine>/peaks.json keeps them: an output would be deleted before the job) after
    the last sweep, so that no training shares the cores or the GPU while they are measured."""
    input:
        [ancient(p) for p in sorted({specs[0][0]["data"] for specs in SWEEPS.values()})],
        [ancient(p) for p in sweeps_of()],
        confirming,
    output:
        f"results/{MACHINE}/limits.json",
    params:
        specs=json.dumps(one_spec_per_workload()),
        peaks=f"runs/{MACHINE}/peaks.json",
    log:
        f"runs/{MACHINE}/logs/limits.log",
    resources:
        gpu=GPU,
    shell:
        "trainperf limits --specs {params.specs:q} --peaks {params.peaks} --out {output} > {log} 2>&1"


rule check:
    """The pipeline fails, naming the workload, where every cell of a workload failed (after the
    report is written: the rest of the matrix is kept and shown)."""
    input:
        sweeps=sweeps_of(),
        report=f"results/{MACHINE}/REPORT.md",
    output:
        touch(f"runs/{MACHINE}/checked"),
    log:
        f"runs/{MACHINE}/logs/check.log",
    shell:
        "trainperf check {input.sweeps} 2>&1 | tee {log}"
