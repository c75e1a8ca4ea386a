"""User-facing errors: one clear line, no traceback, non-zero exit."""

from __future__ import annotations
from dlperf_slurm.words import plural


class UserError(Exception):
    """A mistake in the user's input (matrix, site file, command line).

    The CLI prints ``str(err)`` on one line and exits with status 2.
    """


class MatrixError(UserError):
    """A bad matrix: names the file, the key (and the line where it is known)."""

    def __init__(self, path: str, key: str | None, message: str, line: int | None = None):
        self.path, self.key, self.line, self.message = path, key, line, message
        where = str(path)
        if line is not None:
            where += f":{line}"
        if key:
            where += f": {key}"
        super().__init__(f"{where}: {message}")


class SchedulerError(UserError):
    """A scheduler command failed; the message names the command and the scheduler's own words."""

    def __init__(self, message: str, command=(), stderr: str = ""):
        self.command, self.stderr = list(command), stderr
        super().__init__(message)


class ControllerUnreachable(SchedulerError):
    """The scheduler's controller does not answer (down, wrong configuration, network)."""


class SubmissionRefused(SchedulerError):
    """The scheduler said no: a bad partition/account/QOS, a submit limit, an invalid option."""


class SubmitAborted(UserError):
    """A submission failed half-way; what was submitted before stays recorded."""

    def __init__(self, cause: Exception, submitted_runs: int, remaining_runs: int, unknown_runs: int = 0):
        self.cause, self.submitted_runs, self.remaining_runs = cause, submitted_runs, remaining_runs
        self.unknown_runs = unknown_runs
        maybe = (f", {unknown_runs} may have reached the scheduler (it could not be asked; the next submit asks "
                 "before sending them again)" if unknown_runs else "")
        super().__init__(f"{cause} -- submission stopped: {plural(submitted_runs, 'run was', 'runs were')} submitted "
                         f"and are recorded{maybe}, {remaining_runs} were not (run submit again once the cause is "
                         "fixed)")
