"""The root of every user error: the input, the request or the setup is wrong, and the command ends with one
line (exit code 1), never a traceback. Every one-line refusal of the library derives from `UserError`
(tests/test_architecture.py checks it); anything else that escapes a command is a bug."""

from __future__ import annotations


class UserError(Exception):
    """A one-line refusal: what is wrong and, where it helps, what to do."""
