"""Log facts for every suite's parser: :mod:`.lines` (reading, ranks, text facts, the Scanner), :mod:`.clocks`
(timestamps) and :mod:`.window` (the measurement window and the log verdict). Parsing knows nothing of schedulers:
the final status of a run is :mod:`dlperf_slurm.outcome.decision`'s decision.

Suites import this package at the top: ``from dlperf_slurm import parsing as lp``.
"""

from dlperf_slurm.parsing.clocks import EpochClock, GlogClock, IsoClock
from dlperf_slurm.parsing.lines import (
                                        CONSUMED,
                                        FRAGMENT,
                                        MAX_FRAGMENT,
                                        MAX_LINE,
                                        MAX_REASON,
                                        NOT_MINE,
                                        NUM,
                                        Facts,
                                        Scanner,
                                        Short,
                                        finite,
                                        iter_text_lines,
                                        oom_text,
                                        read_lines,
                                        slurm_kill,
                                        split_rank,
                                        to_float,
)
from dlperf_slurm.parsing.window import Window, WindowFigures, finish

__all__ = ["CONSUMED", "FRAGMENT", "MAX_FRAGMENT", "MAX_LINE", "MAX_REASON", "NOT_MINE", "NUM", "EpochClock", "Facts",
           "GlogClock", "IsoClock", "Scanner", "Short", "Window", "WindowFigures", "finish", "finite",
           "iter_text_lines", "oom_text", "read_lines", "slurm_kill", "split_rank", "to_float"]
