"""Sending a campaign: each run's sbatch script rendered from the templates (:mod:`.render`), what is checked
before anything starts (:mod:`.guard`) and the journal that makes every submission step recoverable
(:mod:`.journal`).

May import: :mod:`dlperf_slurm.campaign` and below; never :mod:`dlperf_slurm.collect` (its sibling: a top-up is
planned by ``commands/submit``), report, compare or store."""
