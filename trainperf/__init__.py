"""Orchestration: the config, the matrix of cells, sweeps, the compile stage and the `trainperf`
command; the only layer that imports workloads, profiles and analysis."""
