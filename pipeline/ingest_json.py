"""Saved JSON responses → the tracker views (`gonka-evidence ingest-json FILE...`).

Hosts usually hold these rather than a gateway's database:
- the gateway accounting API, `GET /api/v1/epochs/{n}/participants[/{addr}]` (sources.md §5.7):
  per-participant records of schema 2–7; `counters[]` entries are `{escrow_id, key: {…}, count}`
  up to v6 and flattened `{escrow_id, slot_id, disposition, …, count}` in v7. They land in
  `api_participants` / `api_counters` and so in tracker_participants (origin `api`, used where
  no ledger database row exists for the same epoch, participant and model);
- chain REST (§8.1): `epoch_performance_summary`, a participant's `current_epoch_stats` (epoch
  taken from the enclosing response), `DevshardHostEpochStats`. uint64 values are strings and
  `Decimal{value, exponent}` means value × 10^exponent. They land in `chain_participant_stats`
  (tracker_participants.chain_*).

Objects are recognised by their fields wherever they sit in the document (a bare record, a
list, or wrapped as the endpoints wrap them). Every file is one ingest run (source `json:PATH`)
committed in one transaction; what cannot be used is quarantined with the reason, never fatal.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import orjson

from pipeline.loading import ingest_run
from pipeline.sources.base import SourceError
from pipeline.transforms.ledger import CounterKeyError, counter_id, parse_counter_key
from pipeline.warehouse import transaction

CHAIN_COUNTERS = ("inference_count", "missed_requests", "validated_inferences", "invalidated_inferences",
                  "earned_coins", "rewarded_coins", "burned_coins")
HOST_STATS = ("missed", "invalid", "cost", "required_validations", "completed_validations", "escrow_count")


@dataclass
class JsonIngestSummary:
    files: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    run_ids: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def _uint(value) -> int | None:
    """A chain uint64 (a JSON string in REST) or a plain number."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _decimal(value) -> float | None:
    """`Decimal{value, exponent}` = value × 10^exponent; plain numbers pass."""
    if isinstance(value, dict) and "value" in value:
        try:
            return int(value["value"]) * 10.0 ** int(value.get("exponent", 0))
        except (TypeError, ValueError):
            return None
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


class _Collector:
    def __init__(self, name: str):
        self.name = name
        self.participants: dict[tuple, dict] = {}
        self.counters: dict[tuple, dict] = {}
        self.chain: dict[tuple, dict] = {}
        self.problems: list[tuple[str, str, str]] = []

    def walk(self, node, epoch: int | None = None, path: str = "$") -> None:
        if isinstance(node, list):
            for k, item in enumerate(node):
                self.walk(item, epoch, f"{path}[{k}]")
            return
        if not isinstance(node, dict):
            return
        for name in ("epoch_index", "epoch_id", "epoch"):  # the nearest enclosing epoch applies below
            if _uint(node.get(name)) is not None:
                epoch = _uint(node[name])
                break
        if isinstance(node.get("participant"), str) and any(k in node for k in ("counters", "assigned_nonces", "dispositions")):
            self._record(node, epoch, path)
        elif isinstance(node.get("participant_id"), str) and "inference_count" in node:
            self._chain(node["participant_id"], epoch, "epoch_performance_summary", node, path)
        elif isinstance(node.get("participant"), str) and "missed" in node and "invalid" in node:
            self._chain(node["participant"], epoch, "devshard_host_epoch_stats", node, path)
        elif isinstance(node.get("current_epoch_stats"), dict):
            who = node.get("address") or node.get("index")
            if isinstance(who, str):
                self._chain(who, epoch, "current_epoch_stats", node["current_epoch_stats"] | {
                    k: node[k] for k in ("invalidLLR", "inactiveLLR", "confirmationPoCRatio") if k in node}, path)
        else:
            for key, value in node.items():
                self.walk(value, epoch, f"{path}.{key}")

    def _record(self, rec: dict, epoch: int | None, path: str) -> None:
        participant, model = rec["participant"], rec.get("model") or ""
        if epoch is None:
            self.problems.append(("api_participants", f"{self.name}:{path}", "accounting record without epoch_index"))
            return
        version = _uint(rec.get("schema_version"))
        dispositions = rec.get("dispositions") if isinstance(rec.get("dispositions"), dict) else {}
        known = {"schema_version", "epoch_index", "participant", "model", "assigned_nonces", "dispositions",
                 "protocol_misses", "protocol_invalid", "unresolved_challenges", "recorded_invalid_transitions",
                 "counters"}
        self.participants[(epoch, participant, model)] = {
            "epoch_id": epoch, "participant": participant, "model": model, "schema_version": version,
            "assigned_nonces": _uint(rec.get("assigned_nonces")), "protocol_only": _uint(dispositions.get("protocol_only")) or 0,
            "protocol_misses": _uint(rec.get("protocol_misses")), "protocol_invalid": _uint(rec.get("protocol_invalid")),
            "unresolved_challenges": _uint(rec.get("unresolved_challenges")),
            "recorded_invalid_transitions": _uint(rec.get("recorded_invalid_transitions")),
            "dispositions": json.dumps(dispositions),
            "extra": json.dumps({k: v for k, v in rec.items() if k not in known}, default=str)}
        for k, entry in enumerate(rec.get("counters") or []):
            where = f"{self.name}:{epoch}/{participant}/{k}"
            if not isinstance(entry, dict):
                self.problems.append(("api_counters", where, "counter entry is not an object"))
                continue
            key = entry.get("key") if isinstance(entry.get("key"), dict) else {
                n: v for n, v in entry.items() if n not in ("escrow_id", "count", "key")}
            try:
                parsed = parse_counter_key(key)
            except CounterKeyError as exc:
                self.problems.append(("api_counters", where, str(exc)))
                continue
            escrow = str(entry.get("escrow_id") or "")
            cid = counter_id(key)
            slot = self.counters.setdefault((epoch, participant, model, escrow, cid), {
                "epoch_id": epoch, "participant": participant, "model": model, "escrow_id": escrow,
                "counter_id": cid, **parsed, "count": 0, "schema_version": version})
            slot["count"] += _uint(entry.get("count")) or 0

    def _chain(self, participant: str, epoch: int | None, kind: str, obj: dict, path: str) -> None:
        epoch = _uint(obj.get("epoch_index")) if obj.get("epoch_index") is not None else epoch
        if epoch is None:
            self.problems.append(("chain_participant_stats", f"{self.name}:{path}",
                                  f"{kind} without an epoch (save the response with its epoch)"))
            return
        row = {"epoch_id": epoch, "participant": participant, "kind": kind,
               **{c: _uint(obj.get(c)) for c in CHAIN_COUNTERS + HOST_STATS},
               "claimed": obj.get("claimed") if isinstance(obj.get("claimed"), bool) else None,
               "invalid_llr": _decimal(obj.get("invalidLLR")), "inactive_llr": _decimal(obj.get("inactiveLLR")),
               "confirmation_poc_ratio": _decimal(obj.get("confirmationPoCRatio"))}
        self.chain[(epoch, participant, kind)] = row


def ingest_json_files(con: duckdb.DuckDBPyConnection, files: list[Path]) -> JsonIngestSummary:
    """Ingest saved accounting-API / chain REST responses; one run per file."""
    started = time.monotonic()
    summary = JsonIngestSummary()
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise SourceError(f"{path}: no such file")
        source_id = f"json:{path.resolve()}"
        collector = _Collector(path.name)
        try:
            collector.walk(orjson.loads(path.read_bytes()))
        except orjson.JSONDecodeError as exc:
            collector.problems.append(("json_file", str(path.resolve()), f"not JSON ({exc})"))
        with ingest_run(con, source_id=source_id, kind="json", display=str(path)) as run, transaction(con):
            extras = {"source_id": source_id, "run_id": run.run_id}
            for (epoch, participant, model) in collector.participants:  # a newer response replaces the record
                con.execute("DELETE FROM api_counters WHERE epoch_id = ? AND participant = ? AND model = ?",
                            [epoch, participant, model])
            run.insert("api_participants", [r | extras for r in collector.participants.values()], "replace")
            run.insert("api_counters", list(collector.counters.values()), "replace")
            run.insert("chain_participant_stats", [r | extras for r in collector.chain.values()], "replace")
            run.quarantine(collector.problems)
        summary.files += 1
        summary.run_ids.append(run.run_id)
        summary.quarantined += run.quarantined
        for table, n in run.rows.items():
            summary.rows[table] = summary.rows.get(table, 0) + n
    summary.elapsed_s = time.monotonic() - started
    return summary
