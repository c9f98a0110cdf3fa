"""A hypothesis-driven fuzzer over everything a user can hand the command line: the sample store in
both layouts (SQLite files, PostgreSQL), vLLM and /metrics logs, payload directories, saved JSON and
the commands' arguments, mutated in types, NULLs, duplicates, encodings, file kinds and sizes.

Every case runs the real CLI and is judged by `tests/fuzz/oracle.py` (exit 0-3, at most one line on
stderr, no traceback, no source changed, the accounting identity, no secret in any output). The
default tier runs a small budget (seconds); `pytest -m heavy tests/fuzz` runs a larger one. Cases that
found bugs are kept: as `@example`s where fixed, as `xfail(strict=True)` tests in test_fuzz_regressions.py
where the fix belongs to the store and log readers.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.factories import data_samples_warehouse
from tests.fuzz.oracle import accounting_violations, check, invoke, pg_digest, tree_digest, warehouse_text

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # the samples' focal host
# No `explain` phase: it traces every line the CLI runs, which makes a case many times slower.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def budget(examples: int) -> settings:
    """The same cases every run (derandomized: CI is a gate, so it must be reproducible); explore new ones with
    `GONKA_FUZZ_EXPLORE=1 pytest -m heavy tests/fuzz`."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=PHASES,
        derandomize=True,
    )


SMALL = budget(3)
LARGE = settings(SMALL, max_examples=80, derandomize=not os.environ.get("GONKA_FUZZ_EXPLORE"))

# --- values a column of an untyped store can be made to hold ---------------------------------------------
SQL_VALUES = st.sampled_from(
    [
        "NULL",
        "''",
        "'text in a number column'",
        "X'FF00FE'",  # a blob
        "CAST(X'C328' AS TEXT)",  # invalid UTF-8 as text
        "-1",
        "0",
        "9223372036854775807",
        "-9223372036854775808",
        "1180591620717411303424",  # 2^70: stored as REAL
        "1e400",  # +Inf
        "-1e400",
        "'NaN'",
        "1234567890123456789012345678901",  # a 31-digit count
        "'2026-02-29T00:00:00Z'",
        "'\u202e\u0000evil'",
        "3.5",
    ]
)


def _open_db(store: Path, index: int) -> sqlite3.Connection | None:
    """One store file opened for writing, or None when an earlier mutation made it no database file."""
    files = sorted(store.glob("*.db"))
    try:
        return sqlite3.connect(files[index % len(files)]) if files[index % len(files)].is_file() else None
    except sqlite3.Error:
        return None


@dataclass(frozen=True)
class SetValue:
    """UPDATE one column of one row of one table of one store file to a hostile value."""

    file: int
    table: int
    column: int
    row: int
    value: str

    def apply(self, store: Path) -> None:
        if (con := _open_db(store, self.file)) is None:
            return
        try:
            tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            if not tables:
                return
            table = tables[self.table % len(tables)]
            columns = [c[1] for c in con.execute(f'PRAGMA table_info("{table}")')]
            rowids = [r for (r,) in con.execute(f'SELECT rowid FROM "{table}" ORDER BY rowid')]
            if not rowids or not columns:
                return
            column = columns[self.column % len(columns)]
            con.execute(
                f'UPDATE "{table}" SET "{column}" = {self.value} WHERE rowid = ?', [rowids[self.row % len(rowids)]]
            )
            con.commit()
        except sqlite3.Error:
            pass  # a constraint said no: this mutation is a no-op
        finally:
            con.close()


@dataclass(frozen=True)
class DuplicateRows:
    """Insert copies of some rows of one table (a key claimed twice, where the table lets it)."""

    file: int
    table: int

    def apply(self, store: Path) -> None:
        if (con := _open_db(store, self.file)) is None:
            return
        try:
            tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            if not tables:
                return
            table = tables[self.table % len(tables)]
            con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE rowid % 7 = 1')
            con.commit()
        except sqlite3.Error:
            pass
        finally:
            con.close()


@dataclass(frozen=True)
class FileKind:
    """Replace, truncate, rename or duplicate one file of the store."""

    file: int
    how: str

    def apply(self, store: Path) -> None:
        files = sorted(store.glob("*.db"))
        path = files[self.file % len(files)]
        if path.is_symlink() or not path.is_file():  # an earlier mutation made it no file: left as it is
            return
        if self.how == "truncate":
            path.write_bytes(path.read_bytes()[:1000])
        elif self.how == "garbage":
            path.write_bytes(os.urandom(4096))
        elif self.how == "empty":
            path.write_bytes(b"")
        elif self.how == "directory":
            path.unlink()
            path.mkdir()
        elif self.how == "padded-duplicate" and path.stem.startswith("epoch_"):
            shutil.copy(path, path.with_name(f"epoch_0{path.stem[6:]}.db"))
        elif self.how == "symlink-out":
            # To a copy outside the store, never to data-samples: a later mutation writes through the link.
            outside = store.parent / "outside"
            outside.mkdir(exist_ok=True)
            path.rename(outside / path.name)
            path.symlink_to(outside / path.name)


@dataclass(frozen=True)
class PayloadFile:
    """Overwrite one payload file with hostile bytes."""

    index: int
    data: bytes

    def apply(self, store: Path) -> None:
        files = sorted((store / "payloads").rglob("*.json"))
        if files:
            files[self.index % len(files)].write_bytes(self.data)


mutations = st.lists(
    st.one_of(
        st.builds(SetValue, st.integers(0, 9), st.integers(0, 20), st.integers(0, 20), st.integers(0, 500), SQL_VALUES),
        st.builds(DuplicateRows, st.integers(0, 9), st.integers(0, 20)),
        st.builds(
            FileKind,
            st.integers(0, 9),
            st.sampled_from(["truncate", "garbage", "empty", "directory", "padded-duplicate", "symlink-out"]),
        ),
        st.builds(
            PayloadFile,
            st.integers(0, 500),
            st.one_of(
                st.sampled_from([b"", b"{", b"[]", b'{"prompt": 5}', b"\xff\xfe", b'{"a":' * 200]),
                st.binary(max_size=64),
            ),
        ),
    ),
    min_size=1,
    max_size=4,
)


def _fuzz_store(root: Path, changes: list, thorough: bool = False) -> None:
    """Ingest a mutated copy of the sample store, then doctor it and read the warehouse."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    store = shutil.copytree(DATA_SAMPLES_DIR / "store", root / "store", symlinks=True)
    for change in changes:
        change.apply(store)
    before = tree_digest(store, DATA_SAMPLES_DIR / "store")
    warehouse = root / "w.duckdb"
    commands = [["ingest", str(store), "-w", str(warehouse), "-q"], ["doctor", str(store), "-q"]]
    if thorough:
        commands += [
            ["ingest", str(store), "-w", str(warehouse), "-q"],  # again: nothing new, nothing broken
            ["evidence", "epoch-summary", "--host", HOST, "-w", str(warehouse), "-q"],
        ]
    for args in commands:
        check(invoke(args))
    assert tree_digest(store, DATA_SAMPLES_DIR / "store") == before, "a source changed"
    assert accounting_violations(warehouse) == []


@budget(1)  # one case of seconds (test_fuzz_sqlite_store_heavy runs 80, test_fuzz_regressions.py its finds)
@given(mutations)
def test_fuzz_sqlite_store(tmp_path_factory, changes):
    _fuzz_store(tmp_path_factory.getbasetemp() / "fuzz-store", changes)


@pytest.mark.heavy  # a larger budget; stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
@LARGE
@given(mutations)
def test_fuzz_sqlite_store_heavy(tmp_path_factory, changes):
    _fuzz_store(tmp_path_factory.getbasetemp() / "fuzz-store", changes, thorough=True)


# --- PostgreSQL: the same copy in a server, mutated by SQL, with a planted password ------------------------

PG_VALUES = st.sampled_from(["NULL", "''", "'x'", "-1", "0", "9223372036854775807"])
SECRET = "Fz9PlantedSecret"


@dataclass(frozen=True)
class PgChange:
    table: int
    column: int
    value: str
    duplicate: bool

    def apply(self, url: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            tables = [
                t
                for (t,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
                ).fetchall()
            ]
            if not tables:
                return
            table = tables[self.table % len(tables)]
            columns = [
                c
                for (c,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            column = columns[self.column % len(columns)]
            try:
                if self.duplicate:
                    conn.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" LIMIT 3')
                else:
                    conn.execute(
                        f'UPDATE "{table}" SET "{column}" = {self.value} WHERE ctid = (SELECT min(ctid) FROM "{table}")'
                    )
            except psycopg.Error:
                pass  # a type or a constraint said no


@pytest.fixture(scope="module")
def pg_template(pg_server, timeline):
    """A PostgreSQL database holding a generated copy, used as the template of each case's database."""
    import psycopg

    name = f"fuzz_template_{os.getpid()}"
    with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    timeline.copy(last_epoch=3).write_postgres(f"{pg_server}/{name}")
    yield pg_server, name
    with psycopg.connect(f"{pg_server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fuzz_postgres(pg_template, root: Path, changes: list[PgChange]) -> None:
    import psycopg

    server, template = pg_template
    name = f"fuzz_case_{os.getpid()}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        url = f"{server}/{name}"
        for change in changes:
            change.apply(url)
        before = pg_digest(url)
        scheme, rest = url.split("://", 1)
        user, host = rest.split("@", 1)
        planted = f"{scheme}://{user}:{SECRET}@{host}?sslmode=disable&pass%77ord={SECRET}"  # trust auth ignores it
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        warehouse = root / "w.duckdb"
        for args in (["ingest", planted, "-w", str(warehouse), "-q"], ["doctor", planted, "-q"]):
            check(invoke(args), secrets=[SECRET])
        assert pg_digest(url) == before, "the copy changed"
        assert SECRET not in warehouse_text(warehouse)
        assert accounting_violations(warehouse) == []
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


pg_changes = st.lists(
    st.builds(PgChange, st.integers(0, 30), st.integers(0, 20), PG_VALUES, st.booleans()), min_size=1, max_size=3
)


@budget(1)
@given(pg_changes)
def test_fuzz_postgres_store(pg_template, tmp_path_factory, changes):
    _fuzz_postgres(pg_template, tmp_path_factory.getbasetemp() / "fuzz-pg", changes)


@pytest.mark.heavy  # a larger budget; stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_postgres_store
@settings(LARGE, max_examples=40)
@given(pg_changes)
def test_fuzz_postgres_store_heavy(pg_template, tmp_path_factory, changes):
    _fuzz_postgres(pg_template, tmp_path_factory.getbasetemp() / "fuzz-pg", changes)


# --- logs and saved JSON ---------------------------------------------------------------------------------

VLLM_LOG = (DATA_SAMPLES_DIR / "vllm" / "vllm.log").read_bytes().splitlines(keepends=True)
METRIC_LINES = [
    b"# TYPE vllm:num_requests_running gauge\n",
    b'vllm:num_requests_running{model_name="m"} 3\n',
    b'vllm:num_requests_running{model_name="m"} NaN\n',
    b'vllm:gpu_cache_usage_perc{model_name="m"} +Inf\n',
    b'vllm:gpu_cache_usage_perc{model_name="m"} 1e400\n',
    b'vllm:prompt_tokens_total{model_name="m"} 1234567890123456789012345678901\n',
]
hostile_lines = st.one_of(
    st.sampled_from(VLLM_LOG[:200]),
    st.sampled_from(METRIC_LINES),
    st.binary(max_size=80).map(lambda b: b + b"\n"),
    st.sampled_from([b"\xff\xfe\n", b"\0\0\0\n", b"x" * 70_000 + b"\n", b"\r\n", b""]),
)


def _fuzz_logs(root: Path, lines: list[bytes], kind: str | None, strict: bool) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log = root / ("metrics.prom" if kind == "metrics" else "vllm.log")
    log.write_bytes(b"".join(lines))
    before = tree_digest(log)
    args = ["ingest-logs", "--host", HOST, "--year", "2026", str(log), "-w", str(root / "w.duckdb"), "-q"]
    args += (["--kind", kind] if kind else []) + (["--strict"] if strict else [])
    check(invoke(args))
    assert tree_digest(log) == before
    assert accounting_violations(root / "w.duckdb") == []


log_cases = (
    st.lists(hostile_lines, max_size=40),
    st.sampled_from([None, "vllm", "metrics", "validator", "poc"]),
    st.booleans(),
)


@SMALL
@given(*log_cases)
@example([b'vllm:gpu_cache_usage_perc{model_name="m"} NaN\n'], "metrics", False)
@example([], None, True)
def test_fuzz_logs(tmp_path_factory, lines, kind, strict):
    _fuzz_logs(tmp_path_factory.getbasetemp() / "fuzz-logs", lines, kind, strict)


@pytest.mark.heavy  # a larger budget; stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_logs
@LARGE
@given(*log_cases)
def test_fuzz_logs_heavy(tmp_path_factory, lines, kind, strict):
    _fuzz_logs(tmp_path_factory.getbasetemp() / "fuzz-logs", lines, kind, strict)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
RECORD = {"epoch_index": 5, "participant": "gonka1x", "model": "m", "assigned_nonces": 3, "counters": []}
json_documents = st.one_of(
    json_values,
    st.builds(lambda k, v: [RECORD | {k: v}], st.sampled_from(sorted(RECORD)), json_values),
    st.builds(
        lambda n: {"epoch_index": n, "participants": [RECORD | {"epoch_index": n}]}, st.integers(-(2**70), 2**70)
    ),
)


def _fuzz_json(root: Path, documents: list, raw: bytes | None) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    files = []
    for i, document in enumerate(documents):
        path = root / f"response-{i}.json"
        path.write_text(json.dumps(document))
        files.append(str(path))
    if raw is not None:
        (root / "raw.json").write_bytes(raw)
        files.append(str(root / "raw.json"))
    before = tree_digest(*map(Path, files))
    check(invoke(["ingest-json", *files, "-w", str(root / "w.duckdb"), "-q"]))
    assert tree_digest(*map(Path, files)) == before
    assert accounting_violations(root / "w.duckdb") == []


@SMALL
@given(st.lists(json_documents, min_size=1, max_size=3), st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzz_json(tmp_path_factory, documents, raw):
    _fuzz_json(tmp_path_factory.getbasetemp() / "fuzz-json", documents, raw)


@pytest.mark.heavy  # a larger budget; stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_json
@LARGE
@given(st.lists(json_documents, min_size=1, max_size=3), st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzz_json_heavy(tmp_path_factory, documents, raw):
    _fuzz_json(tmp_path_factory.getbasetemp() / "fuzz-json", documents, raw)


# --- command arguments on a real warehouse -----------------------------------------------------------------


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("fuzz-args") / "w.duckdb")


numbers = st.one_of(
    st.integers(-3, 10).map(str),
    st.sampled_from([str(2**63), str(2**70), "-0", "1e3", "0x10", "nan", "", " 3", "٣"]),
)
texts = st.one_of(
    st.text(max_size=16),
    st.sampled_from(['x"y', "x'y", "$(rm -rf ~)", "--help", "-", "a\nb", "\x00", "💥", "99999999999d", "0m", "1d"]),
)
special_paths = st.sampled_from(["/dev/null", "/dev/zero", "/dev/full", "/", "/proc/self/mem", "nonexistent/x"])
quick_arguments = st.one_of(  # seconds each; report and bundle draw charts, left to the heavy tier
    st.tuples(
        st.just("evidence"),
        st.sampled_from(["epoch-summary", "timeline", "tracker", "stability", "votes-by-build"]),
        st.sampled_from(["--epoch", "--compare", "--bucket", "--by", "--since", "--until", "--format"]),
        st.one_of(numbers, texts),
    ),
    st.tuples(
        st.just("query"),
        st.one_of(texts, st.sampled_from(["SELECT 1", "SELECT * FROM inferences"])),
        st.sampled_from(["--max-rows", "--timeout", "--format", "--param", "-o", "-f"]),
        st.one_of(numbers, texts, special_paths),
    ),
)
arguments = st.one_of(
    quick_arguments,
    st.tuples(st.just("report"), st.just("epoch"), st.sampled_from(["--out"]), st.one_of(special_paths, texts)),
    st.tuples(
        st.just("bundle"),
        st.sampled_from(["--epoch", "--since", "--out"]),
        st.one_of(numbers, texts),
        st.one_of(special_paths, texts),
    ),
)
environments = st.one_of(
    st.just({}),
    st.dictionaries(
        st.sampled_from(
            [
                "GONKA_EVIDENCE_DUCKDB_MEMORY",
                "GONKA_EVIDENCE_QUERY_TEMP_LIMIT",
                "GONKA_EVIDENCE_HOST",
                "GONKA_EVIDENCE_FINALITY_LAG",
            ]
        ),
        st.one_of(texts.filter(lambda t: "\x00" not in t), numbers),
        max_size=2,
    ),
)


def _fuzz_arguments(warehouse: Path, work: Path, argv: tuple, env: dict[str, str]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    before = tree_digest(warehouse)
    args = [a for a in argv if "\x00" not in a]
    if args[0] in ("evidence", "report", "bundle"):
        args += ["--host", HOST]
    if args[0] == "report" and len(args) > 2:
        args.insert(2, "3")
    if args[0] == "bundle" and "--out" not in args:
        args += ["--out", str(work / "bundle")]
    cwd = os.getcwd()
    os.chdir(work)  # relative outputs land here
    try:
        check(invoke([*args, "-w", str(warehouse)], env=env))
    finally:
        os.chdir(cwd)
    assert tree_digest(warehouse) == before, "the warehouse changed"


@budget(15)
@given(quick_arguments, environments)
@example(("evidence", "epoch-summary", "--epoch", str(2**70)), {})
@example(("evidence", "timeline", "--bucket", "99999999999d"), {})
@example(("query", "SELECT 1", "-o", "/dev/full"), {})
@example(("query", "SELECT 1", "-f", "/dev/zero"), {})
@example(("query", "SELECT 1", "--timeout", "nan"), {"GONKA_EVIDENCE_DUCKDB_MEMORY": "lots"})
def test_fuzz_arguments(warehouse, tmp_path_factory, argv, env):
    _fuzz_arguments(warehouse, tmp_path_factory.getbasetemp() / "fuzz-args-work", argv, env)


@pytest.mark.heavy  # a larger budget; stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_arguments
@settings(LARGE, max_examples=300)
@given(arguments, environments)
def test_fuzz_arguments_heavy(warehouse, tmp_path_factory, argv, env):
    _fuzz_arguments(warehouse, tmp_path_factory.getbasetemp() / "fuzz-args-work", argv, env)
