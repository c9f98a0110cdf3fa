"""Stored answers → `answer_checks_t`: one row of sampling parameters and integrity checks per
answer, bodies dropped; the facts come from `pipeline.transforms.answer_scan`.

Payloads are checked through a `BatchPool`: in this process by default, in worker processes when
`GONKA_EVIDENCE_WORKERS` > 1 and there is enough work; rows, their order and quarantine reasons
are the same either way. For the store directory the workers also read and base64-decode the
files (they get paths, not bytes); PostgreSQL copies hand them the bodies read in the ingest's
snapshot.
"""

from __future__ import annotations

from contextlib import nullcontext

import duckdb
import pyarrow as pa

from pipeline.core.parallel import BatchPool
from pipeline.core.paths import sql_text
from pipeline.ingest.runs import IngestRun, Problem
from pipeline.sources.store.payloads import (
    NOT_A_PAYLOAD,
    PayloadFile,
    PayloadListing,
    RawPayload,
    payload_files,
    postgres_payloads,
)
from pipeline.transforms.answer_scan import (
    BodyError,
    check_payload,
    check_payload_files,
    check_payloads,
    scan_request,
    scan_response,
)
from pipeline.warehouse.database import fetch_frame, transaction

ROWS_PER_COMMIT = 5000


def _payload_bytes(p: RawPayload) -> int:
    return len(p.prompt or b"") + len(p.response or b"")


def _file_bytes(f: PayloadFile) -> int:
    return f.size


def checked_payloads(store, known: set[tuple[str, int]], pool: BatchPool, listing: PayloadListing | None = None):
    """(row, problems) of every payload of the copy not in `known`, in source order; what the read
    found besides (known payloads, the payload directory's other entries) goes to `listing`."""
    if store.kind == "postgres":
        return pool.map(check_payloads, postgres_payloads(store, known, listing), _payload_bytes)
    return pool.map(check_payload_files, payload_files(store.path / "payloads", known, listing), _file_bytes)


def accounting_input(store) -> tuple[str, str]:
    """The accounting's input (and unit) of a copy's payloads: the rows of its table, or the files of its directory."""
    return ("payload_storage", "rows") if store.kind == "postgres" else ("payload files", "files")


def ingest_payloads(con: duckdb.DuckDBPyConnection, store, run: IngestRun, pool: BatchPool | None = None) -> None:
    """Plane ingester: every stored answer of the copy not yet in the warehouse (checked in `pool`,
    by default a `BatchPool` of `GONKA_EVIDENCE_WORKERS` processes, 1 = this process, closed at the end).

    Accounting (one input, `accounting_input`): a payload with a problem is quarantined (its row is
    still written, counted in `answers_scanned`), one whose key the warehouse holds or whose `.json`
    a `.json.zst` supersedes is deduplicated, an entry of the directory that is no payload is
    quarantined, and the rest are used (flagged where no inference of the warehouse has their key)."""
    known = {(e, i) for e, i in fetch_frame(con, "SELECT escrow_id, inference_id FROM answer_checks_t").iter_rows()}
    rows: list[dict] = []
    problems: list[Problem] = []
    name, unit = accounting_input(store)
    acct = run.accounting

    def commit() -> None:
        with transaction(con):
            written = run.insert("answer_checks_t", rows, on_conflict="replace", count_as="answer_checks")
            run.count("payloads_quarantined", run.quarantine(problems))
        bad = sum(1 for r in rows if r["problem"] is not None)  # each with its quarantine row
        acct.used(name, written - bad)
        acct.quarantined(name, bad)
        acct.flag(name, "of no inference in the warehouse", _without_inference(con, rows))

    listing = PayloadListing()
    with nullcontext(pool) if pool else BatchPool(preload=[check_payloads.__module__]) as pool:
        for row, found in checked_payloads(store, known, pool, listing):
            acct.read(name, 1, unit)
            rows.append(row | {"source_id": store.source_id, "run_id": run.run_id})
            key = f"{row['epoch_id']}/{row['escrow_id']}/{row['inference_id']}"
            problems += [("payload_storage", key, "; ".join(found))] if found else []
            if len(rows) >= ROWS_PER_COMMIT:
                commit()
                rows, problems = [], []
    # Entries of the payload directory that are no payload: one quarantine row each, by name.
    problems += [("payload_files", stray, NOT_A_PAYLOAD) for stray in listing.strays]
    if rows or problems:
        commit()
    acct.read(name, len(listing.strays) + listing.superseded + listing.skipped, unit)
    acct.quarantined(name, len(listing.strays))
    acct.deduplicated(name, listing.superseded + listing.skipped)  # the warehouse holds their answer


def _without_inference(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> int:
    """How many of the rows without a problem answer no inference of the warehouse (yet: another copy
    may bring it)."""
    clean = [r for r in rows if r["problem"] is None]
    if not clean:
        return 0
    keys = pa.table({"escrow_id": [r["escrow_id"] for r in clean], "inference_id": [r["inference_id"] for r in clean]})
    con.register("payload_keys", keys)
    try:
        return int(con.execute(sql_text("warehouse/ingest/payloads_without_inference.sql")).fetchall()[0][0])
    finally:
        con.unregister("payload_keys")


# re-exported: the scanner's names were first defined here
__all__ = ["BodyError", "check_payload", "checked_payloads", "ingest_payloads", "scan_request", "scan_response"]
