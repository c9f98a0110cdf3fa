"""Shared fixtures: a real PostgreSQL server, throwaway databases, generated sample copies; and the unit tier.

Sample warehouses are built by tests/factories.py, helpers shared by tests live in tests/helpers.py.

PostgreSQL is found through GONKA_EVIDENCE_TEST_PG (a server URL without a
database, e.g. postgresql://postgres@127.0.0.1:5432), else 127.0.0.1:5432 as
user postgres, else a throwaway cluster started by pytest-postgresql from the
installed server binaries.
"""

from __future__ import annotations

import glob
import os
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from pytest_postgresql import factories

# Bytecode caches on, here and in the commands the tests start: with PYTHONDONTWRITEBYTECODE set (as some
# shells and CI images do), each test process rewrote every test module's asserts and each command compiled
# the package again: 8% of the default tier's CPU (bench/BENCHMARKS.md).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

TESTS = Path(__file__).resolve().parent
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
_pg_ctl = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
postgresql_proc = factories.postgresql_proc(executable=_pg_ctl[-1] if _pg_ctl else None, port=None)
_SAMPLES_KEY = pytest.StashKey[dict[str, str]]()  # data-samples/ as the run found it


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
    """A factory of empty databases (or, given `template`, copies of that database), dropped when the test
    ends: call it to get a URL."""
    created: list[str] = []

    def make(template: str | None = None) -> str:
        name = f"ge_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
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


@pytest.fixture(scope="session")
def pg_copy_templates(pg_server, timeline):
    """Databases holding `timeline.copy(last_epoch)` (with its ledger, given `ledger`), each written once per test
    process and never connected to again but as a template (`pg_copy`); dropped when the process ends."""
    written: dict[tuple[int, bool], str] = {}

    def template(last_epoch: int, ledger: bool = False) -> str:
        key = (last_epoch, ledger)
        if key not in written:
            name = f"ge_template_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            written[key] = name  # before the write, so a failed write is dropped too
            timeline.copy(last_epoch=last_epoch).write_postgres(f"{pg_server}/{name}", ledger=ledger)
        return written[key]

    yield template
    with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
        for name in written.values():
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_copy(pg_database, pg_copy_templates):
    """A factory: a PostgreSQL database holding `timeline.copy(last_epoch)`; returns its URL. The database is
    a server-side copy (CREATE DATABASE … TEMPLATE) of one written once: a fraction of writing it again."""

    def make(last_epoch: int = 4) -> str:
        return pg_database(template=pg_copy_templates(last_epoch))

    return make


# The unit tier (`pytest -m unit`): tests of pure functions (grammars, decoders, statistics, renderers)
# that need no database server, no sample warehouse and no CLI subprocess. Entries are files or folders under
# tests/, or `file::test` for one test of a mixed file.
UNIT = (
    "cli/test_interrupts.py::test_a_ctrl_c_that_duckdb_reports_is_an_interrupt_however_it_is_wrapped",
    "core/test_parallel.py",
    "core/test_resources.py",
    "test_architecture.py",
    "evidence/test_stats.py",
    "evidence/test_stats_of_tables.py::test_infinite_and_undefined_odds_ratios_are_told_apart",
    "evidence/test_stats_of_tables.py::test_pooled_interval_says_why_it_is_missing",
    "evidence/test_stats_of_tables.py::test_breslow_day_sees_opposite_effects_the_pooled_ratio_hides",
    "evidence/test_stats_of_tables.py::test_holm_and_ffh_and_bootstrap_against_scipy_statsmodels",
    "evidence/test_stats_of_tables.py::test_a_tracker_flag_counted_on_more_answers_than_delivered_has_a_share_but_no_interval_or_test",
    "output/render/",
    "sources/decode/test_checkpoints.py",
    "sources/logs/test_vllm_grammar.py",
    "sources/logs/test_vllm_config.py",
    "sources/store/test_release_lines.py::test_checkpoint_blobs_with_and_without_the_root_prefix",
    "transforms/",
)
# Pure, but seconds each (every chunk cut of every line, seeded mutations): left to the default tier.
UNIT_EXCEPT = (
    "sources/logs/test_vllm_grammar.py::test_generated_logs_of_every_version",
    "sources/logs/test_vllm_grammar.py::test_edge_log",
    "sources/logs/test_vllm_grammar.py::test_random_lines",
    "sources/logs/test_vllm_grammar.py::test_a_code_or_byte_anywhere_in_a_line",
    "transforms/test_answer_scan.py::test_random_mutations",
    "sources/logs/test_vllm_config.py::test_real_start_lines_fingerprint_by_what_they_state",  # a warehouse
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads -n
def pytest_cmdline_main(config: pytest.Config) -> None:
    # `-m unit` is seconds of work: one process beats two workers that each import every test module.
    numprocesses_given = any(a.startswith(("-n", "--numprocesses")) for a in config.invocation_params.args)
    if config.option.markexpr == "unit" and not numprocesses_given:
        config.option.numprocesses = 0


def _unit_entry(item: pytest.Item) -> str | None:
    path = Path(item.path).resolve()
    if not path.is_relative_to(TESTS):  # bench/ tests, when collected with these
        return None
    rel = path.relative_to(TESTS).as_posix()
    test = f"{rel}::{item.name.split('[')[0]}"
    if test in UNIT_EXCEPT:
        return None
    return next((e for e in UNIT if e == test or (("::" not in e) and (rel == e or rel.startswith(e)))), None)


def _stale(entry: str) -> bool:
    """An entry that names a missing file, or a test its file no longer defines."""
    path, _, test = entry.partition("::")
    if not (TESTS / path).exists():
        return True
    return bool(test) and f"def {test}(" not in (TESTS / path).read_text()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stale = [e for e in UNIT + UNIT_EXCEPT if _stale(e)]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py UNIT names no test: {', '.join(stale)}")
    for item in items:
        if _unit_entry(item) is not None:
            item.add_marker(pytest.mark.unit)


def _samples_digest() -> dict[str, str]:
    from pipeline.core.paths import DATA_SAMPLES_DIR
    from tests.fuzz.oracle import tree_digest

    return tree_digest(DATA_SAMPLES_DIR)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist) watches
        session.config.stash[_SAMPLES_KEY] = _samples_digest()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Sources are never written: a test that changed data-samples/ fails the run, whichever test it was.
    before = session.config.stash.get(_SAMPLES_KEY, None)
    if before is None:
        return
    after = _samples_digest()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(f"data-samples/ changed during the run: {', '.join(changed)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
