# The study's pipeline: expand the matrix, run every cell, aggregate. `snakemake --cores 1`.
# The matrix and presets live in config/config.yaml (validated against config/schema.yaml).
configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/run.smk"
include: "rules/aggregate.smk"


rule all:
    input:
        f"results/{MACHINE}/REPORT.md",
