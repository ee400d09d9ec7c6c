# One process per cell. Repetition r starts once every cell of repetition r-1 has finished,
# so each repetition sweeps all variants (variants interleaved, drift spread evenly).
# The datasets are deterministic from the seed, so a dataset rebuilt on another machine (a newer
# file) does not invalidate the runs made from it: ancient() ignores its time stamp.
# torch.compile's caches live in the project (.cache/inductor), shared by every cell and every
# later pipeline on this machine: a graph compiled once is loaded, not compiled, by the next cell.


rule run:
    input:
        unpack(run_inputs),
    output:
        f"runs/{MACHINE}/{{workload}}/{{variant}}/{{profiler}}/rep{{rep}}/metrics.json",
    log:
        f"runs/{MACHINE}/{{workload}}/{{variant}}/{{profiler}}/rep{{rep}}/log.txt",
    params:
        spec=lambda wc: json.dumps(SPECS[(wc.workload, wc.variant, wc.profiler, int(wc.rep))]),
    resources:
        gpu=GPU,
    shell:
        "TORCHINDUCTOR_CACHE_DIR=$PWD/.cache/inductor trainperf run --spec {params.spec:q} --out {output} "
        "2>&1 | tee {log}"


rule repetition_done:
    input:
        lambda wc: runs_of(int(wc.rep)),
    output:
        touch(f"runs/{MACHINE}/rep{{rep}}.done"),
