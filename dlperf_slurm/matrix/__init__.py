"""A matrix, from TOML to cells: the file read with the line of every key (:mod:`.toml_source`), the matrix
loaded and validated (:mod:`.loader`), its axes and include/exclude rules (:mod:`.axes`), the ``[measure]``
table (:mod:`.measure`), the site files' defaults and the folders they name (:mod:`.sitefile`), shapes relative to
a node's GPUs (:mod:`.nodegpus`), the GPU-hours runs ask for (:mod:`.gpuhours`), the search for the largest batch
that fits (:mod:`.search`) and the cell selection every command takes (:mod:`.select`).

May import: :mod:`dlperf_slurm.model`, :mod:`dlperf_slurm.suites`, :mod:`dlperf_slurm.launchers` and the
ground modules; never a stage above (campaign, submit, collect, report, compare, store)."""
