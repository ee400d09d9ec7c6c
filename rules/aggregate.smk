# Every run record (and every skipped cell with its reason) -> tidy tables for this machine.


rule aggregate:
    input:
        sweeps_of(),
    output:
        metrics=f"results/{MACHINE}/metrics.csv",
        cells=f"results/{MACHINE}/cells.csv",
        summary=report(f"results/{MACHINE}/summary.csv", caption="../report/summary.rst", category="Tables"),
        env=f"results/{MACHINE}/env.json",
    params:
        skipped=json.dumps([{"keys": c["keys"], "reason": c["reason"]} for c in SKIPPED]),
    log:
        f"runs/{MACHINE}/logs/aggregate.log",
    shell:
        "echo {params.skipped:q} > runs/{MACHINE}/skipped.json && "
        "trainperf aggregate {input} --skipped runs/{MACHINE}/skipped.json "
        "--out-dir results/{MACHINE} > {log} 2>&1"


rule report:
    input:
        rules.aggregate.output,
        f"results/{MACHINE}/limits.json",
    output:
        report(f"results/{MACHINE}/REPORT.md", caption="../report/report_md.rst", category="Report"),
        report(directory(f"results/{MACHINE}/figures"), patterns=["{name}.png"], caption="../report/figures.rst",
               category="Figures"),
    log:
        f"runs/{MACHINE}/logs/report.log",
    shell:
        "trainperf report results/{MACHINE} > {log} 2>&1"


rule limits:
    input:
        [ancient(p) for p in sorted({specs[0][0]["data"] for specs in SWEEPS.values()})],
    output:
        f"results/{MACHINE}/limits.json",
    params:
        specs=json.dumps({k[0]: v[0][0] for k, v in SWEEPS.items()}),
    log:
        f"runs/{MACHINE}/logs/limits.log",
    resources:
        gpu=GPU,
    shell:
        "trainperf limits --specs {params.specs:q} --out {output} > {log} 2>&1"
