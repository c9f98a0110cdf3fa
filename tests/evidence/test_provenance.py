"""Content-addressed provenance: input digests per run, deterministic run ids, footers without
absolute paths, byte-identical outputs from two fresh warehouses, failed-ingest warnings."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from pipeline.core.digest import tree_digest
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence import compute
from pipeline.output.bundle import BundleRequest, build_bundle
from pipeline.output.render.markdown import markdown_table
from pipeline.sources.errors import SourceError
from pipeline.warehouse.database import open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import cli_in, frame, ingest
from tests.output.shared import samples_bundle

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def _warehouse_of(root: Path) -> Path:
    """A fresh warehouse in ``root`` from a copy of data-samples/ placed at ``root/…/store``."""
    store = root / "copies" / "store"
    shutil.copytree(DATA_SAMPLES_DIR / "store", store)
    return data_samples_warehouse(root / "warehouse.duckdb", store)


def _bundle_in(root: Path) -> dict[str, bytes]:
    """Every evidence table (md, csv, json), chart and report file, computed with ``root`` as the
    working directory (as a reviewer would run it there, with the default warehouse name)."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        con = open_read_only(Path("warehouse.duckdb"))
        try:
            return build_bundle(con, BundleRequest(host=HOST, epoch=3))
        finally:
            con.close()
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def first_warehouse(tmp_path_factory) -> Path:
    return _warehouse_of(tmp_path_factory.mktemp("first"))


# two fresh ingests and two whole bundles (.ci/run runs it); stands in the default tier:
# tests/output/test_same_bytes.py::test_verify_compares_evidence_not_labels (a second fresh warehouse of the
# same copy computes every file of a bundle byte for byte),
# tests/evidence/test_provenance.py::test_postgres_digest_is_over_the_rows_read_and_run_ids_repeat,
# tests/evidence/test_provenance.py::test_report_reproduce_lines_name_no_absolute_path
@pytest.mark.heavy
def test_two_fresh_warehouses_of_the_same_copies_give_byte_identical_outputs(first_warehouse, tmp_path):
    first, second = first_warehouse, _warehouse_of(tmp_path / "somewhere" / "else")
    two_warehouses = (first, second)
    two_bundles = _bundle_in(first.parent), _bundle_in(second.parent)
    runs = [
        frame(w, "SELECT run_id, source_id, input_digest FROM ingest_runs ORDER BY started_at").rows()
        for w in two_warehouses
    ]
    assert runs[0] == runs[1] and len(runs[0]) == 1
    a, b = two_bundles
    assert sorted(a) == sorted(b)
    assert {p.rsplit(".", 1)[-1] for p in a if p.startswith("tables/")} == {"md", "csv", "json"}
    assert any(p.startswith("report/charts/") for p in a) and "report/report.md" in a and "report/report.html" in a
    assert [p for p in a if a[p] != b[p]] == []
    for files, root in ((a, first.parent), (b, second.parent)):
        leaked = [p for p, data in files.items() if str(root).encode() in data or b"/tmp/" in data]
        assert leaked == [], f"absolute paths in {leaked}"


def test_input_digest_is_the_content_of_the_store_and_the_footer_prints_it(first_warehouse):
    first = first_warehouse
    store = first.parent / "copies" / "store"
    source_id, digest = frame(first, "SELECT source_id, input_digest FROM ingest_runs").row(0)
    assert source_id == "sqlite:store"
    assert digest == tree_digest(store) and digest.startswith("sha256:") and len(digest) == 7 + 64
    con = open_read_only(first)
    try:
        result = compute("votes-by-build", con, host=HOST, epoch=3, command="c")
    finally:
        con.close()
    from pipeline.output.render import render

    footer = render(result, "markdown").split("\n---\n", 1)[1]
    assert f"- source: data-samples (sqlite), copy 2026-10-30T03:22:22Z, input {digest[: 7 + 16]}" in footer
    assert render(result, "json").count(digest) == 1  # JSON carries the whole digest


def test_a_changed_copy_has_another_digest(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(DATA_SAMPLES_DIR / "store", store)
    before = tree_digest(store)
    (store / "epoch_3.db").write_bytes((store / "epoch_3.db").read_bytes() + b"\0")
    assert tree_digest(store) != before


def test_report_epoch_summary_section_prints_the_table_its_command_prints(tmp_path_factory):
    # the samples' bundle of epoch 3 (built once for tests/output/test_bundle.py too) and its warehouse
    workdir = samples_bundle(tmp_path_factory)
    report = (workdir / "bundle" / "report" / "report.md").read_text()
    con = open_read_only(workdir / "warehouse.duckdb")
    try:
        rows = compute("epoch-summary", con, host=HOST, epoch=3, command="c", denominators=True).rows
    finally:
        con.close()
    command = f"gonka-evidence evidence epoch-summary --host {HOST} --epoch 3 --denominators"
    section = re.split(r"^## \d+\. Epoch summary$", report, flags=re.M)[1].split("\n## ", 1)[0]
    assert markdown_table(rows) in section and f"`{command}`" in section
    assert {"measure", "count", "of", "share"} <= set(rows.columns)


def test_postgres_digest_is_over_the_rows_read_and_run_ids_repeat(pg_copy, tmp_path):
    url = pg_copy(last_epoch=4)
    for name in ("a", "b"):
        ingest(tmp_path / f"{name}.duckdb", url)
    runs = [frame(tmp_path / f"{n}.duckdb", "SELECT run_id, input_digest FROM ingest_runs").rows() for n in "ab"]
    assert runs[0] == runs[1] and runs[0][0][1].startswith("sha256:")
    # A second ingest of the same snapshot reads only what is new (nothing): another run, another digest.
    ingest(tmp_path / "a.duckdb", url)
    again = frame(tmp_path / "a.duckdb", "SELECT run_id, input_digest FROM ingest_runs ORDER BY started_at").rows()
    assert again[0] == runs[0][0] and again[1][0] != again[0][0] and again[1][1] != again[0][1]


def test_evidence_after_a_failed_ingest_warns_in_the_footer(tmp_path):
    good, bad = tmp_path / "good" / "store", tmp_path / "bad" / "store"
    shutil.copytree(DATA_SAMPLES_DIR / "store", good)
    shutil.copytree(DATA_SAMPLES_DIR / "store", bad)
    # Its schema pages kept and its tables' pages garbled: the columns read, the first table read fails midway
    # (a file that is no SQLite at all is refused before the run starts, and leaves no failed run).
    data = bytearray((bad / "epoch_4.db").read_bytes())
    data[8192:] = b"\xa5" * (len(data) - 8192)
    (bad / "epoch_4.db").write_bytes(bytes(data))
    warehouse = tmp_path / "w.duckdb"
    ingest(warehouse, good)
    with pytest.raises(SourceError):
        ingest(warehouse, bad)
    failed_run = frame(warehouse, "SELECT run_id FROM ingest_runs WHERE status = 'failed'")["run_id"].to_list()
    assert len(failed_run) == 1
    con = open_read_only(warehouse)
    try:
        from pipeline.output.render import render

        result = compute("epoch-summary", con, host=HOST, epoch=3, command="c")
        text = render(result, "markdown")
    finally:
        con.close()
    assert f"- warning: the latest ingest of sqlite:store (run {failed_run[0]}) failed" in text
    assert result.provenance.failed_runs[0]["run_id"] == failed_run[0]


def test_footer_command_names_a_warehouse_from_the_environment(first_warehouse, tmp_path):
    # In-process (cli_in: ARGS as sys.argv, the variable read as each command reads it): what it prints.
    first = first_warehouse
    args = ["evidence", "epoch-summary", "--host", HOST, "--epoch", "3"]
    done = cli_in(tmp_path, *args, env={"GONKA_EVIDENCE_WAREHOUSE": str(first)})
    assert done.returncode == 0, done.stderr
    command = done.stdout.rsplit("- command: ", 1)[1].strip().strip("`")
    assert command == f"gonka-evidence evidence epoch-summary --host {HOST} --epoch 3 --warehouse {first}"
    # Where the variable is not set, the printed command prints the same table.
    again = cli_in(tmp_path, *command.split()[1:], env={"GONKA_EVIDENCE_WAREHOUSE": None})
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout


def test_row_digest_ignores_batch_boundaries_and_sees_one_changed_value():
    import pyarrow as pa

    from pipeline.core.digest import RowDigest
    from pipeline.sources.store import open_store

    store = open_store(str(DATA_SAMPLES_DIR / "store"))
    try:
        diffs = pa.Table.from_batches([b for e in store.epochs() for b in store.read("diffs", e)])
    finally:
        store.close()

    def digest(table: pa.Table, rows_per_batch: int) -> str:
        rows = RowDigest()
        for batch in table.to_batches(max_chunksize=rows_per_batch):
            rows.update("diffs", batch)
        return rows.hexdigest()

    assert digest(diffs, 7) == digest(diffs, 1000) == digest(pa.concat_tables([diffs.slice(0, 0), diffs]), 1000)
    nonces = diffs.column("nonce").to_pylist()
    changed = diffs.set_column(diffs.schema.get_field_index("nonce"), "nonce", pa.array([nonces[0] + 1] + nonces[1:]))
    assert digest(changed, 1000) != digest(diffs, 1000)
    blob = diffs.column("txs_proto").to_pylist()
    flipped = diffs.set_column(
        diffs.schema.get_field_index("txs_proto"),
        "txs_proto",
        pa.array([blob[0][:-1] + bytes([blob[0][-1] ^ 1])] + blob[1:], pa.binary()),
    )
    assert digest(flipped, 1000) != digest(diffs, 1000)


def test_row_digest_is_per_column_lengths_and_bytes_computed_here_without_arrow():
    """The digest's definition, computed value by value in plain Python: per read and column, the
    sha256 of the int64 lengths (-1 for NULL) and the sha256 of the values' bytes, fed in at the end
    of the read after its name; batches sliced at odd offsets give the same digest."""
    import hashlib
    import struct

    import pyarrow as pa

    from pipeline.core.digest import PREFIX, RowDigest

    n = 20_000
    columns = {
        "nonce": [i - 5 if i % 13 else None for i in range(n)],
        "escrow_id": [None if i % 101 == 0 else f"e{i % 977}" for i in range(n)],
        "txs_proto": [bytes([i % 256]) * (i % 4) for i in range(n)],
        "is_dropped": [None if i % 7 == 0 else i % 2 == 0 for i in range(n)],
    }
    types = {"nonce": pa.int64(), "escrow_id": pa.string(), "txs_proto": pa.binary(), "is_dropped": pa.bool_()}
    table = pa.table({k: pa.array(v, types[k]) for k, v in columns.items()})
    rows = RowDigest()
    rows.update("diffs/1", table.slice(0, 3).to_batches()[0])
    for batch in table.slice(3).to_batches(max_chunksize=4_999):
        rows.update("diffs/1", batch)
    rows.update("sessions/1", table.slice(0, 10).to_batches()[0])

    def encoded(value):
        if value is None:
            return None
        if isinstance(value, bool):
            return bytes([value])
        if isinstance(value, int):
            return struct.pack("<q", value)
        return value.encode() if isinstance(value, str) else value

    expected = hashlib.sha256()
    for name, height in (("diffs/1", n), ("sessions/1", 10)):
        expected.update(f"\0{name}\0".encode())
        for column, values in columns.items():
            shape, data = hashlib.sha256(), hashlib.sha256()
            for value in map(encoded, values[:height]):
                shape.update(struct.pack("<q", -1 if value is None else len(value)))
                data.update(value or b"")
            expected.update(f"{column}\0".encode() + shape.digest() + data.digest())
    assert rows.hexdigest() == PREFIX + expected.hexdigest()


def test_report_reproduce_lines_name_no_absolute_path(first_warehouse):
    from pipeline.output.report import build_epoch_report, render_report_markdown

    first = first_warehouse
    con = open_read_only(first)
    try:
        report = build_epoch_report(con, 3, HOST, warehouse_arg=str(first), out_arg=str(first.parent / "out"))
    finally:
        con.close()
    text = render_report_markdown(report)
    relative = os.path.relpath(first)
    assert (
        f"reproduce: `gonka-evidence evidence epoch-summary --host {HOST} --epoch 3 --denominators "
        f"--warehouse {relative}`" in text
    )
    commands = [line for line in text.splitlines() if "reproduce:" in line or "command:" in line]
    assert len(commands) > 5 and report.command.endswith(f"--warehouse {relative}")
    assert [line for line in commands if re.search(r"[\s`]/\w", line)] == []  # no argument starts with "/"


def test_a_log_ingest_records_the_content_digest_of_its_files_wherever_they_lie(tmp_path):
    """Log runs are identified by content too: the same files under other paths and names, named in
    another order, give the same input digest (the footer prints it); one changed byte another."""
    import hashlib

    from pipeline.ingest.logs import ingest_logs
    from pipeline.samples.logs import HOST as LOG_HOST
    from pipeline.samples.logs import write_log_samples
    from pipeline.warehouse.database import open_for_write

    write_log_samples(tmp_path / "a")
    moved = tmp_path / "b" / "elsewhere"
    shutil.copytree(tmp_path / "a" / "vllm", moved)
    files = sorted((tmp_path / "a" / "vllm").iterdir())
    expected = (
        "sha256:"
        + hashlib.sha256(
            b"".join(f"{h}\0".encode() for h in sorted(hashlib.sha256(f.read_bytes()).hexdigest() for f in files))
        ).hexdigest()
    )

    def digest(paths: list[Path], name: str) -> str:
        con = open_for_write(tmp_path / name)
        try:
            ingest_logs(con, paths, host=LOG_HOST)
            return con.execute("SELECT input_digest FROM ingest_runs WHERE source_kind = 'logs'").fetchone()[0]
        finally:
            con.close()

    assert digest(files, "w1.duckdb") == digest(sorted(moved.iterdir(), reverse=True), "w2.duckdb") == expected
    live = moved / "vllm.log"
    live.write_bytes(live.read_bytes().replace(b"INFO", b"INF0", 1))
    assert digest([moved], "w3.duckdb") != expected
