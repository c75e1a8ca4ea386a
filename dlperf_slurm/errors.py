"""User-facing errors: one clear line, no traceback, non-zero exit."""

from __future__ import annotations


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
