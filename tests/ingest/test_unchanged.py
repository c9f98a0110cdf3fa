"""An ingest of a PostgreSQL copy whose change markers, and the warehouse's store state, are those its
last ingest left records the run without reading the copy (pipeline/ingest/unchanged.py). Every kind of change
in between, in the copy or in the warehouse, takes the full ingest again, and the warehouse ends as a
full ingest leaves it."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import duckdb
import psycopg
import pytest

from pipeline.ingest.copies import ingest_source
from pipeline.ingest.store import ingest_store
from pipeline.ingest.unchanged import STAMP_PREFIX
from pipeline.samples.release_lines import SAMPLE_LINES
from pipeline.sources.store import open_store
from pipeline.sources.store.postgres_markers import read_markers
from pipeline.warehouse.database import open_for_write
from tests.helpers import assert_views_equal, cli_in, frame, throwaway_database, views

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_copy(pg_database, pg_copy_templates) -> str:
    """A PostgreSQL database of `timeline.copy(4)` with its ledger (a copy of one written once: tests/conftest.py)."""
    return pg_database(template=pg_copy_templates(4, ledger=True))


def ingest(warehouse: Path, source: str | Path):
    """`gonka-evidence ingest`'s library call: told unchanged by the markers, or the full ingest."""
    con = open_for_write(warehouse)
    try:
        return ingest_source(con, str(source))
    finally:
        con.close()


def full_ingest(warehouse: Path, source: str | Path):
    """The full ingest alone (what every ingest did before the markers)."""
    con, store = open_for_write(warehouse), open_store(str(source))
    try:
        return ingest_store(con, store)
    finally:
        store.close()
        con.close()


def last_run(warehouse: Path) -> dict:
    return frame(warehouse, "SELECT * FROM ingest_runs ORDER BY started_at DESC LIMIT 1").row(0, named=True)


def stamp(warehouse: Path, source_id: str) -> dict:
    value = frame(warehouse, f"SELECT value FROM warehouse_meta WHERE key = '{STAMP_PREFIX}{source_id}'")["value"]
    return json.loads(value[0])


def test_an_unchanged_copy_is_told_by_its_markers_and_reports_what_a_full_ingest_would(pg_ingested_once, tmp_path):
    done = pg_ingested_once(ingest, tmp_path)  # the copy's first ingest (tests/ingest/conftest.py)
    (pg_copy, wh, (first,)), twin = (done.url, done.warehouse, done.results), tmp_path / "twin.duckdb"
    shutil.copyfile(wh, twin)
    first_run, before = last_run(wh), views(wh)
    second = ingest(wh, pg_copy)
    full = full_ingest(twin, pg_copy)  # the same history, the full path: what the markers stand for

    assert not first.markers_unchanged and first.escrows_changed > 0 and first.rows["diffs"] > 0
    assert second.markers_unchanged and not full.markers_unchanged
    for s in (second, full):
        assert s.rows == {} and s.quarantined == 0 and s.escrows_changed == 0 and s.new_epochs == []
        assert s.escrows_unchanged == first.escrows_changed + first.escrows_unchanged
        assert (s.copy_at, s.snapshot_disagreements, s.snapshot_disagreements_imported) == (
            first.copy_at,
            first.snapshot_disagreements,
            first.snapshot_disagreements_imported,
        )
    assert second.run_id == full.run_id  # the same position in the same history
    run = last_run(wh)
    assert (run["run_id"], run["status"], run["copy_at"], json.loads(run["rows"])) == (
        second.run_id,
        "ok",
        first_run["copy_at"],
        {"quarantined": 0},
    )
    # Its input digest is what it read: the markers, the same as the full ingest's store computes.
    assert run["input_digest"] == stamp(wh, first.source_id)["markers"] != first_run["input_digest"]
    store = open_store(pg_copy)
    try:
        assert store.change_markers() == run["input_digest"]
    finally:
        store.close()
    assert_views_equal(before, views(wh))
    assert_views_equal(views(twin), views(wh))


# Changes in the copy, each of something an ingest reads of every copy, and what the full ingest then writes.
COPY_CHANGES = {
    "session settled": (
        "UPDATE devshard_sessions SET status = 'settled', settled_at = 1790000000 "
        "WHERE escrow_id = (SELECT min(escrow_id) FROM devshard_sessions WHERE status = 'active')",
        lambda s: s.escrows_changed == 1,
    ),
    "escrow cache row": (
        "UPDATE devshard_escrow_cache SET cached_at = cached_at + 1 "
        "WHERE escrow_id = (SELECT min(escrow_id) FROM devshard_escrow_cache)",
        lambda s: s.rows == {"escrow_cache": 1},
    ),
    "ledger writer saved": (
        "UPDATE accounting_writers SET updated_at = '2026-12-01T00:00:00.000000001Z' "
        "WHERE writer_id = (SELECT min(writer_id) FROM accounting_writers)",
        lambda s: s.rows["ledger_escrows"] > 0,
    ),
    "payload stored": (
        "INSERT INTO payload_storage SELECT * FROM held_back_payload",
        lambda s: s.rows["answer_checks"] == 1,
    ),
    "column added": ("ALTER TABLE devshard_sessions ADD COLUMN note TEXT", lambda s: s.rows == {}),
}


# A payload held back: what "payload stored" stores.
HOLD_BACK_A_PAYLOAD = (
    "CREATE TABLE held_back_payload AS SELECT * FROM payload_storage ORDER BY escrow_id, inference_id LIMIT 1",
    "DELETE FROM payload_storage p USING held_back_payload h "
    "WHERE p.escrow_id = h.escrow_id AND p.inference_id = h.inference_id",
)


def test_each_change_in_the_copy_moves_its_markers(pg_copy):
    """Each change of COPY_CHANGES, one after another, moves the copy's markers (so the stamp no longer matches
    and the ingest is a full one); the store reads the same markers in its snapshot."""
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        for sql in HOLD_BACK_A_PAYLOAD:
            pg.execute(sql)
    con = duckdb.connect()
    try:
        seen = [read_markers(pg_copy, lambda: con).digest]
        for change, (sql, _) in COPY_CHANGES.items():
            with psycopg.connect(pg_copy, autocommit=True) as pg:
                pg.execute(sql)
            seen.append(read_markers(pg_copy, lambda: con).digest)
            assert seen[-1] not in seen[:-1], change
    finally:
        con.close()
    store = open_store(pg_copy)
    try:
        assert store.change_markers() == seen[-1]  # the store's own reading, in its snapshot
    finally:
        store.close()


@pytest.mark.parametrize(
    "change",
    # Each change takes an ingest of the changed copy, one more and a fresh one: "session settled" (an escrow
    # moved, its rows read again) in the default tier, the others in the heavy one; stands in the default tier:
    # its "session settled" case,
    # tests/ingest/test_unchanged.py::test_a_change_in_the_copy_takes_the_full_ingest_and_ends_as_a_fresh_one and
    # tests/ingest/test_unchanged.py::test_each_change_in_the_copy_moves_its_markers (each change moves them)
    [pytest.param(c, marks=[] if c == "session settled" else [pytest.mark.heavy]) for c in COPY_CHANGES],
)
def test_a_change_in_the_copy_takes_the_full_ingest_and_ends_as_a_fresh_one(change, pg_ingested_once, tmp_path):
    sql, wrote = COPY_CHANGES[change]
    # The copy with a payload held back, ingested twice (once per module: tests/ingest/conftest.py).
    done = pg_ingested_once(ingest, tmp_path, prepare=HOLD_BACK_A_PAYLOAD, times=2)
    pg_copy, wh = done.url, done.warehouse
    assert done.results[1].markers_unchanged
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute(sql)
    after = ingest(wh, pg_copy)
    assert not after.markers_unchanged and wrote(after), after
    assert ingest(wh, pg_copy).markers_unchanged  # stamped again
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute("DROP TABLE held_back_payload")  # (the catalog moves: one more full ingest)
    fresh = tmp_path / "fresh.duckdb"
    full_ingest(fresh, pg_copy)
    ingest(wh, pg_copy)
    assert_views_equal(views(fresh), views(wh))


def test_a_stored_escrow_another_source_wrote_since_takes_the_full_ingest(pg_ingested_once, tmp_path):
    """The warehouse moved since the copy's stamp (another source stored one of its escrows, as a copy further
    along would): its markers are the stamp's, but the store state is not, so the ingest runs in full, and
    stamps the state it leaves (the next ingest is told unchanged again)."""
    done = pg_ingested_once(ingest, tmp_path)  # the copy's first ingest (tests/ingest/conftest.py)
    pg_copy, wh, (first,) = done.url, done.warehouse, done.results
    stamped = stamp(wh, first.source_id)
    con = duckdb.connect(str(wh))
    try:
        moved = con.execute(
            "UPDATE raw_sessions SET source_id = 'sqlite:further', run_id = 'another-run' "
            "WHERE escrow_id = (SELECT min(escrow_id) FROM raw_sessions) RETURNING escrow_id"
        ).fetchall()
    finally:
        con.close()
    assert len(moved) == 1
    again = ingest(wh, pg_copy)
    assert not again.markers_unchanged
    assert again.escrows_changed + again.escrows_unchanged == first.escrows_changed + first.escrows_unchanged
    restamped = stamp(wh, first.source_id)  # the same markers, the state this ingest left
    assert restamped["markers"] == stamped["markers"] and restamped["state"] != stamped["state"]
    assert ingest(wh, pg_copy).markers_unchanged


# Another copy written and ingested in between, and a reference of full ingests; stands in the default tier:
# tests/ingest/test_unchanged.py::test_a_stored_escrow_another_source_wrote_since_takes_the_full_ingest
@pytest.mark.heavy
def test_a_write_of_another_source_in_between_takes_the_full_ingest(pg_ingested_once, sqlite_copy, tmp_path):
    """The warehouse moved (another copy, further along, stored escrows of this one): the markers alone
    cannot tell what this copy's ingest would do now, so it runs in full, as it did before the markers."""
    # The copy's first ingest, and its first full ingest, of one database (tests/ingest/conftest.py).
    reference = pg_ingested_once(full_ingest, tmp_path, file="ref.duckdb").warehouse
    done = pg_ingested_once(ingest, tmp_path)
    pg_copy, wh = done.url, done.warehouse
    further = sqlite_copy(5)
    ingest(wh, further)
    full_ingest(reference, further)
    again, reference_again = ingest(wh, pg_copy), full_ingest(reference, pg_copy)
    assert not again.markers_unchanged
    assert (again.rows, again.escrows_changed) == (reference_again.rows, reference_again.escrows_changed)
    assert ingest(wh, pg_copy).markers_unchanged
    assert_views_equal(views(reference), views(wh))


@pytest.mark.parametrize("stamped", ["another version", "not JSON", "a field missing"])
def test_a_stamp_of_another_pipeline_version_or_unreadable_is_not_trusted(stamped, pg_ingested_once, tmp_path):
    done = pg_ingested_once(ingest, tmp_path)  # the copy's first ingest (tests/ingest/conftest.py)
    pg_copy, wh, (first,) = done.url, done.warehouse, done.results
    key = STAMP_PREFIX + first.source_id
    con = duckdb.connect(str(wh))
    value = json.loads(con.execute("SELECT value FROM warehouse_meta WHERE key = ?", [key]).fetchall()[0][0])
    text = {
        "another version": json.dumps(value | {"version": "0.0.1"}),
        "not JSON": "{markers",
        "a field missing": json.dumps({k: v for k, v in value.items() if k != "escrows"}),
    }[stamped]
    con.execute("UPDATE warehouse_meta SET value = ? WHERE key = ?", [text, key])
    con.close()
    assert not ingest(wh, pg_copy).markers_unchanged
    assert stamp(wh, first.source_id) == value  # stamped anew by this version
    assert ingest(wh, pg_copy).markers_unchanged


@pytest.mark.parametrize(
    "line",
    # v0.2.13, the line lacking the most tables (ledger set tables among them), in the default tier, where the
    # default line's copy is every other test's; the other lines (a copy written and ingested twice each) in the
    # heavy one; stands in the default tier: its v0.2.13 case,
    # tests/ingest/test_unchanged.py::test_every_release_line_is_told_unchanged and, for the default line,
    # tests/ingest/test_unchanged.py::test_an_unchanged_copy_is_told_by_its_markers_and_reports_what_a_full_ingest_would
    [pytest.param(n, marks=[] if n == "v0.2.13" else [pytest.mark.heavy]) for n in SAMPLE_LINES],
)
def test_every_release_line_is_told_unchanged(line, request, timeline, tmp_path):
    url = throwaway_database(request)
    copy = timeline.copy(last_epoch=4, line=line)
    copy.write_postgres(url, ledger=True)
    wh = tmp_path / "w.duckdb"
    first = ingest(wh, url)
    second = ingest(wh, url)
    assert first.escrows_changed > 0 and second.rows == {} and second.escrows_changed == 0
    assert second.markers_unchanged  # the set tables a line lacks are not among the ledger's markers


def test_a_partial_ledger_is_read_in_full_every_time(pg_copy, tmp_path):
    """Without accounting_writers the ledger's markers cannot tell a change: no stamp is trusted."""
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute("DROP TABLE accounting_writers")
    wh = tmp_path / "w.duckdb"
    ingest(wh, pg_copy)
    con = duckdb.connect()
    try:
        assert read_markers(pg_copy, lambda: con) is None
    finally:
        con.close()
    again = ingest(wh, pg_copy)
    assert not again.markers_unchanged and again.rows["ledger_escrows"] > 0
    assert frame(wh, f"SELECT count(*) AS n FROM warehouse_meta WHERE key LIKE '{STAMP_PREFIX}%'")["n"][0] == 0


def test_markers_do_not_depend_on_the_session_settings_of_the_reader(pg_copy, monkeypatch):
    """A time zone, date style or float setting of the server, the database or the environment does not
    change the text the markers hash (a timestamptz and a float column make it show)."""
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute(
            "ALTER TABLE devshard_escrow_cache ADD COLUMN seen_at TIMESTAMPTZ DEFAULT '2026-11-30 23:30:00+00', "
            "ADD COLUMN ratio DOUBLE PRECISION DEFAULT 0.1"
        )
    con = duckdb.connect()
    try:
        plain = read_markers(pg_copy, lambda: con)
        with psycopg.connect(pg_copy, autocommit=True) as pg:
            name = pg.execute("SELECT current_database()").fetchone()[0]
            for setting, value in (
                ("TimeZone", "Asia/Tokyo"),
                ("extra_float_digits", "-3"),
                ("bytea_output", "escape"),
            ):
                pg.execute(f"ALTER DATABASE \"{name}\" SET {setting} = '{value}'")
        monkeypatch.setenv("PGDATESTYLE", "SQL, DMY")
        assert read_markers(pg_copy, lambda: con) == plain
    finally:
        con.close()
    store = open_store(pg_copy)
    try:
        assert store.change_markers() == plain.digest
    finally:
        store.close()


def test_cli_says_the_copy_was_not_read(pg_ingested_once, tmp_path):
    done = pg_ingested_once(ingest, tmp_path)  # the copy's first ingest (tests/ingest/conftest.py)
    pg_copy, wh = done.url, done.warehouse
    result = cli_in(ROOT, "ingest", pg_copy, "-w", str(wh))  # what it says (its stdout and stderr apart): in-process
    assert result.returncode == 0, result.stderr
    # the summary every ingest says (pipeline/output/summaries.py), as `run`'s log says it
    assert ": 0 rows written;" in result.stderr
    assert "; not read: its change markers are those of its last ingest" in result.stderr
    assert result.stdout == ""  # a summary: stderr only


def test_the_runs_ingest_of_an_unchanged_copy_says_so_and_moves_only_the_stamp(pg_ingested_once, tmp_path):
    """What `run` does with a postgres source, without its reports: its ingest of the entry (the source kind's
    ingester) is told unchanged by the markers and its log line says so; what `run` decides to publish by
    (`content_parts`) does not move, nor what its reports are built from. A warehouse from before the stamps:
    the full no-op ingest writes only the first stamp, which moves what `run` publishes by (so the run
    publishes it), not the reports' inputs; the next one is told unchanged again and moves nothing."""
    from pipeline.ingest.kinds import SOURCE_KINDS
    from pipeline.jobs.run import STAMPS_PART, content_parts, source_summary

    done = pg_ingested_once(ingest, tmp_path)  # the copy's first ingest (tests/ingest/conftest.py)
    entry = {"url": done.url, "label": "host-pg"}
    con = open_for_write(done.warehouse)
    try:

        def run_ingest() -> tuple[object, str, dict]:
            summary = SOURCE_KINDS["postgres"].ingest(con, entry, None)
            said = source_summary(con, summary, "postgres", entry)
            (line,) = [text for _, text in said if text.startswith("ingested ")]
            return summary, line, content_parts(con)

        def data(parts: dict) -> dict:
            return {k: v for k, v in parts.items() if k != STAMPS_PART}

        stamped = content_parts(con)
        told, line, after = run_ingest()
        assert told.markers_unchanged and after == stamped
        assert line.endswith("; not read: its change markers are those of its last ingest")
        assert "0 rows written; escrows changed 0," in line

        con.execute(f"DELETE FROM warehouse_meta WHERE starts_with(key, '{STAMP_PREFIX}')")
        unstamped = content_parts(con)
        assert unstamped != stamped and data(unstamped) == data(stamped)
        full, line, after = run_ingest()
        assert not full.markers_unchanged and "not read" not in line
        assert after != unstamped and after == stamped  # the first stamp moves it: published
        told, line, after = run_ingest()
        assert told.markers_unchanged and after == stamped  # nothing moved: not published
    finally:
        con.close()


# Four whole runs (reports included); stands in the default tier:
# tests/ingest/test_unchanged.py::test_the_runs_ingest_of_an_unchanged_copy_says_so_and_moves_only_the_stamp
@pytest.mark.heavy
def test_run_reads_an_unchanged_postgres_source_by_its_markers(pg_copy, timeline, tmp_path):
    from pipeline.api import run as run_job

    timeline.write_builds_toml(tmp_path / "builds.toml")
    cfg = tmp_path / "gonka-evidence.toml"
    cfg.write_text(
        f'warehouse = "{tmp_path / "w.duckdb"}"\noutput = "{tmp_path / "out"}"\nhost = "{timeline.focal_host}"\n'
        f'builds = "{tmp_path / "builds.toml"}"\n\n[[sources]]\nurl = "{pg_copy}"\nlabel = "host-pg"\n'
    )
    first = run_job(cfg, None)
    printed_first = "\n".join(first.log)  # the run's log lines, as `run` prints them
    second = run_job(cfg, None)
    printed_second = "\n".join(second.log)
    assert first.written and second.written == []
    ingested = [line for line in printed_second.splitlines() if line.startswith("ingested ")]
    assert len(ingested) == 1 and ingested[0].endswith("; not read: its change markers are those of its last ingest")
    assert "0 rows written; escrows changed 0," in ingested[0]
    assert "not read" not in printed_first

    # A warehouse from before the stamps: its full no-op ingest leaves the first one, which the run
    # publishes (else every later run would read the copy in full again); then no byte changes.
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(f"DELETE FROM warehouse_meta WHERE starts_with(key, '{STAMP_PREFIX}')")
    con.close()
    third = run_job(cfg, None)
    assert not third.ingested[0].markers_unchanged and third.published
    fourth = run_job(cfg, None)
    assert fourth.ingested[0].markers_unchanged and not fourth.published


def test_without_a_second_connection_in_the_snapshot_no_stamp_is_left(pg_copy, tmp_path):
    """A role allowed one connection reads sequentially, and no markers can be read in the ingest's
    snapshot: every ingest is a full one (and still a no-op on an unchanged copy)."""
    role = f"ge_one_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute(f"DROP ROLE IF EXISTS {role}")
        pg.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
        pg.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        parts = urlsplit(pg_copy)
        url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
        wh = tmp_path / "w.duckdb"
        first, second = ingest(wh, url), ingest(wh, url)
        assert first.escrows_changed > 0 and not second.markers_unchanged
        assert second.rows == {} and second.escrows_changed == 0
        assert frame(wh, f"SELECT count(*) AS n FROM warehouse_meta WHERE key LIKE '{STAMP_PREFIX}%'")["n"][0] == 0
    finally:
        with psycopg.connect(pg_copy, autocommit=True) as pg:
            pg.execute(f"DROP OWNED BY {role}")
            pg.execute(f"DROP ROLE {role}")


def test_a_connect_waits_for_the_slot_a_closing_connection_still_holds(pg_copy, monkeypatch):
    """A role allowed one connection: while its last connection's server process has not yet exited, a
    connect is retried (briefly) instead of failing the ingest; one that never frees is one line."""
    import threading

    import pipeline.sources.store.postgres_address as postgres_address
    from pipeline.sources.errors import SourceError
    from pipeline.sources.store.postgres_address import CONNECTION_SLOT_WAIT, PostgresAddress

    # The refusal below waits the whole wait out: a shorter one, still well beyond the half second the slot takes.
    monkeypatch.setattr(postgres_address, "CONNECTION_SLOT_WAIT", 2.0)
    role = f"ge_one_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_copy, autocommit=True) as pg:
        pg.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    try:
        parts = urlsplit(pg_copy)
        url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
        address = PostgresAddress(url)
        held = psycopg.connect(url)
        threading.Timer(0.5, held.close).start()  # the slot frees half a second later
        address.connect(lambda: psycopg.connect(url)).close()
        held = address.connect(lambda: psycopg.connect(url))  # the slot that close frees, once its process exits
        try:
            with pytest.raises(SourceError, match="cannot connect .*too many connections"):
                address.connect(lambda: psycopg.connect(url))
        finally:
            held.close()
        assert 0 < CONNECTION_SLOT_WAIT <= 10  # a real refusal is said within seconds
    finally:
        with psycopg.connect(pg_copy, autocommit=True) as pg:
            pg.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
            pg.execute(f"DROP ROLE {role}")
