"""Shared fixtures: a real PostgreSQL server, throwaway databases, generated sample copies.

PostgreSQL is found through GONKA_EVIDENCE_TEST_PG (a server URL without a
database, e.g. postgresql://postgres@127.0.0.1:5432), else 127.0.0.1:5432 as
user postgres, else a throwaway cluster started by pytest-postgresql from the
installed server binaries.
"""

from __future__ import annotations

import glob
import os
import uuid
from pathlib import Path

import psycopg
import pytest
from pytest_postgresql import factories

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
_pg_ctl = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
postgresql_proc = factories.postgresql_proc(executable=_pg_ctl[-1] if _pg_ctl else None, port=None)


def _reachable(server: str) -> bool:
    try:
        with psycopg.connect(f"{server}/postgres", connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@pytest.fixture(scope="session")
def pg_server(request) -> str:
    server = os.environ.get("GONKA_EVIDENCE_TEST_PG", DEFAULT_SERVER).rstrip("/")
    if _reachable(server):
        return server
    proc = request.getfixturevalue("postgresql_proc")
    return f"postgresql://{proc.user}@{proc.host}:{proc.port}"


@pytest.fixture
def pg_database(pg_server):
    """A factory of empty databases, dropped when the test ends: call it to get a URL."""
    created: list[str] = []

    def make() -> str:
        name = f"ge_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return f"{pg_server}/{name}"

    yield make
    with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def timeline():
    from pipeline.samples import SampleSpec, generate_timeline

    return generate_timeline(SampleSpec(seed=11))


@pytest.fixture
def sqlite_copy(tmp_path, timeline):
    """A factory: the SQLite store directory of `timeline.copy(last_epoch)`."""

    def make(last_epoch: int = 4, name: str = "store") -> Path:
        store = tmp_path / f"{name}-{last_epoch}"
        timeline.copy(last_epoch=last_epoch).write_sqlite(store)
        return store

    return make


@pytest.fixture
def pg_copy(pg_database, timeline):
    """A factory: a PostgreSQL database holding `timeline.copy(last_epoch)`; returns its URL."""

    def make(last_epoch: int = 4) -> str:
        url = pg_database()
        timeline.copy(last_epoch=last_epoch).write_postgres(url)
        return url

    return make
