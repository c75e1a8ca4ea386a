"""The nouns every stage shares, and nothing else: run statuses (:mod:`.status`), the matrix, its cells and runs
(:mod:`.cell`), the matrix's configuration tables (:mod:`.config`), what a log and a scheduler say of one run
(:mod:`.result`) and the rows a collect writes (:mod:`.rows`).

May import: the standard library only (an import-linter contract in ``setup.cfg`` holds this)."""
