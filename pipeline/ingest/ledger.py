"""Accounting ledger → warehouse: counter keys parsed as maps, per-escrow rows upserted.

`counter_key` changes shape with `schema_version` (docs/sources.md, accounting ledger): 4 has no flags, 6 adds the
five booleans and `delivery_reason`, 7 says `phase` / `terminal` / `timeout_action`. Every key is
parsed as a generic JSON map: known fields become columns, unknown ones are kept (`extra_keys`)
beside the raw JSON, and nothing is quarantined for them. A key that is not a JSON object or
has no usable `slot_id` cannot be attributed to a participant: it is quarantined and counted.

The plane ingester `ingest_ledger` replaces an escrow's rows only when the copy is at least as
far along (`latest_nonce`) as what the warehouse holds (newest copy wins; history accumulates).
"""

from __future__ import annotations

import hashlib

import duckdb
import orjson
import polars as pl

from pipeline.ingest.runs import IngestRun, insert
from pipeline.sources.store.accounting import LedgerRead, ledger_marker, read_postgres_ledger, read_sqlite_ledger
from pipeline.warehouse.database import fetch_frame, transaction

STRING_FIELDS = (
    "disposition",
    "timeout_kind",
    "timeout_outcome",
    "timeout_reason",
    "failure_origin",
    "no_send_reason",
    "quarantine_mode",
    "detail_reason",
    "delivery_reason",
    "terminal",
    "ghost_reason",
)
FLAGS = ("slow_receipt", "slow_chunk", "clock_drifted", "slow_decode", "logprobs_decoded")
KNOWN_KEYS = {
    "slot_id",
    "phase",
    "dispatch_phase",
    "timeout_evaluation_phase",
    "timeout_action",
    "escrow_id",
    "count",
    "key",
    *STRING_FIELDS,
    *FLAGS,
}
LEDGER_TABLES = ("ledger_counters", "ledger_host_stats", "ledger_slot_sets", "ledger_slots", "ledger_escrows")
# warehouse_meta key: "<source_id>:<ledger_marker>" of the last ledger written. One key for all
# sources, so that after another copy's ledger was written the next ingest of this one reads it again
# (where two copies are equally far along, the copy ingested last wins).
LEDGER_MARKER_KEY = "ledger_marker"


class CounterKeyError(ValueError):
    """A counter key that cannot be attributed (not a JSON object, no slot)."""


def _flag(value) -> bool:
    if isinstance(value, str):
        return value.lower() in ("true", "1", "yes")
    return bool(value)


def parse_counter_key(raw) -> dict:
    """One CounterKey (bytes, str or an already decoded dict) as the warehouse's counter columns."""
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        try:
            key = orjson.loads(bytes(raw) if not isinstance(raw, str) else raw)
        except orjson.JSONDecodeError as exc:
            raise CounterKeyError(f"counter_key is not JSON ({exc})") from None
    else:
        key = raw
    if not isinstance(key, dict):
        raise CounterKeyError(f"counter_key is a JSON {type(key).__name__}, not an object")
    slot = key.get("slot_id")
    if isinstance(slot, str) and slot.lstrip("-").isdigit():
        slot = int(slot)
    if not isinstance(slot, int) or isinstance(slot, bool) or slot < 0:
        raise CounterKeyError(f"counter_key has no usable slot_id ({slot!r})")
    row: dict = {"slot_id": slot}
    for name in STRING_FIELDS:
        value = key.get(name)
        row[name] = None if value in (None, "") else str(value)
    if row["disposition"] is None:
        row["disposition"] = "unknown"
    if row["timeout_outcome"] is None and key.get("timeout_action"):
        row["timeout_outcome"] = str(key["timeout_action"])  # schema 7 names the outcome an action
    row["phase"] = key.get("phase") or key.get("dispatch_phase") or "normal"
    row["warmup"] = "warmup_probe" in (row["delivery_reason"], row["detail_reason"], row["terminal"])
    for flag in FLAGS:
        row[flag] = _flag(key.get(flag, False))
    row["key_json"] = orjson.dumps(key).decode()
    extra = {k: v for k, v in key.items() if k not in KNOWN_KEYS}
    row["extra_keys"] = orjson.dumps(extra).decode() if extra else None
    return row


def counter_id(key: dict) -> str:
    return hashlib.sha256(orjson.dumps(key, option=orjson.OPT_SORT_KEYS)).hexdigest()


def ingest_ledger(con: duckdb.DuckDBPyConnection, store, run: IngestRun) -> None:
    """Plane ingester: the accounting ledger of the copy, if it holds one. Skipped without reading the
    ledger when the warehouse's last ledger write came from this source at the same change markers
    (`ledger_marker`): reading it again would write the same rows."""
    marker = ledger_marker(store)
    if marker is None:
        return
    stamp = f"{store.source_id}:{marker}"
    stored = con.execute("SELECT value FROM warehouse_meta WHERE key = ?", [LEDGER_MARKER_KEY]).fetchall()
    if marker and stored == [(stamp,)]:
        return
    read = read_postgres_ledger(store) if store.kind == "postgres" else read_sqlite_ledger(store)
    if read is not None:
        write_ledger(con, read, run, stamp)


def write_ledger(con: duckdb.DuckDBPyConnection, read: LedgerRead, run: IngestRun, stamp: str | None = None) -> None:
    """Replace the ledger rows of every escrow the copy holds at least as far along as the warehouse;
    `stamp` (the copy's change markers) is recorded in the same transaction."""
    problems = list(read.problems)
    stored = dict(fetch_frame(con, "SELECT escrow_id, latest_nonce FROM ledger_escrows").iter_rows())
    escrows = [
        e
        for e in read.escrows
        if e["escrow_id"] not in stored or (e["latest_nonce"] or 0) >= (stored[e["escrow_id"]] or 0)
    ]
    keep = {e["escrow_id"] for e in escrows}
    escrow_rows, slot_rows = [], []
    for e in escrows:
        escrow_rows.append(
            {
                "escrow_id": e["escrow_id"],
                "epoch_id": e["epoch_id"],
                "model": e["model"],
                "group_size": len(e["slots"]),
                "phase": e["phase"],
                "phase_rank": e["phase_rank"],
                "latest_nonce": e["latest_nonce"],
                "schema_version": read.schema_version,
                "layout": read.layout,
                "source_id": run.source_id,
                "run_id": run.run_id,
            }
        )
        if not e["slots"]:
            problems.append(
                (
                    "accounting_escrow_state",
                    e["escrow_id"],
                    "escrow metadata has no slots; its counters cannot be attributed to participants",
                )
            )
        slot_rows += [{"escrow_id": e["escrow_id"], "slot_id": s, "address": a} for s, a in enumerate(e["slots"])]
    counter_rows = []
    bad_counters: dict[str, int] = {}  # table rows of counters whose key cannot be attributed, by escrow
    for c in read.counters:
        if c["escrow_id"] not in keep:
            continue
        try:
            parsed = parse_counter_key(c["counter_key"])
        except CounterKeyError as exc:
            problems.append(("accounting_escrow_counters", f"{c['escrow_id']}/{c['counter_id']}", str(exc)))
            bad_counters[c["escrow_id"]] = bad_counters.get(c["escrow_id"], 0) + c.get("source_rows", 1)
            continue
        counter_rows.append(
            {
                "escrow_id": c["escrow_id"],
                "counter_id": c["counter_id"],
                **parsed,
                "count": int(c["count"] or 0),
                "schema_version": read.schema_version,
            }
        )
    host_rows = [h for h in read.host_stats if h["escrow_id"] in keep]
    set_rows = [s for s in read.slot_sets if s["escrow_id"] in keep]
    frames = {
        "ledger_escrows": escrow_rows,
        "ledger_slots": slot_rows,
        "ledger_counters": counter_rows,
        "ledger_host_stats": host_rows,
        "ledger_slot_sets": set_rows,
    }
    with transaction(con):
        if keep:
            con.register("ledger_keep", pl.DataFrame({"escrow_id": sorted(keep)}).to_arrow())
            for table in LEDGER_TABLES:
                con.execute(f"DELETE FROM {table} WHERE escrow_id IN (SELECT escrow_id FROM ledger_keep)")
            con.unregister("ledger_keep")
        for table, rows in frames.items():
            insert(con, table, rows, on_conflict="replace")
        run.count("ledger_quarantined", run.quarantine(problems))
        con.execute("INSERT OR REPLACE INTO warehouse_meta VALUES (?, ?)", [LEDGER_MARKER_KEY, stamp])
    run.count("ledger_escrows", len(escrow_rows))
    run.count("ledger_counters", len(counter_rows))
    _account(run, read, keep, bad_counters)


def _account(run: IngestRun, read: LedgerRead, keep: set[str], bad_counters: dict[str, int]) -> None:
    """Every row read of every ledger table: used (its escrow written, or a row of no escrow such as
    meta), deduplicated (the warehouse holds its escrow at least as far along) or quarantined (its
    escrow cannot be attributed: no state row, a blob that is not a JSON object, a leftover legacy
    blob in PostgreSQL; or a counter key that cannot be parsed), each with a quarantine row."""
    acct = run.accounting
    attributed = {e["escrow_id"] for e in read.escrows}
    for table, by_escrow in read.rows.items():
        legacy = table == "accounting_escrows" and read.layout == "postgres"
        for escrow, n in by_escrow.items():
            acct.read(table, n)
            if escrow is None:
                acct.used(table, n)
            elif legacy or escrow not in attributed:
                acct.quarantined(table, n)
            elif escrow in keep:
                bad = bad_counters.get(escrow, 0) if table == "accounting_escrow_counters" else 0
                acct.used(table, n - bad)
                acct.quarantined(table, bad)
            else:
                acct.deduplicated(table, n)
    acct.flag(
        "accounting_escrow_invalid_nonces", "with slot_id -1 (upstream counts them for no slot)", read.unattributed
    )
