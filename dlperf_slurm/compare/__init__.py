"""Judging a change: the rule (:mod:`.rule`: Welch's t on log throughput, the verdict and its gate), its forms
(:mod:`.forms`: markdown, terminal, JUnit) and a campaign against a published reference set
(:mod:`.published`, the sets in :mod:`.references`).

May import: :mod:`dlperf_slurm.report` and below; never :mod:`dlperf_slurm.store`."""
