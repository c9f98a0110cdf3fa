"""A report reads the warehouse once per question: its sections ask the same of it (epochs, sources, closure)."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

import pipeline.warehouse.database as database
from pipeline.output.report.model import build_epoch_report
from pipeline.warehouse.database import fetch_frame, open_read_only, reads_once
from tests.factories import data_samples_warehouse
from tests.output.shared import HOST


def test_a_report_runs_each_query_once(tmp_path, monkeypatch):
    wh = data_samples_warehouse(tmp_path / "warehouse.duckdb", vllm_log_host=HOST)
    asked: list[tuple[str, str]] = []
    relation = database.relation
    monkeypatch.setattr(
        database, "relation", lambda con, sql, p=None: asked.append((sql, repr(p))) or relation(con, sql, p)
    )
    con = open_read_only(wh)
    try:
        report = build_epoch_report(con, 3, HOST)
    finally:
        con.close()
    assert len(report.sections) > 10 and len(asked) > 50
    assert len(asked) == len(set(asked))  # the closure, sources and epochs were asked by every section before


def test_reads_once_answers_a_query_asked_again_on_its_connection_only():
    con, other = duckdb.connect(), duckdb.connect()
    sql = "SELECT random() AS r"
    with reads_once(con):
        first = fetch_frame(con, sql)
        first.insert_column(1, pl.Series("x", [1]))  # a caller's change of its frame is its own
        with reads_once(con):  # nested: the outer scope's frames serve
            assert fetch_frame(con, sql).equals(first.drop("x"))
        by_n = "SELECT random() AS r, $n AS n"
        one, two = (fetch_frame(con, by_n, {"n": n}) for n in (1, 2))
        assert one["r"][0] != two["r"][0] and fetch_frame(con, by_n, {"n": 1}).equals(one)  # keyed by parameters too
        assert fetch_frame(other, sql)["r"][0] != first["r"][0]  # another connection is asked
    assert fetch_frame(con, sql)["r"][0] != first["r"][0]  # outside, the query runs


def test_reads_once_never_takes_two_parameters_whose_repr_is_one_for_one():
    """An array's repr elides its middle: two arrays that differ there must each be asked."""
    con = duckdb.connect()
    a = np.zeros(3000, dtype=np.int64)
    b = a.copy()
    b[1500] = 7
    assert repr(a) == repr(b)
    with reads_once(con):
        sums = [fetch_frame(con, "SELECT list_sum($x) AS s", {"x": x})["s"][0] for x in (a, b)]
    assert sums == [0, 7]
