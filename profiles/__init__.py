"""How a run is observed: the environment it ran in, and the profilers around its measured steps."""
