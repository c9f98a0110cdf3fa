"""Store paths are file paths, never URI syntax."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.helpers import frame

runner = CliRunner()


@pytest.fixture(scope="module")
def written(timeline, tmp_path_factory):
    """The SQLite stores of the copies up to epochs 3 and 4, each written once: the cases copy them."""
    root = tmp_path_factory.mktemp("written")
    return {n: timeline.copy(last_epoch=n).write_sqlite(root / f"store-{n}") for n in (3, 4)}


@pytest.mark.parametrize("name", ["s%41", "st#x", "st?y", "st ore"])
def test_a_store_under_a_name_with_uri_characters_reads_its_own_rows(tmp_path, written, name):
    """The reader itself, without an ingest: every table of every epoch of a store whose name holds URI
    characters reads as the same store under a plain name does (not the sibling ``sA``, which has one epoch
    more), and not one file appears beside it or in it."""
    import pyarrow as pa

    from pipeline.sources.store import open_store
    from pipeline.sources.store.base import TABLES

    mine, sibling = tmp_path / name, tmp_path / "sA"
    shutil.copytree(written[3], mine)
    shutil.copytree(written[4], sibling)  # one epoch more than `mine`
    before = sorted(p.name for p in tmp_path.rglob("*"))

    def rows(path) -> dict:
        store = open_store(str(path))
        try:
            got = {"epochs": store.epochs()}
            for epoch in got["epochs"]:
                for table in ("sessions", "diffs", "sealed_inferences"):
                    batches = list(store.read(table, epoch))
                    got[table, epoch] = pa.Table.from_batches(batches, TABLES[table].schema).to_pylist()
            return got
        finally:
            store.close()

    got = rows(mine)
    assert got["epochs"] == [1, 2, 3] and all(got[t, e] for t in ("sessions", "diffs") for e in (1, 2, 3))
    assert got == rows(written[3])
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    "name",
    [
        "s%41",
        # a whole ingest through the CLI per name; stands in the default tier: the "s%41" case (it once read the
        # sibling sA), tests/sources/store/test_store_paths.py::test_store_paths_are_paths_never_uri_syntax,
        # and every name read by the store reader,
        # tests/sources/store/test_store_paths.py::test_a_store_under_a_name_with_uri_characters_reads_its_own_rows
        *(pytest.param(n, marks=pytest.mark.heavy) for n in ("st#x", "st?y", "st ore")),
    ],
)
def test_store_paths_are_paths_never_uri_syntax(tmp_path, written, name):
    """A store under a name with URI characters reads its own epochs, and its directory is left unchanged
    (``s%41`` once read the sibling ``sA``; ``#`` and ``?`` created empty files beside the store)."""
    mine, sibling = tmp_path / name, tmp_path / "sA"
    shutil.copytree(written[3], mine)
    shutil.copytree(written[4], sibling)  # one epoch more than `mine`
    before = sorted(p.name for p in tmp_path.rglob("*"))
    wh = tmp_path.parent / f"{tmp_path.name}-w.duckdb"
    result = runner.invoke(app, ["ingest", str(mine), "-w", str(wh)])
    assert result.exit_code == 0, result.output
    assert frame(wh, "SELECT DISTINCT epoch_id FROM escrows ORDER BY 1")["epoch_id"].to_list() == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
