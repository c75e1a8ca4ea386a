"""The command handlers, one module per command (``commands/<name>.py`` holds ``cmd_<name>(args)``).

Only :mod:`dlperf_slurm.cli` imports this package (by name, when a command runs); no stage module imports it, so
the stages never reach up into the command line (tests/test_structure.py checks both, lazy imports included).
A handler checks its arguments, calls the stages and prints; the work itself lives in the stage modules, imported
inside the handlers or at the top of a command module (which is itself imported only when its command runs).
"""
