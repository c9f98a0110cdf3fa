"""The gateway's accounting ledger ("the tracker"; docs/sources.md, accounting ledger), read from a copy.

Two layouts give one shape: `LedgerRead`, per escrow and slot, with the merge rules of the
PostgreSQL row layout already applied: counters summed across `writer_id`, the
`_legacy_blob` slot-count baseline added, sets counted per slot (`slot_id = −1` invalid rows
skipped), orphan rows (no state row) and leftover legacy `accounting_escrows` rows in PostgreSQL
reported and not counted. `rows` holds the rows read of each table, for the ingest's accounting.
The SQLite `accounting.db` keeps one JSON document per escrow; a missing key decodes as zero or
empty. Counter keys stay raw JSON here; `pipeline.ingest.ledger` parses them. Nothing is written to the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pyarrow as pa

from pipeline.core.paths import sql_text
from pipeline.sources.store.postgres_markers import LEDGER_MARKED_BY, LEGACY_LEDGER, accounting_markers_sql

PROTOCOL_COUNTERS = ("protocol_validated", "protocol_finished")  # PR #1757; SQLite blobs: Validated, Finished
PHASE_RANK = {"active": 0, "finalizing": 1, "finalized": 2, "settled": 3}
# The PostgreSQL ledger tables `read_postgres_ledger` reads (any other accounting_ table is named as not read).
POSTGRES_LEDGER_TABLES = (
    "accounting_meta",
    "accounting_writers",
    "accounting_escrow_state",
    "accounting_escrow_counters",
    "accounting_escrow_host_stats",
    "accounting_escrow_protocol_nonces",
    "accounting_escrow_challenges",
    "accounting_escrow_invalid_nonces",
    "accounting_escrow_slot_counts",
    "accounting_escrows",
)


@dataclass
class LedgerRead:
    layout: str  # "postgres" | "sqlite"
    schema_version: int | None
    escrows: list[dict] = field(
        default_factory=list
    )  # escrow_id, epoch_id, model, phase, phase_rank, latest_nonce, slots
    counters: list[dict] = field(default_factory=list)  # escrow_id, counter_id, key (raw bytes), count (merged)
    host_stats: list[dict] = field(
        default_factory=list
    )  # escrow_id, slot_id, missed, invalid, cost, required_validations, completed_validations,
    # protocol_validated, protocol_finished (PR #1757; None without them)
    slot_sets: list[dict] = field(
        default_factory=list
    )  # escrow_id, slot_id, protocol_nonces, challenges, open_challenges, invalid_transitions
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (table, key, reason)
    writers: list[dict] = field(default_factory=list)
    # Rows read of each table of the copy, by escrow (None: rows of no escrow, e.g. meta): the accounting's
    # measure; `unattributed` = rows read of an escrow's slot -1 (upstream counts them for no slot).
    rows: dict[str, dict[str | None, int]] = field(default_factory=dict)
    unattributed: int = 0

    def count(self, table: str, escrow_id: str | None, n: int = 1) -> None:
        by_escrow = self.rows.setdefault(table, {})
        by_escrow[escrow_id] = by_escrow.get(escrow_id, 0) + n


def _int(value, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _slots(meta: dict | None) -> list[str | None]:
    """Addresses by slot id from EscrowMetadata.slots (PascalCase entries)."""
    slots = (meta or {}).get("slots") or []
    out: dict[int, str | None] = {}
    for k, s in enumerate(slots):
        if isinstance(s, dict):
            out[_int(s.get("SlotID", k), k)] = s.get("ValidatorAddress")
        elif isinstance(s, str):
            out[k] = s
    return [out.get(i) for i in range(max(out) + 1)] if out else []


def _meta(raw, escrow_id: str, problems: list) -> dict:
    if raw is None:
        return {}
    try:
        meta = orjson.loads(bytes(raw) if not isinstance(raw, str) else raw)
        return meta if isinstance(meta, dict) else {}
    except orjson.JSONDecodeError as exc:
        problems.append(("accounting_escrow_state", escrow_id, f"meta_json is not JSON ({exc})"))
        return {}


def ledger_marker(store) -> str | None:
    """A digest of what moves whenever the copy's ledger changes, read without the ledger itself;
    None when the copy holds no ledger, "" when it cannot tell (a partial ledger: no meta or writers
    table). Row layout: the meta rows, every writer's `updated_at` and error count, every escrow's
    `latest_nonce` and phase, and the leftover legacy blob count where that table exists.
    SQLite `accounting.db`: its meta rows, whose `updated_at` the writer sets on every save. Equal
    digests mean the same ledger."""
    if store.kind == "postgres":
        if store.table_columns("accounting_escrow_state") is None:
            return None
        tables = {t for t in (*LEDGER_MARKED_BY, LEGACY_LEDGER) if store.table_columns(t) is not None}
        if any(t not in tables for t in LEDGER_MARKED_BY):
            return ""
        batches = list(store.query_batches(accounting_markers_sql(tables)))
        markers = sorted(pa.Table.from_batches(batches).column("marker").to_pylist() if batches else [])
    else:
        path = Path(store.path) / "accounting.db"
        if not path.exists():
            return None
        markers = sorted(
            f"meta:{r['key']}={r['value']}"
            for r in _file_rows(
                store,
                path,
                "SELECT 1 AS __w, '' AS key, '' AS value UNION ALL SELECT 0, key, value FROM accounting_meta",
            )
        )
    return hashlib.sha256("\n".join(markers).encode()).hexdigest()


def read_postgres_ledger(store) -> LedgerRead | None:
    """The row layout of a PostgreSQL copy, inside the ingest's snapshot; None when absent."""
    if store.table_columns("accounting_escrow_state") is None:
        return None

    def table(name: str, sql: str) -> list[dict]:
        if store.table_columns(name) is None:
            return []
        batches = list(store.query_batches(sql))
        return pa.Table.from_batches(batches).to_pylist() if batches else []

    meta_rows = table("accounting_meta", "SELECT key, value FROM accounting_meta")
    meta = {r["key"]: r["value"] for r in meta_rows}
    read = LedgerRead("postgres", _int_or_none(meta.get("schema_version")) if meta.get("schema_version") else None)
    read.writers = table("accounting_writers", "SELECT writer_id, updated_at, writer_errors FROM accounting_writers")
    read.count("accounting_meta", None, len(meta_rows))
    read.count("accounting_writers", None, len(read.writers))
    known = _pg_escrow_states(read, table)
    _pg_counters(read, table, known)
    _pg_host_stats(read, store, table, known)
    sets: dict[tuple[str, int], dict] = {}
    _pg_protocol_nonces(read, table, known, sets)
    _pg_challenges(read, table, known, sets)
    _pg_invalid_nonces(read, store, table, known, sets)
    _pg_slot_counts(read, table, known, sets)
    read.slot_sets = list(sets.values())
    for name, by_escrow in read.rows.items():  # rows of an escrow without a state row: not read further, named
        read.problems += [
            (name, e, f"{n} row(s) of an escrow with no accounting_escrow_state row; not counted")
            for e, n in by_escrow.items()
            if e is not None and e not in known
        ]
    for r in table("accounting_escrows", "SELECT escrow_id FROM accounting_escrows"):
        read.count("accounting_escrows", r["escrow_id"])
        read.problems.append(
            (
                "accounting_escrows",
                r["escrow_id"],
                "leftover legacy ledger blob in PostgreSQL (not drained by blob_to_rows); not counted",
            )
        )
    return read


_Table = Callable[[str, str], list[dict]]  # (table name, SQL) -> its rows; none where the copy lacks the table


def _pg_escrow_states(read: LedgerRead, table: _Table) -> set[str]:
    """The escrows of the ledger (`accounting_escrow_state`), into `read.escrows`; returns their ids."""
    known = set()
    for s in table("accounting_escrow_state", sql_text("sources/postgres/accounting_state.sql")):
        read.count("accounting_escrow_state", s["escrow_id"])
        m = _meta(s["meta_json"], s["escrow_id"], read.problems)
        known.add(s["escrow_id"])
        read.escrows.append(
            {
                "escrow_id": s["escrow_id"],
                "epoch_id": s["creation_epoch"],
                "model": s["model"] or m.get("model"),
                "phase": s["phase"],
                "phase_rank": s["phase_rank"],
                "latest_nonce": s["latest_nonce"] or 0,
                "slots": _slots(m),
            }
        )
    return known


def _pg_counters(read: LedgerRead, table: _Table, known: set[str]) -> None:
    for c in table("accounting_escrow_counters", sql_text("sources/postgres/accounting_counters.sql")):
        read.count("accounting_escrow_counters", c["escrow_id"], c["source_rows"])
        if c["escrow_id"] in known:
            read.counters.append(c)


def _pg_host_stats(read: LedgerRead, store, table: _Table, known: set[str]) -> None:
    # PR #1757 builds add protocol_validated / protocol_finished (NULL where the ledger has no such columns).
    host_columns = store.table_columns("accounting_escrow_host_stats") or []
    counters = ", ".join(c if c in host_columns else f"NULL::bigint AS {c}" for c in PROTOCOL_COUNTERS)
    for h in table(
        "accounting_escrow_host_stats",
        "SELECT escrow_id, slot_id, missed, invalid, cost, "
        f"required_validations, completed_validations, {counters} FROM accounting_escrow_host_stats",
    ):
        read.count("accounting_escrow_host_stats", h["escrow_id"])
        if h["escrow_id"] in known:
            read.host_stats.append(h)


def _slot_row(sets: dict[tuple[str, int], dict], escrow_id: str, slot_id: int) -> dict:
    """The per-slot counts of (escrow, slot), started at zero."""
    return sets.setdefault(
        (escrow_id, slot_id),
        {
            "escrow_id": escrow_id,
            "slot_id": slot_id,
            "protocol_nonces": 0,
            "challenges": 0,
            "open_challenges": 0,
            "invalid_transitions": 0,
        },
    )


def _pg_protocol_nonces(read: LedgerRead, table: _Table, known: set[str], sets: dict) -> None:
    for r in table(
        "accounting_escrow_protocol_nonces",
        "SELECT escrow_id, slot_id, count(*)::bigint AS n FROM accounting_escrow_protocol_nonces GROUP BY 1, 2",
    ):
        read.count("accounting_escrow_protocol_nonces", r["escrow_id"], r["n"])
        if r["escrow_id"] in known:
            _slot_row(sets, r["escrow_id"], r["slot_id"])["protocol_nonces"] += r["n"]


def _pg_challenges(read: LedgerRead, table: _Table, known: set[str], sets: dict) -> None:
    for r in table(
        "accounting_escrow_challenges",
        "SELECT escrow_id, slot_id, count(*)::bigint AS n, "
        "count(*) FILTER (WHERE NOT coalesce(resolved, false))::bigint AS open "
        "FROM accounting_escrow_challenges GROUP BY 1, 2",
    ):
        read.count("accounting_escrow_challenges", r["escrow_id"], r["n"])
        if r["escrow_id"] in known:
            row = _slot_row(sets, r["escrow_id"], r["slot_id"])
            row["challenges"] += r["n"]
            row["open_challenges"] += r["open"]


def _pg_invalid_nonces(read: LedgerRead, store, table: _Table, known: set[str], sets: dict) -> None:
    invalid_columns = store.table_columns("accounting_escrow_invalid_nonces") or []
    if "slot_id" in invalid_columns:
        invalid_sql = (
            "SELECT escrow_id, slot_id, count(*)::bigint AS n FROM accounting_escrow_invalid_nonces GROUP BY 1, 2"
        )
    else:  # ledgers before the slot column: the executor of a nonce is its slot nonce mod N
        invalid_sql = "SELECT escrow_id, nonce, 1::bigint AS n FROM accounting_escrow_invalid_nonces"
    group_sizes = {e["escrow_id"]: len(e["slots"]) for e in read.escrows}
    for r in table("accounting_escrow_invalid_nonces", invalid_sql):
        read.count("accounting_escrow_invalid_nonces", r["escrow_id"], r["n"])
        if "slot_id" in r and r["slot_id"] < 0:  # invalid rows of no slot: upstream counts them for none
            read.unattributed += r["n"] if r["escrow_id"] in known else 0
            continue
        if r["escrow_id"] in known:
            slot = r["slot_id"] if "slot_id" in r else r["nonce"] % max(group_sizes.get(r["escrow_id"]) or 1, 1)
            _slot_row(sets, r["escrow_id"], slot)["invalid_transitions"] += r["n"]


def _pg_slot_counts(read: LedgerRead, table: _Table, known: set[str], sets: dict) -> None:
    for r in table(
        "accounting_escrow_slot_counts",
        "SELECT escrow_id, slot_id, sum(open_challenges)::bigint AS open, "
        "sum(invalid_nonces)::bigint AS invalid, count(*)::bigint AS n "
        "FROM accounting_escrow_slot_counts GROUP BY 1, 2",
    ):
        read.count("accounting_escrow_slot_counts", r["escrow_id"], r["n"])
        if r["escrow_id"] in known:
            row = _slot_row(sets, r["escrow_id"], r["slot_id"])
            row["open_challenges"] += r["open"] or 0
            row["invalid_transitions"] += r["invalid"] or 0


def read_sqlite_ledger(store) -> LedgerRead | None:
    """`accounting.db` beside the store's epoch files; None when absent."""
    path = Path(store.path) / "accounting.db"
    if not path.exists():
        return None
    meta_rows = _file_rows(
        store, path, "SELECT 1 AS __w, '' AS key, '' AS value UNION ALL SELECT 0, key, value FROM accounting_meta"
    )
    meta = {r["key"]: r["value"] for r in meta_rows}
    read = LedgerRead("sqlite", _int_or_none(meta.get("schema_version")) if meta.get("schema_version") else None)
    read.writers = [
        {"writer_id": "sqlite", "updated_at": meta.get("updated_at"), "writer_errors": _int(meta.get("writer_errors"))}
    ]
    blobs = _file_rows(
        store,
        path,
        "SELECT 1 AS __w, '' AS escrow_id, 0 AS creation_epoch, '' AS model, X'' AS payload "
        "UNION ALL SELECT 0, escrow_id, creation_epoch, model, CAST(payload AS BLOB) "
        "FROM accounting_escrows",
    )
    read.count("accounting_meta", None, len(meta_rows))
    for b in blobs:
        read.count("accounting_escrows", b["escrow_id"])
        _blob_into(read, b)
    return read


def _file_rows(store, path: Path, sql: str) -> list[dict]:
    """Rows of a query on another SQLite file, behind a typed witness row (dropped here)."""
    batches = list(store.query_file_batches(path, sql))
    if not batches:
        return []
    return [r for r in pa.Table.from_batches(batches).to_pylist() if r.pop("__w") == 0]


def _blob_into(read: LedgerRead, b: dict) -> None:
    escrow_id = b["escrow_id"]
    try:
        blob = orjson.loads(b["payload"] or b"")
        if not isinstance(blob, dict):
            raise ValueError("not a JSON object")
    except (orjson.JSONDecodeError, ValueError) as exc:
        read.problems.append(("accounting_escrows", escrow_id, f"ledger blob is not a JSON object ({exc})"))
        return
    missing = [k for k in ("meta", "latest", "host_stats", "counters") if k not in blob]
    if missing:  # decodes as zero or empty, as the tracker does; reported so it is seen
        read.problems.append(
            ("accounting_escrows", escrow_id, f"ledger blob lacks {', '.join(missing)} (taken as zero/empty)")
        )
    meta = blob["meta"] if isinstance(blob.get("meta"), dict) else {}
    phase = meta.get("phase") or "active"
    read.escrows.append(
        {
            "escrow_id": escrow_id,
            "epoch_id": b["creation_epoch"] if b["creation_epoch"] is not None else meta.get("creation_epoch"),
            "model": b["model"] or meta.get("model"),
            "phase": phase,
            "phase_rank": PHASE_RANK.get(phase),
            "latest_nonce": _int(blob.get("latest")),
            "slots": _slots(meta),
        }
    )
    for c in blob.get("counters") or []:
        key = c.get("key") if isinstance(c, dict) else None
        raw = orjson.dumps(key) if key is not None else b"null"
        read.counters.append(
            {
                "escrow_id": escrow_id,
                "counter_id": hashlib.sha256(raw).hexdigest(),
                "counter_key": raw,
                "count": _int(c.get("count") if isinstance(c, dict) else None),
            }
        )
    for slot, hs in (blob.get("host_stats") or {}).items():
        hs = hs if isinstance(hs, dict) else {}
        read.host_stats.append(
            {
                "escrow_id": escrow_id,
                "slot_id": _int(slot, -1),
                "missed": _int(hs.get("Missed")),
                "invalid": _int(hs.get("Invalid")),
                "cost": _int(hs.get("Cost")),
                "required_validations": _int(hs.get("RequiredValidations")),
                "completed_validations": _int(hs.get("CompletedValidations")),
                "protocol_validated": _int_or_none(hs.get("Validated")),
                "protocol_finished": _int_or_none(hs.get("Finished")),
            }
        )
    sets: dict[int, dict] = {}

    def slot_row(slot: int) -> dict:
        return sets.setdefault(
            slot,
            {
                "escrow_id": escrow_id,
                "slot_id": slot,
                "protocol_nonces": 0,
                "challenges": 0,
                "open_challenges": 0,
                "invalid_transitions": 0,
            },
        )

    for p in blob.get("protocol_only") or []:
        slot_row(_int(p.get("slot"), -1))["protocol_nonces"] += 1
    for c in blob.get("challenges") or []:
        row = slot_row(_int(c.get("slot"), -1))
        row["challenges"] += 1
        row["open_challenges"] += not c.get("resolved", False)
    for i in blob.get("invalid") or []:
        if _int(i.get("slot"), -1) >= 0:
            slot_row(_int(i.get("slot")))["invalid_transitions"] += 1
    for slot, n in (blob.get("challenge_by_slot") or {}).items():  # legacy baselines
        slot_row(_int(slot, -1))["open_challenges"] += _int(n)
    for slot, n in (blob.get("invalid_by_slot") or {}).items():
        slot_row(_int(slot, -1))["invalid_transitions"] += _int(n)
    read.slot_sets += list(sets.values())
