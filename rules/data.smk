# Generated datasets, built once per preset and shared by every run.
_P = R["presets"][PRESET]


rule images:
    output:
        directory(f"{R['data_root']}/{PRESET}/images"),
    params:
        n=_P["images"],
        classes=_P["classes"],
        seed=R["seed"],
    log:
        f"runs/{MACHINE}/logs/images.log",
    shell:
        "trainperf data images --out {output} --n {params.n} --classes {params.classes} "
        "--seed {params.seed} > {log} 2>&1"


rule tokens:
    output:
        f"{R['data_root']}/{PRESET}/tokens.npy",
    params:
        n=_P["tokens"],
        seed=R["seed"],
    log:
        f"runs/{MACHINE}/logs/tokens.log",
    shell:
        "trainperf data tokens --out {output} --n {params.n} --seed {params.seed} > {log} 2>&1"
