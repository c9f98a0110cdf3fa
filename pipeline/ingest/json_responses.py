"""Saved JSON responses → the tracker views (`gonka-evidence ingest-json FILE...`).

Hosts usually hold these rather than a gateway's database:
- the gateway accounting API, `GET /api/v1/epochs/{n}/participants[/{addr}]` (docs/sources.md,
  Saved API and chain JSON): per-participant records of schema 2–7; `counters[]` entries are
  `{escrow_id, key: {…}, count}` up to v6 and flattened `{escrow_id, slot_id, disposition, …, count}`
  in v7. They land in `api_participants` / `api_counters` and so in tracker_participants (origin
  `api`, used where no ledger database row exists for the same epoch, participant and model);
- chain REST (same section): `epoch_performance_summary`, a participant's `current_epoch_stats` (epoch
  taken from the enclosing response), `DevshardHostEpochStats`. uint64 values are strings and
  `Decimal{value, exponent}` means value × 10^exponent. They land in `chain_participant_stats`
  (tracker_participants.chain_*).

Objects are recognised by their fields wherever they sit in the document (a bare record, a
list, or wrapped as the endpoints wrap them), at any depth. A file may be gzip-compressed. Every
file is one ingest run (source `json:PATH`) committed in one transaction; what cannot be used is
quarantined with the reason, never fatal: a file that is not (readable gzip of) JSON, and a record
with a number the warehouse's 64-bit integers or doubles cannot hold (it is not rounded or cut).
A path that is not a regular file of at most `MAX_JSON_FILE_BYTES` (decompressed) is a one-line error.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import msgspec

from pipeline.core.digest import content_digest
from pipeline.core.limits import LIMITS, nesting_past
from pipeline.ingest.accounting import Accounting
from pipeline.ingest.ledger import CounterKeyError, counter_id, parse_counter_key
from pipeline.ingest.runs import ingest_run
from pipeline.sources.files import FileReadError, read_regular_file
from pipeline.sources.json_keys import DuplicateKey, loads_unique
from pipeline.sources.store.base import SourceError
from pipeline.warehouse.database import transaction

CHAIN_COUNTERS = (
    "inference_count",
    "missed_requests",
    "validated_inferences",
    "invalidated_inferences",
    "earned_coins",
    "rewarded_coins",
    "burned_coins",
)
HOST_STATS = ("missed", "invalid", "cost", "required_validations", "completed_validations", "escrow_count")
INT64 = (-(2**63), 2**63 - 1)  # the warehouse's BIGINT columns
MAX_JSON_FILE_BYTES = LIMITS.json_file_bytes  # one saved response, compressed or not: far above any real one
GZIP_MAGIC = b"\x1f\x8b"
RECORD_TABLES = ("api_participants", "chain_participant_stats")  # a record of these is one row (per key)


class OutOfRange(ValueError):
    """A number in a record that the warehouse column cannot hold."""


@dataclass
class JsonIngestSummary:
    files: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    run_ids: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    unreadable: list[str] = field(default_factory=list)  # "PATH: reason" of each file quarantined whole


class Unreadable(ValueError):
    """A file that is not (readable gzip of) JSON."""


def _document(data: bytes):
    """The JSON document of a file's bytes, gunzipped first when they are gzip."""
    if data.startswith(GZIP_MAGIC):
        data = _gunzip(data)
    if nesting_past(data) is not None:  # past pipeline/core/limits.py's depth (its words as before the limit)
        raise Unreadable("not JSON (nested too deeply)")
    try:
        doc = msgspec.json.decode(data)  # integers exact at any size (orjson would round them to floats)
    except msgspec.ValidationError as exc:  # a number no integer or double holds, e.g. 1e999
        raise Unreadable(f"a number out of range ({exc})") from None
    except msgspec.DecodeError as exc:
        raise Unreadable(f"not JSON ({exc})") from None
    except RecursionError:
        raise Unreadable("not JSON (nested too deeply)") from None
    try:  # msgspec keeps the last of two members of one name: a second parse names such a key
        loads_unique(data, parse_int=str, parse_float=str, parse_constant=str)
    except DuplicateKey as exc:
        raise Unreadable(f"ambiguous: {exc}") from None
    except RecursionError:
        raise Unreadable("not JSON (nested too deeply)") from None
    return doc


def _gunzip(data: bytes) -> bytes:
    """Every gzip member of `data`, decompressed (at most MAX_JSON_FILE_BYTES); CRC and length checked."""
    out = bytearray()
    while data.strip(b"\0"):  # the gzip tool accepts zero padding after the last member
        member = zlib.decompressobj(wbits=31)
        try:
            out += member.decompress(data, MAX_JSON_FILE_BYTES + 1 - len(out))
        except zlib.error as exc:
            raise Unreadable(f"not readable gzip ({exc})") from None
        if len(out) > MAX_JSON_FILE_BYTES or member.unconsumed_tail:
            raise Unreadable(f"larger than {MAX_JSON_FILE_BYTES:,} bytes when decompressed")
        if not member.eof:
            raise Unreadable("not readable gzip (truncated)")
        data = member.unused_data
    return bytes(out)


def _uint(value, name: str = "value") -> int | None:
    """A chain uint64 (a JSON string in REST) or a plain number; None when it is not a number."""
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():  # beyond int()'s digit limit
            raise OutOfRange(f"{name} {value[:20]}… is beyond 64 bits") from None
        return None
    except OverflowError:  # an infinite float
        raise OutOfRange(f"{name} {value} is beyond 64 bits") from None
    if not INT64[0] <= number <= INT64[1]:
        raise OutOfRange(f"{name} {str(value)[:20]} is beyond 64 bits")
    return number


def _decimal(value, name: str = "value") -> float | None:
    """`Decimal{value, exponent}` = value × 10^exponent; plain numbers pass."""
    number: float | None
    try:
        if isinstance(value, dict) and "value" in value:
            number = int(value["value"]) * 10.0 ** int(value.get("exponent", 0))
        else:
            number = None if value is None else float(value)
    except (TypeError, ValueError):
        return None
    except OverflowError:
        raise OutOfRange(f"{name} {str(value)[:40]} is beyond a double") from None
    if number is not None and not math.isfinite(number):
        raise OutOfRange(f"{name} {str(value)[:40]} is beyond a double")
    return number


class _Collector:
    def __init__(self, name: str):
        self.name = name
        self.participants: dict[tuple, dict] = {}
        self.counters: dict[tuple, dict] = {}
        self.chain: dict[tuple, dict] = {}
        self.problems: list[tuple[str, str, str]] = []
        self.accounting = Accounting()  # records: read = used + deduplicated + quarantined

    def walk(self, document) -> None:
        """Every record in the document, depth first in document order (an explicit stack: any depth)."""
        stack = [(document, None, "$")]
        while stack:
            node, epoch, path = stack.pop()
            before, records = len(self.problems), self._records_read()
            try:
                stack.extend(reversed(self._visit(node, epoch, path)))
            except OutOfRange as exc:
                self.problems.append(("json_file", f"{self.name}:{path}", str(exc)))
            except RecursionError:  # a record too deeply nested for its `extra` column
                self.problems.append(("json_file", f"{self.name}:{path}", "record nested too deeply"))
            self._count_problems(self.problems[before:], records)

    def _records_read(self) -> dict[str, int]:
        return {name: self.accounting.tally(f"json {name}").read for name in RECORD_TABLES}

    def _count_problems(self, problems: list[tuple[str, str, str]], records_before: dict[str, int]) -> None:
        """A problem of a record that was read (counted by `_record`, `_chain`) quarantines that record
        once; a counter entry's problem quarantines the entry; any other is an object read and set aside."""
        entered = [n for n, read in self._records_read().items() if read > records_before[n]]
        record_set_aside = False
        for table, _, _ in problems:
            if table == "api_counters":
                self.accounting.quarantined("json api_counters", 1)
            elif entered and table in (*RECORD_TABLES, "json_file"):
                if not record_set_aside:
                    self.accounting.quarantined(f"json {entered[0]}", 1)
                    record_set_aside = True
            else:
                self.accounting.read(f"json {table}", 1)
                self.accounting.quarantined(f"json {table}", 1)

    def close(self) -> None:
        """Count the records used (one per key: a later record of the same key replaced an earlier one)."""
        for table, rows in zip(RECORD_TABLES, (self.participants, self.chain), strict=True):
            self.accounting.used(f"json {table}", len(rows))
            tally = self.accounting.tally(f"json {table}")
            tally.deduplicated += tally.read - tally.used - tally.deduplicated - tally.quarantined

    def _visit(self, node, epoch: int | None, path: str) -> list[tuple]:
        """Take the node if it is a record; else the children to visit, with the epoch that applies to them."""
        if isinstance(node, list):
            return [(item, epoch, f"{path}[{k}]") for k, item in enumerate(node)]
        if not isinstance(node, dict):
            return []
        for name in ("epoch_index", "epoch_id", "epoch"):  # the nearest enclosing epoch applies below
            if (value := _uint(node.get(name), name)) is not None:
                if value < 0:  # no epoch is negative: what it encloses belongs to none
                    raise OutOfRange(f"{name} {value} is negative: the object and what it holds are not read")
                epoch = value
                break
        if isinstance(node.get("participant"), str) and any(
            k in node for k in ("counters", "assigned_nonces", "dispositions")
        ):
            self._record(node, epoch, path)
        elif isinstance(node.get("participant_id"), str) and "inference_count" in node:
            self._chain(node["participant_id"], epoch, "epoch_performance_summary", node, path)
        elif isinstance(node.get("participant"), str) and "missed" in node and "invalid" in node:
            self._chain(node["participant"], epoch, "devshard_host_epoch_stats", node, path)
        elif isinstance(node.get("current_epoch_stats"), dict):
            who = node.get("address") or node.get("index")
            if isinstance(who, str):
                self._chain(
                    who,
                    epoch,
                    "current_epoch_stats",
                    node["current_epoch_stats"]
                    | {k: node[k] for k in ("invalidLLR", "inactiveLLR", "confirmationPoCRatio") if k in node},
                    path,
                )
        else:
            return [(value, epoch, f"{path}.{key}") for key, value in node.items()]
        return []

    def _record(self, rec: dict, epoch: int | None, path: str) -> None:
        participant, model = rec["participant"], rec.get("model") or ""
        self.accounting.read("json api_participants", 1)
        if epoch is None:
            self.problems.append(("api_participants", f"{self.name}:{path}", "accounting record without epoch_index"))
            return
        if not isinstance(participant, str) or not isinstance(model, str):
            self.problems.append(("api_participants", f"{self.name}:{path}", "participant or model is not a string"))
            return
        version = _uint(rec.get("schema_version"), "schema_version")
        given = rec.get("dispositions")
        dispositions = given if isinstance(given, dict) else {}
        known = {
            "schema_version",
            "epoch_index",
            "participant",
            "model",
            "assigned_nonces",
            "dispositions",
            "protocol_misses",
            "protocol_invalid",
            "unresolved_challenges",
            "recorded_invalid_transitions",
            "counters",
        }
        self.participants[(epoch, participant, model)] = {
            "epoch_id": epoch,
            "participant": participant,
            "model": model,
            "schema_version": version,
            **{
                c: _uint(rec.get(c), c)
                for c in (
                    "assigned_nonces",
                    "protocol_misses",
                    "protocol_invalid",
                    "unresolved_challenges",
                    "recorded_invalid_transitions",
                )
            },
            "protocol_only": _uint(dispositions.get("protocol_only"), "protocol_only") or 0,
            "dispositions": json.dumps(dispositions),
            "extra": json.dumps({k: v for k, v in rec.items() if k not in known}, default=str),
        }
        self._counters(rec.get("counters") or [], epoch, participant, model, version)

    def _counters(self, counters: object, epoch: int, participant: str, model: str, version: int | None) -> None:
        """A record's counter entries, summed per counter into `self.counters`."""
        if not isinstance(counters, list):  # one problem row for the field; the record's other fields stand
            self.accounting.read("json api_counters", 1)  # quarantined with its problem (_count_problems)
            self.problems.append(("api_counters", f"{self.name}:{epoch}/{participant}", "counters is not a list"))
            counters = []
        for k, entry in enumerate(counters):
            where = f"{self.name}:{epoch}/{participant}/{k}"
            self.accounting.read("json api_counters", 1)
            if not isinstance(entry, dict):
                self.problems.append(("api_counters", where, "counter entry is not an object"))
                continue
            given = entry.get("key")
            key = (
                given
                if isinstance(given, dict)
                else {n: v for n, v in entry.items() if n not in ("escrow_id", "count", "key")}
            )
            try:
                parsed = parse_counter_key(key)
            except CounterKeyError as exc:
                self.problems.append(("api_counters", where, str(exc)))
                continue
            try:
                count = _uint(entry.get("count"), "count") or 0
            except OutOfRange as exc:
                self.problems.append(("api_counters", where, str(exc)))
                continue
            escrow = str(entry.get("escrow_id") or "")
            cid = counter_id(key)
            slot = self.counters.setdefault(
                (epoch, participant, model, escrow, cid),
                {
                    "epoch_id": epoch,
                    "participant": participant,
                    "model": model,
                    "escrow_id": escrow,
                    "counter_id": cid,
                    **parsed,
                    "count": 0,
                    "schema_version": version,
                },
            )
            if not INT64[0] <= slot["count"] + count <= INT64[1]:
                self.problems.append(("api_counters", where, "count: the sum is beyond 64 bits"))
                continue
            slot["count"] += count
            self.accounting.used("json api_counters", 1)  # summed into its counter's row

    def _chain(self, participant: str, epoch: int | None, kind: str, obj: dict, path: str) -> None:
        self.accounting.read("json chain_participant_stats", 1)
        epoch = _uint(obj.get("epoch_index"), "epoch_index") if obj.get("epoch_index") is not None else epoch
        if epoch is None:
            self.problems.append(
                (
                    "chain_participant_stats",
                    f"{self.name}:{path}",
                    f"{kind} without an epoch (save the response with its epoch)",
                )
            )
            return
        row = {
            "epoch_id": epoch,
            "participant": participant,
            "kind": kind,
            **{c: _uint(obj.get(c), c) for c in CHAIN_COUNTERS + HOST_STATS},
            "claimed": obj.get("claimed") if isinstance(obj.get("claimed"), bool) else None,
            "invalid_llr": _decimal(obj.get("invalidLLR"), "invalidLLR"),
            "inactive_llr": _decimal(obj.get("inactiveLLR"), "inactiveLLR"),
            "confirmation_poc_ratio": _decimal(obj.get("confirmationPoCRatio"), "confirmationPoCRatio"),
        }
        self.chain[(epoch, participant, kind)] = row


def ingest_json_files(con: duckdb.DuckDBPyConnection, files: list[Path]) -> JsonIngestSummary:
    """Ingest saved accounting-API / chain REST responses; one run per file."""
    started = time.monotonic()
    summary = JsonIngestSummary()
    for file in files:
        path = Path(file)
        if not path.exists():
            raise SourceError(f"{path}: no such file")
        try:
            data = read_regular_file(path, MAX_JSON_FILE_BYTES)
        except FileReadError as exc:
            raise SourceError(f"{path}: {exc}") from None
        source_id = f"json:{path.resolve()}"
        collector = _Collector(path.name)
        try:
            collector.walk(_document(data))
            if not (collector.participants or collector.chain or collector.problems):
                raise Unreadable("nothing recognisable: no accounting-API record and no chain stats in it")
        except Unreadable as exc:
            collector.problems.append(("json_file", str(path.resolve()), str(exc)))
            summary.unreadable.append(f"{path}: {exc}")
        collector.close()
        digest = content_digest([data])  # the run id derives from it: two different files never share one
        with (
            ingest_run(con, source_id=source_id, kind="json", display=str(path), input_digest=digest) as run,
            transaction(con),
        ):
            run.accounting.read("json files", 1, unit="files")
            whole = any(table == "json_file" and key == str(path.resolve()) for table, key, _ in collector.problems)
            (run.accounting.quarantined if whole else run.accounting.used)("json files", 1)
            run.accounting.merge(collector.accounting)
            extras = {"source_id": source_id, "run_id": run.run_id}
            for epoch, participant, model in collector.participants:  # a newer response replaces the record
                con.execute(
                    "DELETE FROM api_counters WHERE epoch_id = ? AND participant = ? AND model = ?",
                    [epoch, participant, model],
                )
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


def ingest_json_source(con: duckdb.DuckDBPyConnection, source: dict, cfg) -> JsonIngestSummary:
    """`run`'s ingest of a `json` entry (pipeline/ingest/kinds.py): a file, or every *.json of a directory (its
    summary is said by the run: pipeline/output/summaries.py)."""
    path = Path(source["path"])
    return ingest_json_files(con, sorted(path.glob("*.json")) if path.is_dir() else [path])
