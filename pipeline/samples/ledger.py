"""The gateway's accounting ledger of a copy (docs/sources.md, accounting ledger), with the per-participant truth.

Every nonce of every escrow in the copy is classified once, from the replayed state machine
(so the ledger agrees with session storage except where a disagreement is planted), and then
written in the layouts upstream uses:
- PostgreSQL rows: counters split over TWO writers (`gw-a`, `gw-b`) that must be summed,
  a frozen `_legacy_blob` slot-count baseline for one escrow (its invalid rows carry slot −1),
  the challenge / invalid / protocol-nonce sets, host stats;
- SQLite `accounting.db`: one JSON blob per escrow (counters already merged, legacy
  per-slot baselines in `invalid_by_slot` / `challenge_by_slot`);
- saved responses of the accounting API and chain REST for `ingest-json`.

The truth (`truth`, one row per epoch, participant, model) is computed from the per-nonce facts
directly, never from the rows written.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

WRITERS = ("gw-a", "gw-b")
LEGACY_WRITER = "_legacy_blob"
FLAGS = ("slow_receipt", "slow_chunk", "clock_drifted", "slow_decode", "logprobs_decoded")
# Probability of each flag on a delivered answer, outside / inside the PoC phase.
FLAG_RATES = {
    "slow_receipt": (0.05, 0.05),
    "slow_chunk": (0.06, 0.3),
    "clock_drifted": (0.03, 0.03),
    "slow_decode": (0.12, 0.6),
    "logprobs_decoded": (0.02, 0.02),
}
POC_NONCES = range(40, 52)  # the PoC window of every escrow (nonces dispatched during PoC)
WARMUP_STARTS = 2  # the first answers of each escrow are gateway warm-up probes
FINISHED = ("finished_used", "finished_unused", "finished_usage_unknown")
PHASE_RANK = {"active": 0, "finalizing": 1, "finalized": 2, "settled": 3}

TRUTH_SCHEMA = {
    "epoch_id": pl.Int64,
    "participant": pl.String,
    "model": pl.String,
    "assigned_nonces": pl.Int64,
    "protocol_only": pl.Int64,
    "finished_used": pl.Int64,
    "finished_unused": pl.Int64,
    "finished_usage_unknown": pl.Int64,
    "unfinished_refused": pl.Int64,
    "unfinished_execution": pl.Int64,
    "delivered": pl.Int64,
    "warmup_probes": pl.Int64,
    "delivered_outside_poc": pl.Int64,
    "slow_decode": pl.Int64,
    "slow_chunk": pl.Int64,
    "slow_receipt": pl.Int64,
    "clock_drifted": pl.Int64,
    "logprobs_decoded": pl.Int64,
    "slow_decode_in_poc": pl.Int64,
    "protocol_misses": pl.Int64,
    "protocol_invalid": pl.Int64,
    "unresolved_challenges": pl.Int64,
    "recorded_invalid_transitions": pl.Int64,
}


@dataclass
class NonceFact:
    escrow_id: str
    nonce: int
    slot: int
    kind: str  # "protocol" or a disposition, or "in_flight" (started, not yet classified)
    phase: str = "normal"
    warmup: bool = False
    flags: tuple[str, ...] = ()
    timeout_kind: str | None = None
    failure_origin: str | None = None
    writer: str = WRITERS[0]


@dataclass
class EscrowLedger:
    escrow_id: str
    epoch_id: int
    model: str
    slots: tuple[str, ...]
    latest_nonce: int
    phase: str
    facts: list[NonceFact] = field(default_factory=list)
    host_stats: dict[int, dict] = field(default_factory=dict)  # slot -> Missed, Invalid, Cost, ...
    challenges: list[tuple[int, int, bool]] = field(default_factory=list)  # nonce, slot, resolved
    invalid: list[tuple[int, int]] = field(default_factory=list)  # nonce, slot
    legacy: bool = False  # challenges and invalid rows frozen into the _legacy_blob baseline


def counter_key(fact: NonceFact, schema_version: int) -> dict:
    """The CounterKey JSON of one nonce in a given schema version: omitempty fields."""
    key: dict = {"slot_id": fact.slot, "disposition": fact.kind}
    if schema_version >= 7:
        key["phase"] = fact.phase
        if fact.warmup:
            key["terminal"] = "warmup_probe"
        if fact.timeout_kind:
            key["timeout_kind"] = fact.timeout_kind
            key["timeout_action"] = "applied"
    else:
        key["dispatch_phase"] = fact.phase
        if fact.timeout_kind:
            key["timeout_kind"] = fact.timeout_kind
            key["timeout_outcome"] = "applied"
        if fact.failure_origin:
            key["failure_origin"] = fact.failure_origin
        if fact.warmup:
            key["delivery_reason" if schema_version >= 6 else "detail_reason"] = "warmup_probe"
    if schema_version >= 6:
        for flag in fact.flags:
            key[flag] = True
    return key


def _key_bytes(key: dict) -> bytes:
    return json.dumps(key, separators=(",", ":")).encode()


class LedgerBuilder:
    def __init__(self, seed: int):
        self.seed = seed
        self.escrows: list[EscrowLedger] = []

    def add(self, plan, machine, upto: int, settled: bool) -> None:
        from .model import Status

        rng = random.Random(f"{self.seed}:{plan.escrow_id}:ledger")
        group = plan.group
        ledger = EscrowLedger(
            plan.escrow_id,
            plan.epoch_id,
            next(iter(machine.records.values())).model,
            group.slots,
            upto,
            "settled" if settled else "active",
        )
        starts = 0
        for nonce in range(1, upto + 1):
            slot = nonce % group.size
            writer = WRITERS[0] if rng.random() < 0.6 else WRITERS[1]
            phase = "poc" if nonce in POC_NONCES else "normal"
            record = machine.records.get(nonce)
            if record is None:
                ledger.facts.append(NonceFact(plan.escrow_id, nonce, slot, "protocol", phase, writer=writer))
                continue
            starts += 1
            fact = NonceFact(plan.escrow_id, nonce, slot, "in_flight", phase, writer=writer)
            if record.status is Status.TIMED_OUT and record.has_finish_tx:  # error miss: error body delivered
                fact.kind, fact.failure_origin = "finished_usage_unknown", "host_response"
            elif record.status is Status.TIMED_OUT:
                fact.kind = "unfinished_execution" if record.confirmed_at else "unfinished_refused"
                fact.timeout_kind = "execution" if record.confirmed_at else "refused"
            elif record.has_finish_tx:
                fact.kind = "finished_unused" if rng.random() < 0.1 else "finished_used"
                fact.warmup = starts <= WARMUP_STARTS
                inside = phase == "poc"
                fact.flags = tuple(f for f in FLAGS if rng.random() < FLAG_RATES[f][inside])
            ledger.facts.append(fact)
        for record in machine.records.values():
            if record.challenged:
                resolved = record.status in (Status.VALIDATED, Status.INVALIDATED)
                ledger.challenges.append((record.inference_id, record.executor_slot, resolved))
            if record.status is Status.INVALIDATED:
                ledger.invalid.append((record.inference_id, record.executor_slot))
        for slot in range(group.size):  # the mirror of the session's HostStats
            stats = machine.stats(slot)
            ledger.host_stats[slot] = {
                "Missed": stats.missed,
                "Invalid": stats.invalid,
                "Cost": stats.cost,
                "RequiredValidations": 0,
                "CompletedValidations": 0,
            }
            if plan.host_stats_line == "counters":  # PR #1757's gateway mirrors its counters too
                ledger.host_stats[slot] |= {"Validated": stats.validated, "Finished": stats.finished}
        self.escrows.append(ledger)

    def build(self, focal: str, schema_version: int = 6) -> LedgerCopy:
        escrows = sorted(self.escrows, key=lambda e: (e.epoch_id, e.escrow_id))
        planted: dict = {"schema_version": schema_version}
        if escrows:
            escrows[0].legacy = True  # converted from the legacy blob: its sets are a frozen baseline
            planted["legacy_escrow"] = escrows[0].escrow_id
            # The chain recorded one miss more than session storage shows, for the focal host's
            # first slot in the newest epoch: a ledger/session disagreement the cross-check must list.
            newest = [e for e in escrows if e.epoch_id == escrows[-1].epoch_id and focal in e.slots]
            if newest:
                target = newest[0]
                slot = target.slots.index(focal)
                target.host_stats[slot]["Missed"] += 1
                planted["miss_disagreement"] = {
                    "epoch_id": target.epoch_id,
                    "escrow_id": target.escrow_id,
                    "participant": focal,
                    "slot_id": slot,
                }
        return LedgerCopy(schema_version, escrows, planted)


@dataclass
class LedgerCopy:
    schema_version: int
    escrows: list[EscrowLedger]
    planted: dict

    # -- PostgreSQL row layout ------------------------------------------------------------
    def postgres_rows(self) -> dict[str, list[dict]]:
        rows: dict[str, list[dict]] = defaultdict(list)
        rows["accounting_meta"].append({"key": "schema_version", "value": str(self.schema_version)})
        rows["accounting_migration"].append({"name": "blob_to_rows", "completed_at": "2026-10-01T00:00:00Z"})
        for i, writer in enumerate(WRITERS):
            rows["accounting_writers"].append(
                {"writer_id": writer, "updated_at": f"2026-10-2{i}T10:00:00.123456789Z", "writer_errors": i}
            )
        rows["accounting_writers"].append(
            {"writer_id": LEGACY_WRITER, "updated_at": "2026-10-01T00:00:00Z", "writer_errors": 0}
        )
        for e in self.escrows:
            rows["accounting_escrow_state"].append(
                {
                    "escrow_id": e.escrow_id,
                    "creation_epoch": e.epoch_id,
                    "model": e.model,
                    "meta_json": _dumps(self._meta(e)),
                    "phase": e.phase,
                    "phase_rank": PHASE_RANK[e.phase],
                    "latest_nonce": e.latest_nonce,
                }
            )
            counts: Counter = Counter()
            for fact in e.facts:
                if fact.kind in ("protocol", "in_flight"):
                    continue
                counts[(fact.writer, _key_bytes(counter_key(fact, self.schema_version)))] += 1
            for (writer, key), n in sorted(counts.items()):
                rows["accounting_escrow_counters"].append(
                    {
                        "escrow_id": e.escrow_id,
                        "writer_id": writer,
                        "counter_id": hashlib.sha256(key).hexdigest(),
                        "counter_key": key,
                        "count": n,
                    }
                )
            for slot, hs in sorted(e.host_stats.items()):
                rows["accounting_escrow_host_stats"].append(
                    {
                        "escrow_id": e.escrow_id,
                        "slot_id": slot,
                        "missed": hs["Missed"],
                        "invalid": hs["Invalid"],
                        "cost": hs["Cost"],
                        "required_validations": hs["RequiredValidations"],
                        "completed_validations": hs["CompletedValidations"],
                        # PR #1757's columns, NULL for escrows its build did not write
                        "protocol_validated": hs.get("Validated"),
                        "protocol_finished": hs.get("Finished"),
                    }
                )
            for fact in e.facts:
                if fact.kind == "protocol":
                    rows["accounting_escrow_protocol_nonces"].append(
                        {"escrow_id": e.escrow_id, "nonce": fact.nonce, "slot_id": fact.slot}
                    )
            self._challenge_rows(e, rows)
        return rows

    @staticmethod
    def _challenge_rows(e: EscrowLedger, rows: dict[str, list[dict]]) -> None:
        """An escrow's challenges and invalid nonces: a legacy writer's as per-slot counts (only resolved
        challenges as rows, invalid nonces without a slot), a newer one's as rows."""
        if e.legacy:
            baseline: dict[int, list[int]] = defaultdict(lambda: [0, 0])
            for nonce, slot, resolved in e.challenges:
                if not resolved:
                    baseline[slot][0] += 1
                else:
                    rows["accounting_escrow_challenges"].append(
                        {"escrow_id": e.escrow_id, "nonce": nonce, "slot_id": slot, "resolved": True}
                    )
            for nonce, slot in e.invalid:
                baseline[slot][1] += 1
                rows["accounting_escrow_invalid_nonces"].append(
                    {"escrow_id": e.escrow_id, "nonce": nonce, "slot_id": -1}
                )
            for slot, (open_, invalid) in sorted(baseline.items()):
                rows["accounting_escrow_slot_counts"].append(
                    {
                        "escrow_id": e.escrow_id,
                        "writer_id": LEGACY_WRITER,
                        "slot_id": slot,
                        "open_challenges": open_,
                        "invalid_nonces": invalid,
                    }
                )
        else:
            for nonce, slot, resolved in e.challenges:
                rows["accounting_escrow_challenges"].append(
                    {"escrow_id": e.escrow_id, "nonce": nonce, "slot_id": slot, "resolved": resolved}
                )
            for nonce, slot in e.invalid:
                rows["accounting_escrow_invalid_nonces"].append(
                    {"escrow_id": e.escrow_id, "nonce": nonce, "slot_id": slot}
                )

    # -- SQLite accounting.db ----------------------------------------------------------------
    def sqlite_blobs(self) -> list[dict]:
        out = []
        for e in self.escrows:
            counts: Counter = Counter()
            for fact in e.facts:
                if fact.kind not in ("protocol", "in_flight"):
                    counts[_key_bytes(counter_key(fact, self.schema_version))] += 1
            blob: dict = {
                "meta": self._meta(e),
                "latest": e.latest_nonce,
                "host_stats": {str(s): hs for s, hs in sorted(e.host_stats.items())},
                "counters": [{"key": json.loads(k), "count": n} for k, n in sorted(counts.items())],
                "protocol_only": [{"nonce": f.nonce, "slot": f.slot} for f in e.facts if f.kind == "protocol"],
            }
            if e.legacy:
                challenge_by_slot: Counter = Counter(s for _, s, r in e.challenges if not r)
                invalid_by_slot: Counter = Counter(s for _, s in e.invalid)
                blob["challenges"] = [{"nonce": n, "slot": s, "resolved": True} for n, s, r in e.challenges if r]
                blob["challenge_by_slot"] = {str(s): n for s, n in sorted(challenge_by_slot.items())}
                blob["invalid_by_slot"] = {str(s): n for s, n in sorted(invalid_by_slot.items())}
                blob["invalid_nonces"] = [n for n, _ in e.invalid]
            else:
                blob["challenges"] = [{"nonce": n, "slot": s, "resolved": r} for n, s, r in e.challenges]
                blob["invalid"] = [{"nonce": n, "slot": s} for n, s in e.invalid]
            out.append(
                {"escrow_id": e.escrow_id, "creation_epoch": e.epoch_id, "model": e.model, "payload": _dumps(blob)}
            )
        return out

    @staticmethod
    def _meta(e: EscrowLedger) -> dict:
        return {
            "escrow_id": e.escrow_id,
            "creation_epoch": e.epoch_id,
            "model": e.model,
            "slots": [{"SlotID": s, "ValidatorAddress": a} for s, a in enumerate(e.slots)],
            "phase": e.phase,
            "refusal_timeout_seconds": 60,
            "execution_timeout_seconds": 600,
            "timeout_buffer_seconds": 5,
        }

    # -- truth ---------------------------------------------------------------------------------
    def truth(self) -> pl.DataFrame:
        acc: dict[tuple, Counter] = defaultdict(Counter)
        for e in self.escrows:
            n = len(e.slots)
            for slot, participant in enumerate(e.slots):
                c = acc[(e.epoch_id, participant, e.model)]
                c["assigned_nonces"] += sum(1 for nonce in range(1, e.latest_nonce + 1) if nonce % n == slot)
                c["protocol_misses"] += e.host_stats[slot]["Missed"]
                c["protocol_invalid"] += e.host_stats[slot]["Invalid"]
                c["unresolved_challenges"] += sum(1 for _, s, r in e.challenges if s == slot and not r)
                c["recorded_invalid_transitions"] += sum(1 for _, s in e.invalid if s == slot)
            for fact in e.facts:
                c = acc[(e.epoch_id, e.slots[fact.slot], e.model)]
                if fact.kind == "protocol":
                    c["protocol_only"] += 1
                    continue
                if fact.kind == "in_flight":
                    continue
                c[fact.kind] += 1
                if fact.kind in FINISHED:
                    c["delivered"] += 1
                if fact.warmup:
                    c["warmup_probes"] += 1
                    continue
                if fact.kind in FINISHED and fact.phase != "poc":
                    c["delivered_outside_poc"] += 1
                if self.schema_version < 6:
                    continue
                for flag in fact.flags:
                    if flag in ("clock_drifted", "logprobs_decoded") or fact.phase != "poc":
                        c[flag] += 1
                    elif flag == "slow_decode":
                        c["slow_decode_in_poc"] += 1
        rows = [
            {"epoch_id": k[0], "participant": k[1], "model": k[2]}
            | {c: v[c] for c in TRUTH_SCHEMA if c not in ("epoch_id", "participant", "model")}
            for k, v in sorted(acc.items())
        ]
        return pl.DataFrame(rows, schema=TRUTH_SCHEMA)

    # -- saved API / chain responses -----------------------------------------------------------
    def api_response(self, epoch_id: int, schema_version: int) -> dict:
        """`GET /api/v1/epochs/{epoch}/participants` as the gateway answers it (v6 nested, v7 flat)."""
        truth = self.truth().filter(pl.col("epoch_id") == epoch_id)
        records = []
        for row in truth.iter_rows(named=True):
            counters = []
            for e in self.escrows:
                if e.epoch_id != epoch_id:
                    continue
                counts: Counter = Counter()
                for fact in e.facts:
                    if fact.kind in ("protocol", "in_flight") or e.slots[fact.slot] != row["participant"]:
                        continue
                    counts[_key_bytes(counter_key(fact, schema_version))] += 1
                for key, n in sorted(counts.items()):
                    parsed = json.loads(key)
                    if schema_version >= 7:
                        counters.append({"escrow_id": e.escrow_id, **parsed, "count": n})
                    else:
                        counters.append({"escrow_id": e.escrow_id, "key": parsed, "count": n})
            dispositions = {
                d: row[d]
                for d in (
                    "finished_used",
                    "finished_unused",
                    "finished_usage_unknown",
                    "unfinished_refused",
                    "unfinished_execution",
                )
                if row[d]
            }
            if schema_version < 7 and row["protocol_only"]:
                dispositions["protocol_only"] = row["protocol_only"]
            records.append(
                {
                    "schema_version": schema_version,
                    "epoch_index": epoch_id,
                    "participant": row["participant"],
                    "model": row["model"],
                    "assigned_nonces": row["assigned_nonces"],
                    "dispositions": dispositions,
                    "timeout_outcomes": {"applied": row["unfinished_refused"] + row["unfinished_execution"]},
                    "protocol_misses": row["protocol_misses"],
                    "protocol_invalid": row["protocol_invalid"],
                    "unresolved_challenges": row["unresolved_challenges"],
                    "recorded_invalid_transitions": row["recorded_invalid_transitions"],
                    "counters": counters,
                    "findings": [],
                    "future_field": {"kept": True},
                }
            )
        return {"epoch_index": epoch_id, "participants": records}

    def chain_responses(self, epoch_id: int) -> list[dict]:
        """Chain REST JSON (uint64 as strings): one epoch_performance_summary and one
        DevshardHostEpochStats per participant of the epoch, and the tracker's current_epoch_stats."""
        truth = self.truth().filter(pl.col("epoch_id") == epoch_id)
        out: list[dict[str, Any]] = []
        for row in truth.iter_rows(named=True):
            out.append(
                {
                    "epochPerformanceSummary": {
                        "epoch_index": str(epoch_id),
                        "participant_id": row["participant"],
                        "inference_count": str(row["delivered"]),
                        "missed_requests": str(row["protocol_misses"]),
                        "earned_coins": "0",
                        "rewarded_coins": "1000",
                        "burned_coins": "0",
                        "validated_inferences": str(row["delivered"] - row["protocol_invalid"]),
                        "invalidated_inferences": str(row["protocol_invalid"]),
                        "claimed": True,
                    }
                }
            )
            out.append(
                {
                    "host_stats": {
                        "participant": row["participant"],
                        "epoch_index": str(epoch_id),
                        "missed": str(row["protocol_misses"]),
                        "invalid": str(row["protocol_invalid"]),
                        "cost": "0",
                        "required_validations": "0",
                        "completed_validations": "0",
                        "escrow_count": "3",
                    }
                }
            )
        # gonka-tracker's InferenceResponse: the epoch sits on the response, not on the stats.
        out.append(
            {
                "epoch_id": epoch_id,
                "height": 1_250_000,
                "participants": [
                    {
                        "index": row["participant"],
                        "address": row["participant"],
                        "current_epoch_stats": {
                            "inference_count": str(row["delivered"]),
                            "missed_requests": str(row["protocol_misses"]),
                            "validated_inferences": str(row["delivered"] - row["protocol_invalid"]),
                            "invalidated_inferences": str(row["protocol_invalid"]),
                            "invalidLLR": {"value": "-1234", "exponent": -3},
                        },
                    }
                    for row in truth.iter_rows(named=True)
                ],
            }
        )
        return out


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
