"""Fixtures of the ingest tests: a PostgreSQL copy ingested once per module, handed to each test afresh."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest


@dataclass(frozen=True)
class Ingested:
    """A fresh PostgreSQL copy (`url`) and a warehouse file (`warehouse`, the test's own) that ingested it
    `len(results)` times, with what each ingest returned."""

    url: str
    warehouse: Path
    results: tuple[Any, ...]


def _recreate(server: str, name: str, template: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


@pytest.fixture(scope="module")
def pg_ingested_once(pg_server, pg_copy_templates, tmp_path_factory):
    """A factory: `make(ingest, tmp_path, prepare=(), times=1, last_epoch=4, ledger=True, file="w.duckdb")` gives
    the test a database holding `timeline.copy(last_epoch)` (with its ledger), changed by the `prepare`
    statements, and a copy (`tmp_path / file`) of a warehouse that ran `ingest(warehouse, url)` on it `times`
    times. The ingests run once per module and arguments; each test gets the database re-made from its
    template under the very name those ingests read (the same URL, the same bytes), so the warehouse is
    exactly what the test's own ingests would leave. Calls that differ only in `ingest` or `times` share that
    database (one URL for both warehouses)."""
    copies: dict[tuple, tuple[str, str]] = {}  # (prepare, last_epoch, ledger): the database's name, its template
    built: dict[tuple, tuple[Path, tuple[Any, ...]]] = {}
    databases: list[str] = []

    def make(
        ingest: Callable[[Path, str], Any],
        tmp_path: Path,
        prepare: tuple[str, ...] = (),
        times: int = 1,
        last_epoch: int = 4,
        ledger: bool = True,
        file: str = "w.duckdb",
    ) -> Ingested:
        copy = (prepare, last_epoch, ledger)
        if copy not in copies:
            template = pg_copy_templates(last_epoch, ledger=ledger)
            if prepare:  # a template of the prepared copy, so that each test's database is made in one step
                prepared = f"ge_test_{uuid.uuid4().hex[:12]}"
                databases.append(prepared)
                _recreate(pg_server, prepared, template)
                with psycopg.connect(f"{pg_server}/{prepared}", autocommit=True) as pg:
                    for sql in prepare:
                        pg.execute(sql)
                template = prepared
            copies[copy] = (f"ge_test_{uuid.uuid4().hex[:12]}", template)
            databases.append(copies[copy][0])
        name, template = copies[copy]
        key = (ingest, times, *copy)
        if key not in built:
            _recreate(pg_server, name, template)  # as the template left it, whatever an earlier test did to it
            warehouse = tmp_path_factory.mktemp("ingested") / "w.duckdb"
            results = tuple(ingest(warehouse, f"{pg_server}/{name}") for _ in range(times))
            assert not warehouse.with_name(warehouse.name + ".wal").exists()  # the file alone is the warehouse
            built[key] = (warehouse, results)
        warehouse, results = built[key]
        _recreate(pg_server, name, template)
        own = tmp_path / file
        shutil.copyfile(warehouse, own)  # closed after its ingests, so checkpointed: the file is the warehouse
        return Ingested(f"{pg_server}/{name}", own, results)

    yield make
    with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
        for name in reversed(databases):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
