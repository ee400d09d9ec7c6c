# Every run record (and every skipped cell with its reason) -> tidy tables for this machine.


rule aggregate:
    input:
        sweeps=sweeps_of(),
        compiles=compile_records(),
    output:
        metrics=f"results/{MACHINE}/metrics.csv",
        cells=f"results/{MACHINE}/cells.csv",
        summary=report(f"results/{MACHINE}/summary.csv", caption="../report/summary.rst", category="Tables"),
        env=f"results/{MACHINE}/env.json",
        skipped=f"results/{MACHINE}/records/skipped.json",
    params:
        skipped=json.dumps([{"keys": c["keys"], "reason": c["reason"]} for c in SKIPPED]),
    log:
        f"runs/{MACHINE}/logs/aggregate.log",
    shell:
        "echo {params.skipped:q} > {output.skipped} && "
        "trainperf aggregate {input.sweeps} --compiles {input.compiles} --skipped {output.skipped} --out-dir $(dirname {output.summary}) > {log} 2>&1"


rule records:
    """The raw run records every table is made from, and the sweeps' logs, packed beside the
    results (the profilers' traces stay in runs/: too large to publish)."""
    input:
        sweeps_of(),
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
        figures=report(directory(f"results/{MACHINE}/figures"), patterns=["{name}.png"], caption="../report/figures.rst",
               category="Figures"),
    log:
        f"runs/{MACHINE}/logs/report.log",
    shell:
        "trainperf report $(dirname {output.md}) > {log} 2>&1"


rule limits:
    input:
        [ancient(p) for p in sorted({specs[0][0]["data"] for specs in SWEEPS.values()})],
    output:
        f"results/{MACHINE}/limits.json",
    params:
        specs=json.dumps(one_spec_per_workload()),
    log:
        f"runs/{MACHINE}/logs/limits.log",
    resources:
        gpu=GPU,
    shell:
        "trainperf limits --specs {params.specs:q} --out {output} > {log} 2>&1"
