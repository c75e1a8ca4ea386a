"""A collect's summaries: the writers of every format (:mod:`.writers`), the text tables (:mod:`.tables`), the
plots (:mod:`.plots`), the HTML page (:mod:`.htmlpage`, :mod:`.mdhtml`), the study tables (:mod:`.studies`,
:mod:`.widedeep`), the System section (:mod:`.system`), the network explanation (:mod:`.network`) and the
stragglers (:mod:`.stragglers`).

May import: :mod:`dlperf_slurm.collect` and below; never compare or store (the trend a page shows is handed to
it)."""
