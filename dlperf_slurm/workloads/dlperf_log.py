"""Moved to :mod:`dlperf_slurm.events` (the line format with every event name and key). This re-export keeps the
old import path working for readers not yet switched over; new code imports ``dlperf_slurm.events``."""

from dlperf_slurm.events import PREFIX, emit, format_line, parse_event, parse_line

__all__ = ["PREFIX", "emit", "format_line", "parse_event", "parse_line"]
