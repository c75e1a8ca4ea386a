"""The results store across campaigns: the database and all its SQL (:mod:`.database`), what a collect files
there (:mod:`.filing`) and a cell's history read back (:mod:`.history`).

May import: :mod:`dlperf_slurm.compare` and below."""
