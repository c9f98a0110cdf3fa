"""One copy of the focal host's session store: layout-neutral rows plus the truth about them.

Rows are dicts keyed by column name (the SQLite and PostgreSQL names agree); epoch-scoped rows
carry `epoch_id`, which the SQLite writer turns into the file name. The writers only translate.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from . import payload_faults, wire
from .ledger import LedgerBuilder, LedgerCopy
from .model import LIVE_OBS, EscrowMachine, Record, Status, tx_rows
from .release_lines import DEFAULT_LINE, EPOCH_TABLES, SAMPLE_LINES, SampleReleaseLine
from .scenario import EscrowPlan, address
from .snapshots import snapshot_blob

# The escrow of the newest epoch that this host joined by importing another host's state, and the
# nonce of the import (copies of release lines that import only).
IMPORTED_ESCROW_INDEX, IMPORTED_NONCE = 1, 30


@dataclass
class Truth:
    """Expected facts, computed by the simulation alone."""

    inferences: pl.DataFrame
    txs: pl.DataFrame
    escrows: pl.DataFrame
    planted: dict
    tracker: pl.DataFrame | None = None  # per epoch, participant, model: what the ledger must yield
    answers: pl.DataFrame | None = None  # per stored answer: the answer checks (planted faults)
    snapshot_host_stats: pl.DataFrame | None = None  # per escrow and slot: HostStats at the checkpoint
    snapshot_model_stats: pl.DataFrame | None = None  # per escrow, slot and model, where the line keeps them

    def __getitem__(self, name: str):
        return getattr(self, name)


@dataclass
class HostCopy:
    last_epoch: int
    lineage: uuid.UUID
    epochs: dict[int, bool]  # epoch id -> written by the old build (narrow SQLite file)
    tables: dict[str, list[dict]]  # EPOCH_TABLES plus escrow_epoch, escrow_cache
    payloads: list[dict]  # epoch_id, escrow_id, inference_id, prompt_payload, response_payload
    validation_leases: list[dict]  # PostgreSQL only: this host's own validation jobs
    truth: Truth
    focal_host: str
    ledger: LedgerCopy | None = None  # the gateway's accounting ledger; written only when asked
    release_line: SampleReleaseLine = SAMPLE_LINES[DEFAULT_LINE]
    # Escrows whose payload files the build wrote zstd-compressed ({inference}.json.zst); the first answer
    # of each also keeps a plain .json from before (upstream reads the .zst).
    compressed_payloads: frozenset[str] = frozenset()

    def with_ledger_schema(self, schema_version: int) -> HostCopy:
        """The same copy with its ledger written in another schema version (2, 4, 6 or 7)."""
        if self.ledger is None:
            raise ValueError("this copy has no ledger")
        ledger = dataclasses.replace(self.ledger, schema_version=schema_version)
        truth = dataclasses.replace(self.truth, tracker=ledger.truth())
        return dataclasses.replace(self, ledger=ledger, truth=truth)

    @classmethod
    def from_timeline(
        cls, timeline, last_epoch: int, malformed_payloads: bool = False, line: str = DEFAULT_LINE
    ) -> HostCopy:
        spec = timeline.spec
        kept = [e for e in spec.epochs if last_epoch - 2 <= e <= last_epoch]
        release_line = SAMPLE_LINES[line]
        builder = _CopyBuilder(timeline, last_epoch, release_line)
        for plan in timeline.escrows:
            if plan.epoch_id in kept:
                builder.add_escrow(plan)
        lineage = uuid.UUID(bytes=wire.fake_bytes("lineage", spec.seed, size=16), version=4)
        epochs = {e: next(p.legacy_build for p in timeline.escrows if p.epoch_id == e) for e in kept}
        planted = builder.planted | {
            "focal_host": timeline.focal_host,
            "lineage": str(lineage),
            "narrow_epochs": [e for e, legacy in epochs.items() if legacy],
            "created_at_unit": {p.epoch_id: p.created_at_unit for p in timeline.escrows if p.epoch_id in kept},
        }
        plans = {
            (p.escrow_id, i): inference
            for p in timeline.escrows
            if p.epoch_id in kept
            for i, inference in p.inferences.items()
        }
        answers = payload_faults.plant(builder.payloads, plans, malformed=malformed_payloads)
        ledger = builder.ledger.build(timeline.focal_host)
        planted["ledger"] = ledger.planted
        lines = {p.escrow_id: p.host_stats_line for p in timeline.escrows}
        truth = Truth(
            inferences=pl.DataFrame(builder.truth_inferences, schema=_INFERENCE_SCHEMA, orient="row"),
            txs=pl.DataFrame(builder.truth_txs, schema=_TX_SCHEMA, orient="row"),
            escrows=pl.DataFrame(builder.truth_escrows, schema=_ESCROW_SCHEMA, orient="row"),
            planted=planted,
            tracker=ledger.truth(),
            answers=answers,
            snapshot_host_stats=pl.DataFrame(
                [
                    (
                        e,
                        x,
                        slot,
                        nonce,
                        hs.missed,
                        hs.invalid,
                        hs.cost,
                        *((hs.validated, hs.finished) if lines.get(x) == "counters" else (None, None)),
                    )
                    for e, x, nonce, machine in builder.truth_snapshots
                    for slot, hs in sorted(machine.host_stats.items())
                ],
                schema={
                    "epoch_id": pl.Int64,
                    "escrow_id": pl.String,
                    "slot_id": pl.Int64,
                    "snapshot_nonce": pl.Int64,
                    "missed": pl.Int64,
                    "invalid": pl.Int64,
                    "cost": pl.Int64,
                    "validated": pl.Int64,
                    "finished": pl.Int64,
                },
                orient="row",
            ),
            snapshot_model_stats=pl.DataFrame(
                [
                    (e, x, slot, model, *values)
                    for e, x, nonce, machine in builder.truth_snapshots
                    if lines.get(x) == "model_stats"
                    for slot, hs in sorted(machine.host_stats.items())
                    for model, values in sorted(hs.models.items())
                ],
                schema={
                    "epoch_id": pl.Int64,
                    "escrow_id": pl.String,
                    "slot_id": pl.Int64,
                    "model": pl.String,
                    "prompt_tokens": pl.Int64,
                    "completion_tokens": pl.Int64,
                    "inference_count": pl.Int64,
                    "cost": pl.Int64,
                },
                orient="row",
            ),
        )
        planted["release_line"] = release_line.name
        kept_plans = [p for p in timeline.escrows if p.epoch_id in kept]
        compressed = frozenset(p.escrow_id for p in kept_plans if p.compress_payloads)
        planted["json_zst_escrows"] = sorted(compressed)
        planted["json_checkpoint_escrows"] = sorted(p.escrow_id for p in kept_plans if p.checkpoint_format == "json")
        planted["host_stats_lines"] = {p.escrow_id: p.host_stats_line for p in kept_plans if p.host_stats_line}
        return cls(
            last_epoch,
            lineage,
            epochs,
            builder.tables,
            builder.payloads,
            builder.leases,
            truth,
            timeline.focal_host,
            ledger,
            release_line,
            compressed,
        )

    def write_sqlite(self, store_dir: str | Path, ledger: bool = False, payloads: bool = True) -> Path:
        """The SQLite store directory; with `ledger`, also the gateway's `accounting.db` beside it;
        without `payloads`, no stored request and response bodies."""
        from .sqlite_writer import write_store

        path = write_store(self, Path(store_dir), payloads)
        if ledger:
            from .ledger_writer import write_accounting_db

            assert self.ledger is not None, "a copy written with its ledger was built with one"
            write_accounting_db(self.ledger, path / "accounting.db")
        return path

    def write_postgres(self, conninfo: str, ledger: bool = False) -> None:
        """The PostgreSQL database; with `ledger`, also the `accounting_*` tables (two writers)."""
        from .postgres_writer import write_database

        write_database(self, conninfo)
        if ledger:
            from .ledger_writer import write_accounting_postgres

            assert self.ledger is not None, "a copy written with its ledger was built with one"
            write_accounting_postgres(
                self.ledger, conninfo, self.release_line.ledger_tables_absent, self.release_line.ledger_invalid_slot
            )


_INFERENCE_SCHEMA = {
    "epoch_id": pl.Int64,
    "escrow_id": pl.String,
    "inference_id": pl.Int64,
    "executor_slot": pl.Int64,
    "executor": pl.String,
    "status": pl.String,
    "has_finish_tx": pl.Boolean,
    "drained": pl.Boolean,
    "pre_drain_status": pl.String,
    "drain_outcome": pl.String,
    "miss_kind": pl.String,
    "sealed": pl.Boolean,
    "sealed_nonce": pl.Int64,
    "bare": pl.Boolean,
    "challenged": pl.Boolean,
    "votes_valid": pl.Int64,
    "votes_invalid": pl.Int64,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "started_at": pl.Int64,
    "confirmed_at": pl.Int64,
    "temperature": pl.Float64,
    "top_p": pl.Float64,
    "model": pl.String,
}
_TX_SCHEMA = {
    "epoch_id": pl.Int64,
    "escrow_id": pl.String,
    "nonce": pl.Int64,
    "tx_index": pl.Int64,
    "kind": pl.String,
    "inference_id": pl.Int64,
    "slot": pl.Int64,
    "address": pl.String,
    "valid": pl.Boolean,
    "event_at": pl.Int64,
}
_ESCROW_SCHEMA = {
    "epoch_id": pl.Int64,
    "escrow_id": pl.String,
    "group_size": pl.Int64,
    "vote_threshold": pl.Int64,
    "status": pl.String,
    "n_addresses": pl.Int64,
    "latest_nonce": pl.Int64,
    "creator_addr": pl.String,
    "settled_at": pl.Int64,
}


def copied_nonces(plan: EscrowPlan, spec, last_epoch: int) -> int:
    """How many of the escrow's diffs a copy taken in `last_epoch` holds: the newest epoch's escrows are cut."""
    if plan.epoch_id >= last_epoch:
        return max(1, round(len(plan.diffs) * spec.copy_cut_fraction))
    return len(plan.diffs)


def _sealed_row(epoch_id: int, escrow_id: str, record: Record, sealed_nonce: int, bare: bool) -> dict:
    row = {
        "epoch_id": epoch_id,
        "escrow_id": escrow_id,
        "inference_id": record.inference_id,
        "sealed_nonce": sealed_nonce,
        "obs_present": not bare,
    }
    if bare:  # only the id and the seal nonce; everything else is the column default
        return row | {
            "sealed_status": 0,
            "sealed_executor_slot": 0,
            "sealed_votes_valid": 0,
            "sealed_votes_invalid": 0,
            "sealed_validated_by": None,
            "sealed_model": "",
            "sealed_prompt_hash": None,
            "sealed_response_hash": None,
            "sealed_input_length": 0,
            "sealed_max_tokens": 0,
            "sealed_input_tokens": 0,
            "sealed_output_tokens": 0,
            "sealed_reserved_cost": 0,
            "sealed_actual_cost": 0,
            "sealed_started_at": 0,
            "sealed_confirmed_at": 0,
        }
    return row | {
        "sealed_status": int(record.status),
        "sealed_executor_slot": record.executor_slot,
        "sealed_votes_valid": record.votes_valid,
        "sealed_votes_invalid": record.votes_invalid,
        "sealed_validated_by": record.validated_by_bytes(),
        "sealed_model": record.model,
        "sealed_prompt_hash": record.prompt_hash,
        "sealed_response_hash": record.response_hash,
        "sealed_input_length": record.input_length,
        "sealed_max_tokens": record.max_tokens,
        "sealed_input_tokens": record.input_tokens,
        "sealed_output_tokens": record.output_tokens,
        "sealed_reserved_cost": record.reserved_cost,
        "sealed_actual_cost": record.actual_cost,
        "sealed_started_at": record.started_at,
        "sealed_confirmed_at": record.confirmed_at,
    }


class _CopyBuilder:
    def __init__(self, timeline, last_epoch: int, line: SampleReleaseLine):
        self.timeline, self.last_epoch, self.line = timeline, last_epoch, line
        self.focal = timeline.focal_host
        self.tables: dict[str, list[dict]] = {name: [] for name in EPOCH_TABLES + ("escrow_epoch", "escrow_cache")}
        self.payloads: list[dict] = []
        self.leases: list[dict] = []
        self._leased: set[tuple] = set()
        self.truth_inferences: list[tuple] = []
        self.truth_txs: list[tuple] = []
        self.truth_escrows: list[tuple] = []
        self.truth_snapshots: list[tuple] = []  # (epoch, escrow, snapshot nonce, machine at that nonce)
        self.ledger = LedgerBuilder(timeline.spec.seed)
        self.planted: dict[str, list] = {
            key: []
            for key in (
                "unknown_txs",
                "bare_rows",
                "votes_after_resolution",
                "duplicate_validations",
                "heartbeats",
                "drained",
                "challenged_at_settlement",
                "never_finalized",
                "imported",
                "reason3_error_misses",
            )
        }

    def add_escrow(self, plan: EscrowPlan) -> None:
        spec = self.timeline.spec
        epoch, escrow = plan.epoch_id, plan.escrow_id
        upto = copied_nonces(plan, spec, self.last_epoch)
        machine = self._machine(plan).replay(plan.diffs[:upto])
        settled = machine.settled_nonce is not None
        settled_at = plan.nonce_times[machine.settled_nonce - 1] if machine.settled_nonce is not None else None
        last_finalized = upto if settled else upto - 1
        imported = (
            self.line.imports
            and plan.epoch_id == self.last_epoch
            and plan.escrow_id.endswith(str(IMPORTED_ESCROW_INDEX))
            and upto > IMPORTED_NONCE
        )
        imported_nonce = IMPORTED_NONCE if imported else None
        if imported:
            self.planted["imported"].append({"epoch_id": epoch, "escrow_id": escrow, "imported_nonce": IMPORTED_NONCE})
        self._session_rows(plan, upto, settled, settled_at, last_finalized, imported_nonce)
        self._record_rows(plan, machine, imported_nonce or 0)
        self._diff_rows(plan, upto, imported_nonce or 0)
        self.truth_escrows.append(
            (
                epoch,
                escrow,
                plan.group.size,
                plan.threshold,
                "settled" if settled else "active",
                len(plan.group.addresses()),
                upto,
                plan.creator,
                settled_at,
            )
        )
        self.ledger.add(plan, machine, upto, settled)
        for nonce, tx_index, inference_id, member in machine.no_ops:
            where = {
                "epoch_id": epoch,
                "escrow_id": escrow,
                "nonce": nonce,
                "tx_index": tx_index,
                "inference_id": inference_id,
            }
            key = {
                "validation_vote": "votes_after_resolution",
                "validation": "duplicate_validations",
                "heartbeat": "heartbeats",
            }.get(member)
            if key:
                self.planted[key].append(where)
        for nonce, tx_index in plan.unknown_tx:
            if nonce <= upto:
                self.planted["unknown_txs"].append(
                    {"epoch_id": epoch, "escrow_id": escrow, "nonce": nonce, "tx_index": tx_index, "field_number": 15}
                )
        if not plan.finalizes:
            self.planted["never_finalized"].append({"epoch_id": epoch, "escrow_id": escrow})

    def _machine(self, plan: EscrowPlan) -> EscrowMachine:
        return EscrowMachine(
            plan.group,
            plan.threshold,
            plan.config["TokenPrice"],
            plan.config["InferenceSealGraceNonces"],
            plan.config["AutoSealEveryNNonces"],
            drain_rule=plan.drain_rule,
            validation_rule=plan.validation_rule,
        )

    def _session_rows(
        self, plan: EscrowPlan, upto: int, settled: bool, settled_at, last_finalized, imported_nonce: int | None
    ) -> None:
        epoch, escrow = plan.epoch_id, plan.escrow_id
        self.tables["escrow_epoch"].append({"escrow_id": escrow, "epoch_id": epoch})
        self.tables["escrow_cache"].append(
            {
                "escrow_id": escrow,
                "epoch_id": epoch,
                "escrow_json": plan.escrow_json(),
                "cached_at": plan.opened_at - 60,
            }
        )
        self.tables["sessions"].append(
            {
                "epoch_id": epoch,
                "escrow_id": escrow,
                "version": plan.version,
                "creator_addr": plan.creator,
                "config_json": json.dumps(plan.config),
                "group_json": plan.group_json(),
                "initial_balance": plan.initial_balance,
                "latest_nonce": upto,
                "last_finalized": last_finalized,
                "status": "settled" if settled else "active",
                "settled_at": settled_at,
                "imported_nonce": imported_nonce,
            }
        )
        if last_finalized > 0:
            for slot in range(plan.group.size):
                self.tables["signatures"].append(
                    {
                        "epoch_id": epoch,
                        "escrow_id": escrow,
                        "nonce": last_finalized,
                        "slot_id": slot,
                        "sig": wire.signature(escrow, last_finalized, slot),
                    }
                )
        every = plan.config["AutoSealEveryNNonces"]
        # The latest checkpoint: at settlement, else at the last auto-seal point (never before an import).
        snapshot_nonce = upto if settled else max(1, imported_nonce or 0, upto - upto % every)
        at_snapshot = self._machine(plan).replay(plan.diffs[:snapshot_nonce])
        self.tables["snapshots"].append(
            {
                "epoch_id": epoch,
                "escrow_id": escrow,
                "nonce": snapshot_nonce,
                "state_data": snapshot_blob(plan, at_snapshot, self.line.snapshot_root_prefix),
                "created_at": plan.created_at(snapshot_nonce),
            }
        )
        self.truth_snapshots.append((epoch, escrow, snapshot_nonce, at_snapshot))

    def _diff_rows(self, plan: EscrowPlan, upto: int, imported_nonce: int) -> None:
        epoch, escrow, group = plan.epoch_id, plan.escrow_id, plan.group
        clock = 0  # the nonce clock: started_at of the latest start at or before the nonce
        for nonce in range(1, upto + 1):
            txs_proto = plan.diffs[nonce - 1]
            created_at = plan.created_at(nonce)
            if nonce in plan.inferences:
                clock = plan.inferences[nonce].started_at
            if nonce <= imported_nonce:  # a host that joined by import has no diffs before it
                continue
            event_at = {"zero": clock, "s": created_at, "ms": created_at // 1000}[plan.created_at_unit]
            warm = json.dumps({"0": address("warm", escrow, group.slots[0])}) if nonce == 1 else None
            self.tables["diffs"].append(
                {
                    "epoch_id": epoch,
                    "escrow_id": escrow,
                    "nonce": nonce,
                    "txs_proto": txs_proto,
                    "user_sig": wire.signature(escrow, nonce, "user"),
                    "post_state_root": wire.fake_bytes("root", escrow, nonce),
                    "state_hash": wire.fake_bytes("state", escrow, nonce),
                    "warm_keys_json": warm,
                    "created_at": created_at,
                }
            )
            for row in tx_rows(txs_proto, group):
                slot = row["slot"]
                self.truth_txs.append(
                    (
                        epoch,
                        escrow,
                        nonce,
                        row["tx_index"],
                        row["kind"],
                        row["inference_id"],
                        slot,
                        None if slot is None else group.slots[slot],
                        row["valid"],
                        event_at,
                    )
                )
                lease_key = (epoch, escrow, row["inference_id"])
                if (
                    row["kind"] == "validation"
                    and group.slots[slot] == self.focal
                    and not plan.legacy_build
                    and lease_key not in self._leased
                ):
                    self._leased.add(lease_key)
                    self.leases.append(
                        {
                            "epoch_id": epoch,
                            "escrow_id": escrow,
                            "inference_id": row["inference_id"],
                            "instance_address": self.focal,
                            "status": "submitted",
                            "claimed_at": datetime.fromtimestamp(event_at - 20, UTC),
                        }
                    )

    def _record_rows(self, plan: EscrowPlan, machine: EscrowMachine, imported_nonce: int) -> None:
        epoch, escrow = plan.epoch_id, plan.escrow_id
        for record in machine.records.values():
            if record.sealed_nonce and record.sealed_nonce <= imported_nonce:
                continue  # sealed before the import: this host never held it
            sealed = record.sealed_nonce > 0
            bare = sealed and (plan.legacy_build or record.inference_id in plan.bare_sealed_ids)
            if sealed:
                self.tables["sealed_inferences"].append(_sealed_row(epoch, escrow, record, record.sealed_nonce, bare))
            elif record.status in LIVE_OBS and not plan.legacy_build:
                self.tables["sealed_inferences"].append(_sealed_row(epoch, escrow, record, 0, False))
            if not plan.legacy_build:  # the old build kept no validation observability
                table = "sealed_validation_obs" if sealed else "inference_validation_obs"
                for slot in record.obs_slots:
                    self.tables[table].append(
                        {
                            "epoch_id": epoch,
                            "escrow_id": escrow,
                            "inference_id": record.inference_id,
                            "slot_id": slot,
                            "required_validations": 1,
                            "completed_validations": 1,
                        }
                    )
            executor = machine.executor(record)
            inference = plan.inferences[record.inference_id]
            if record.has_finish_tx and executor == self.focal and record.inference_id > imported_nonce:
                self.payloads.append(
                    {
                        "epoch_id": epoch,
                        "escrow_id": escrow,
                        "inference_id": record.inference_id,
                        "prompt_payload": inference.prompt,
                        "response_payload": inference.response,
                    }
                )
            where = {"epoch_id": epoch, "escrow_id": escrow, "inference_id": record.inference_id}
            if bare and not plan.legacy_build:
                self.planted["bare_rows"].append(where)
            if record.drained:
                self.planted["drained"].append(where)
            if record.status is Status.CHALLENGED and sealed:
                self.planted["challenged_at_settlement"].append(where)
            if record.miss == "error_miss" and plan.error_miss_as_timeout:
                self.planted["reason3_error_misses"].append(where)
            outcome = None
            if record.drained:
                outcome = (
                    "unchanged"
                    if record.status is record.pre_drain_status
                    else "refunded"
                    if record.status is Status.TIMED_OUT
                    else "paid"
                )
            self.truth_inferences.append(
                (
                    epoch,
                    escrow,
                    record.inference_id,
                    record.executor_slot,
                    executor,
                    record.status.label,
                    record.has_finish_tx,
                    record.drained,
                    record.pre_drain_status.label if record.drained and record.pre_drain_status is not None else None,
                    outcome,
                    record.miss,
                    sealed,
                    record.sealed_nonce,
                    bare,
                    record.challenged,
                    record.votes_valid,
                    record.votes_invalid,
                    record.input_tokens,
                    record.output_tokens,
                    record.started_at,
                    record.confirmed_at,
                    inference.temperature,
                    inference.top_p,
                    record.model,
                )
            )
