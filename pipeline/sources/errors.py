"""The error every source raises, in a module of its own: naming it loads no reader (Arrow, drivers)."""

from __future__ import annotations

from pipeline.core.errors import UserError


class SourceError(UserError):
    """A problem with the source the user named; the message is one line, without secrets."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """A driver error as one short line (libpq and ADBC spread theirs over several lines)."""
    text = " ".join(str(exc).split())
    for noise in ("IO: [libpq] ", "INVALID_ARGUMENT: [libpq] ", "INVALID_STATE: [libpq] ", "[SQLite] "):
        text = text.replace(noise, "")
    return text if len(text) <= limit else text[: limit - 1] + "…"
