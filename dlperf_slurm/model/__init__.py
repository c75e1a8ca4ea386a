"""The nouns every stage shares, and nothing else: run statuses (:mod:`.status`), the matrix, its cells and runs
(:mod:`.cell`), the matrix's configuration tables (:mod:`.config`), what a log and a scheduler say of one run
(:mod:`.result`) and the rows a collect writes (:mod:`.rows`).

May import: the standard library, :mod:`dlperf_slurm.errors`, :mod:`dlperf_slurm.stats`. Nothing above."""
