"""The record of what was sent and where it stands: campaign folders and their lock (:mod:`.folders`), the
manifest and its typed rows (:mod:`.manifest`, :mod:`.records`, :mod:`.schema`), which campaign is which
(:mod:`.identity`), one campaign one matrix (:mod:`.revisions`), keeping the manifest in step with the
schedulers (:mod:`.tracking`), watching it (:mod:`.monitor`) and rebuilding it (:mod:`.doctor`).

May import: :mod:`dlperf_slurm.outcome`, :mod:`dlperf_slurm.matrix`, :mod:`dlperf_slurm.schedulers` and
below; never submit, collect, report, compare or store."""
