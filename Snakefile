# The study's pipeline: expand the matrix, run every cell, aggregate. `snakemake --cores 1`.
# The matrix and presets live in config/config.yaml (validated against config/schema.yaml).
configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"


localrules:
    all,
    machines,
    records,
    check,

include: "rules/data.smk"
include: "rules/run.smk"
include: "rules/aggregate.smk"


rule all:
    input:
        f"results/{MACHINE}/REPORT.md",
        "results/README.md",
        f"results/{MACHINE}/limits.json",
        f"results/{MACHINE}/records/metrics-json.tgz",
        f"runs/{MACHINE}/checked",
        sweeps_of(),  # each asked for itself: a sweep whose records were deleted runs again
        confirming,
