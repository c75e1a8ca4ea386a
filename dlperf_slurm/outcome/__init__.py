"""A run's status, decided once: the precedence table and :func:`.decision.decide` (:mod:`.decision`), the
evidence it reads besides the scheduler (:mod:`.evidence`: the log's verdict, the exit marker, a kill banner, a
log changed after the run ended) and the exit status a CI job reads from a campaign's statuses
(:mod:`.exitstatus`).

May import: :mod:`dlperf_slurm.model`, :mod:`dlperf_slurm.parsing`, :mod:`dlperf_slurm.suites` and the ground
modules."""
