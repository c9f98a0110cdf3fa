"""A PostgreSQL copy as the user named it: how we connect (read-only, one snapshot), how it is shown
(password redacted), how a failed connection is reported, and the source id it gets.

Shared by the store (pipeline/sources/store/postgres.py) and the change markers that a re-ingest
reads first (pipeline/sources/store/postgres_markers.py); it loads no driver and no Arrow.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import quote

from pipeline.core.secrets import HIDDEN, libpq_url, redact_url, scrub, secret_values
from pipeline.sources.errors import SourceError, one_line

SNAPSHOT_OPTIONS = "-c default_transaction_isolation=repeatable\\ read -c default_transaction_read_only=on"
# Seconds libpq waits for a server that does not answer, unless the URL or PGCONNECTTIMEOUT says otherwise.
CONNECT_TIMEOUT_SECONDS = 10
# A driver message is also searched for the password itself, but only a password this long: starring
# every "a" of a message would reveal a one-letter password rather than hide it.
MIN_LITERAL_SECRET = 4
# A role's connection limit counts a closed connection until its server process has exited: a connect
# right after a close is retried for this long (seconds) when the server says "too many connections".
CONNECTION_SLOT_WAIT = 5.0

T = TypeVar("T")


def redact(url: str) -> str:
    """The URL with its passwords replaced, for every message and every stored row."""
    if url in ("postgres", "postgresql://"):
        return "postgres (libpq environment)"
    return redact_url(url)


class PostgresAddress:
    """The URL (or `postgres` for the libpq environment) of a copy."""

    def __init__(self, url: str):
        self.display = redact(url)
        self._secrets = sorted(secret_values(url), key=len, reverse=True) if url != "postgres" else []
        self.url = self._with_snapshot_options("postgresql://" if url == "postgres" else libpq_url(url))

    @staticmethod
    def _with_snapshot_options(url: str) -> str:
        """Every transaction REPEATABLE READ and READ ONLY (libpq `options`), and a connect timeout."""
        sep = "&" if "?" in url else "?"
        url = f"{url}{sep}options={quote(SNAPSHOT_OPTIONS)}"
        if "connect_timeout=" not in url and "PGCONNECTTIMEOUT" not in os.environ:
            url += f"&connect_timeout={CONNECT_TIMEOUT_SECONDS}"
        return url

    def connect(self, open_connection: Callable[[], T]) -> T:
        """`open_connection()`, retried while the role's last connection still holds its slot; any
        other failure, or one that outlasts CONNECTION_SLOT_WAIT, is `cannot_connect`'s one line."""
        deadline = time.monotonic() + CONNECTION_SLOT_WAIT
        while True:
            try:
                return open_connection()
            except Exception as exc:
                if "too many connections" not in str(exc) or time.monotonic() > deadline:
                    raise self.cannot_connect(exc) from None
                time.sleep(0.05)

    def cannot_connect(self, exc: BaseException) -> SourceError:
        """The one-line error of a failed connection, without the password."""
        message = scrub(one_line(exc))
        for secret in self._secrets:  # longest first: a shorter one may be part of it
            if len(secret) >= MIN_LITERAL_SECRET:
                message = message.replace(secret, HIDDEN)
        return SourceError(f"{self.display}: cannot connect ({message})")

    def source_id(self, lineage_id: str | None) -> str:
        """The copy's source id: its storage lineage where it has one, else the redacted URL."""
        return f"lineage:{lineage_id}" if lineage_id else f"postgres:{self.display}"
