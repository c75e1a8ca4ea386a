"""Reading what ran: the runs gathered from a campaign or a log tree and parsed (:mod:`.drive`), one run's
files to its row (:mod:`.runparse`), runs to cells (:mod:`.cells`), the parse cache (:mod:`.parsecache`), the
parser processes (:mod:`.processes`), one run explained (:mod:`.explain`) and the top-up plan
(:mod:`.topup`).

May import: :mod:`dlperf_slurm.campaign` and below; never :mod:`dlperf_slurm.submit` (its sibling), report,
compare or store."""
