"""Source kinds, one module each. `open_store` picks the kind from what the user named."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.core.secrets import scrub
from pipeline.sources.errors import SourceError

if TYPE_CHECKING:
    from pipeline.sources.store.base import SessionStore


def is_postgres(spec: str) -> bool:
    return spec == "postgres" or spec.startswith(("postgresql://", "postgres://"))


def open_store(spec: str) -> SessionStore:
    """A PostgreSQL URL (or "postgres" for libpq environment variables) or a SQLite store directory."""
    if is_postgres(spec):
        from pipeline.sources.store.postgres import PostgresStore

        return PostgresStore(spec)
    from pipeline.sources.store.sqlite import SqliteStore

    path = Path(spec)
    if not path.exists():
        raise SourceError(f"{scrub(spec)}: no such directory, and not a postgresql:// URL")
    return SqliteStore(path)


def __getattr__(name: str):
    """`SessionStore` on first use: importing this package (e.g. for `SourceError`) loads no Arrow."""
    if name == "SessionStore":
        from pipeline.sources.store.base import SessionStore

        return SessionStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SessionStore", "SourceError", "is_postgres", "open_store"]
