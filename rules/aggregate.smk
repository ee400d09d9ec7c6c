# Every run record (and every skipped cell with its reason) -> tidy tables for this machine.


rule aggregate:
    input:
        runs_of(),
    output:
        metrics=f"results/{MACHINE}/metrics.csv",
        cells=f"results/{MACHINE}/cells.csv",
        summary=f"results/{MACHINE}/summary.csv",
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
    output:
        f"results/{MACHINE}/REPORT.md",
    log:
        f"runs/{MACHINE}/logs/report.log",
    shell:
        "trainperf report results/{MACHINE} > {log} 2>&1"
