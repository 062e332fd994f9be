"""The errors that are the user's: what they gave (a path, an option, a dataset) cannot be used.

Every package raises these, from `envs` up, so they live at the bottom (`envs` imports nothing
above it); the command line (`videoseek/cli.py`) prints one as a single line and exits 2.

- `UserError`: an option, a path or a combination of them that cannot work.
- `DataError`: a dataset row, file or video that cannot be used; the message names where and what.
  It is a `UserError` (the CLI treats both alike) and a `ValueError` (so code that validates
  values catches it as it always did).

`videoseek.cli.UserError` and `videoseek.envs.sample.DataError` are these same classes.

>>> issubclass(DataError, UserError) and issubclass(DataError, ValueError)
True
"""

from __future__ import annotations

__all__ = ["DataError", "UserError"]


class UserError(Exception):
    """An error in what the user gave (path, data, option): printed as one line, exit code 2."""


class DataError(UserError, ValueError):
    """A dataset row or video that cannot be used; the message names where and what."""
