"""dlperf_slurm: DLPerf-style deep-learning training benchmarks, automated on Slurm."""

__version__ = "0.1.0"
