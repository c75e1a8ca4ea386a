"""What a job runs on its nodes besides the benchmark program: the health gate (:mod:`.health`, its per-node
:mod:`.healthprobe`), the provenance probe (:mod:`.provprobe`, in the campaign's job code) and the matmul ceiling
(:mod:`.ceiling`).

These run in the program's Python, often inside a container, where dlperf_slurm's dependencies may be missing:
they import only the standard library, :mod:`dlperf_slurm.events` and each other (an import-linter contract in
``setup.cfg`` holds this)."""
