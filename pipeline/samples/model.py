"""The devshard state machine of the newest build (docs/data-model.md, replay), replayed over encoded diffs.

The scenario plans transactions; this module is the only place that decides what they do.
Replaying the stored `txs_proto` bytes (not the plan) keeps the truth tied to what is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pipeline.sources.decode import devshard_pb2 as pb


class Status(IntEnum):
    PENDING = 0
    STARTED = 1
    FINISHED = 2
    CHALLENGED = 3
    VALIDATED = 4
    INVALIDATED = 5
    TIMED_OUT = 6

    @property
    def label(self) -> str:
        return self.name.lower()


TERMINAL = {Status.VALIDATED, Status.INVALIDATED, Status.TIMED_OUT}
# Statuses that get a live observability row (sealed_nonce = 0) before the real seal.
LIVE_OBS = {Status.CHALLENGED, Status.VALIDATED, Status.INVALIDATED}

# What the settlement drain does to records still Pending or Started, by upstream release line:
# sealed as they are (up to v0.2.14), Pending refunded as timed out and Started paid (the next
# rule), or both paid at reserved cost (the newest). None of them is a miss.
DRAIN_RULES = ("unchanged", "refunded", "paid")

TX_KINDS = {
    "start_inference": "start",
    "confirm_start": "confirm",
    "finish_inference": "finish",
    "timeout_inference": "timeout",
    "validation": "validation",
    "validation_vote": "vote",
    "error_miss": "error_miss",
    "finalize_round": "finalize",
}


class PlanError(RuntimeError):
    """The scenario planned a transaction the state machine would reject."""


@dataclass(frozen=True)
class Group:
    slots: tuple[str, ...]  # address per slot id

    @property
    def size(self) -> int:
        return len(self.slots)

    def weight(self, address: str) -> int:
        return self.slots.count(address)

    def slots_of(self, address: str) -> list[int]:
        return [slot for slot, holder in enumerate(self.slots) if holder == address]

    def addresses(self) -> list[str]:
        return list(dict.fromkeys(self.slots))


@dataclass
class Record:
    inference_id: int
    executor_slot: int
    model: str
    prompt_hash: bytes
    input_length: int
    max_tokens: int
    started_at: int
    reserved_cost: int
    status: Status = Status.PENDING
    confirmed_at: int = 0
    response_hash: bytes | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    actual_cost: int = 0
    votes_valid: int = 0
    votes_invalid: int = 0
    validated_by: int = 0  # slot bitmask
    has_finish_tx: bool = False
    drained: bool = False
    pre_drain_status: Status | None = None
    miss: str | None = None  # refused, execution or error_miss
    challenged: bool = False
    passes: int = 0  # passing sampled validations counted while Finished (PR #1757's validated)
    participants: set[str] = field(default_factory=set)  # addresses that validated or voted
    obs_slots: list[int] = field(default_factory=list)  # validation-obs rows, in order applied
    sealed_nonce: int = 0

    def validated_by_bytes(self) -> bytes:
        return self.validated_by.to_bytes(16, "little")


@dataclass
class HostStats:
    """The state machine's per-slot `HostStats` (what checkpoints and settlement carry)."""

    missed: int = 0
    invalid: int = 0
    cost: int = 0
    # PR #1757's counters (written only by escrows of that line): passing sampled validations counted
    # while Finished, less an inference's passes once it is challenged, +1 when the challenge is cleared;
    # and finish transactions applied.
    validated: int = 0
    finished: int = 0
    # The per-model rows of the line where field 7 is model_stats: model -> [prompt, completion, count, cost].
    models: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class EscrowMachine:
    group: Group
    threshold: int
    token_price: int
    seal_grace_nonces: int
    auto_seal_every: int
    drain_rule: str = "paid"
    # What a MsgValidation does while Challenged (pipeline/transforms/rule_sets.py): "finished-only" (older
    # builds: nothing) or "late-validation" (newer builds: it goes to the challenge tally like a vote).
    validation_rule: str = "finished-only"
    records: dict[int, Record] = field(default_factory=dict)
    host_stats: dict[int, HostStats] = field(default_factory=dict)
    latest_nonce: int = 0
    finalize_nonce: int | None = None
    settled_nonce: int | None = None
    # (nonce, tx_index, inference_id, what): transactions that changed nothing.
    no_ops: list[tuple[int, int, int | None, str]] = field(default_factory=list)

    def replay(self, diffs: list[bytes]) -> EscrowMachine:
        for nonce, txs_proto in enumerate(diffs, start=1):
            self.apply(nonce, txs_proto)
        return self

    def apply(self, nonce: int, txs_proto: bytes) -> None:
        if nonce != self.latest_nonce + 1:
            raise PlanError(f"nonce {nonce} after {self.latest_nonce}")
        if self.settled_nonce is not None:
            raise PlanError(f"diff {nonce} after settlement")
        for tx_index, tx in enumerate(pb.DiffContent.FromString(txs_proto).txs):
            member = tx.WhichOneof("tx")
            handler = getattr(self, f"_{member}", None) if member else None
            if handler is None:
                self.no_ops.append((nonce, tx_index, None, member or "unknown_member"))
                continue
            if handler(nonce, getattr(tx, member)) is False:
                self.no_ops.append((nonce, tx_index, getattr(tx, member).inference_id, member))
        self.latest_nonce = nonce
        if self.finalize_nonce is not None and nonce >= self.finalize_nonce + self.group.size:
            self._settle(nonce)
        elif nonce % self.auto_seal_every == 0:
            self._auto_seal(nonce)

    # -- queries -------------------------------------------------------------------------
    @property
    def live(self) -> list[Record]:
        return [r for r in self.records.values() if not r.sealed_nonce]

    def executor(self, record: Record) -> str:
        return self.group.slots[record.executor_slot]

    def stats(self, slot: int) -> HostStats:
        return self.host_stats.setdefault(slot, HostStats())

    # -- transitions ---------------------------------------------------------------------
    def _live_record(self, inference_id: int, *allowed: Status) -> Record:
        record = self.records.get(inference_id)
        if record is None or record.sealed_nonce:
            raise PlanError(f"inference {inference_id} is not live")
        if allowed and record.status not in allowed:
            raise PlanError(f"inference {inference_id} is {record.status.label}, expected {allowed}")
        return record

    def _start_inference(self, nonce: int, msg: pb.MsgStartInference) -> None:
        if msg.inference_id != nonce or nonce in self.records:
            raise PlanError(f"start of {msg.inference_id} in diff {nonce}")
        self.records[nonce] = Record(
            inference_id=nonce,
            executor_slot=nonce % self.group.size,
            model=msg.model,
            prompt_hash=msg.prompt_hash,
            input_length=msg.input_length,
            max_tokens=msg.max_tokens,
            started_at=msg.started_at,
            reserved_cost=(msg.input_length + msg.max_tokens) * self.token_price,
        )

    def _confirm_start(self, nonce: int, msg: pb.MsgConfirmStart) -> None:
        record = self._live_record(msg.inference_id, Status.PENDING)
        record.status, record.confirmed_at = Status.STARTED, msg.confirmed_at

    def _finish_inference(self, nonce: int, msg: pb.MsgFinishInference) -> None:
        record = self._live_record(msg.inference_id, Status.STARTED)
        if msg.executor_slot != record.executor_slot:
            raise PlanError(f"finish of {msg.inference_id} by slot {msg.executor_slot}")
        record.status, record.has_finish_tx = Status.FINISHED, True
        record.response_hash = msg.response_hash
        record.input_tokens, record.output_tokens = msg.input_tokens, msg.output_tokens
        record.actual_cost = min((msg.input_tokens + msg.output_tokens) * self.token_price, record.reserved_cost)
        stats = self.stats(record.executor_slot)
        stats.cost += record.actual_cost
        stats.finished += 1
        per_model = stats.models.setdefault(record.model, [0, 0, 0, 0])
        for k, n in enumerate((msg.input_tokens, msg.output_tokens, 1, record.actual_cost)):
            per_model[k] += n

    def _accepted_weight(self, votes) -> int:
        voters = {self.group.slots[v.voter_slot] for v in votes if v.accept}
        return sum(self.group.weight(address) for address in voters)

    def _timeout_inference(self, nonce: int, msg: pb.MsgTimeoutInference) -> None:
        if msg.reason == pb.TIMEOUT_REASON_ERROR:  # the build line that sent error misses as reason 3
            return self._error_miss(nonce, msg)
        required = {pb.TIMEOUT_REASON_REFUSED: Status.PENDING, pb.TIMEOUT_REASON_EXECUTION: Status.STARTED}
        record = self._live_record(msg.inference_id, required[msg.reason])
        if self._accepted_weight(msg.votes) <= self.threshold:
            raise PlanError(f"timeout of {msg.inference_id} without enough accept weight")
        record.status, record.actual_cost = Status.TIMED_OUT, 0
        record.miss = "refused" if msg.reason == pb.TIMEOUT_REASON_REFUSED else "execution"
        self.stats(record.executor_slot).missed += 1

    def _error_miss(self, nonce: int, msg: pb.MsgErrorMiss | pb.MsgTimeoutInference) -> None:
        record = self._live_record(msg.inference_id, Status.FINISHED)
        if self._accepted_weight(msg.votes) <= self.threshold:
            raise PlanError(f"error miss of {msg.inference_id} without enough accept weight")
        stats = self.stats(record.executor_slot)
        stats.missed += 1
        stats.cost -= record.actual_cost  # the finish's pay is unwound: the client is refunded
        record.status, record.actual_cost, record.miss = Status.TIMED_OUT, 0, "error_miss"

    def _validation(self, nonce: int, msg: pb.MsgValidation) -> bool:
        record = self._live_record(msg.inference_id, Status.FINISHED, *LIVE_OBS)
        address = self.group.slots[msg.validator_slot]
        if msg.validator_slot == record.executor_slot:  # older builds checked the slot, not the address
            raise PlanError(f"self-validation of {msg.inference_id}")
        if address in record.participants:
            return False  # one verdict per address, whichever of its slots it uses
        record.participants.add(address)
        record.obs_slots.append(msg.validator_slot)
        if msg.valid:
            for slot in self.group.slots_of(address):
                record.validated_by |= 1 << slot
        if record.status is Status.CHALLENGED and self.validation_rule == "late-validation":
            self._challenge_vote(record, address, msg.valid)
        elif record.status is Status.FINISHED:
            stats = self.stats(record.executor_slot)
            if msg.valid:
                record.votes_valid += self.group.weight(address)
                record.passes += 1
                stats.validated += 1
            else:
                record.votes_invalid += self.group.weight(address)
                record.status, record.challenged = Status.CHALLENGED, True
                stats.validated -= record.passes
        return True

    def _validation_vote(self, nonce: int, msg: pb.MsgValidationVote) -> bool:
        record = self._live_record(msg.inference_id)
        address = self.group.slots[msg.voter_slot]
        if record.status is not Status.CHALLENGED or address in record.participants:
            return False  # after resolution, or a second voice of one address: silent no-op
        record.participants.add(address)
        record.obs_slots.append(msg.voter_slot)
        self._challenge_vote(record, address, msg.vote_valid)
        return True

    def _challenge_vote(self, record: Record, address: str, valid: bool) -> None:
        """The address's weight to the challenge tally, and the resolution once a side exceeds the threshold."""
        if valid:
            record.votes_valid += self.group.weight(address)
        else:
            record.votes_invalid += self.group.weight(address)
        if record.votes_invalid > self.threshold:
            record.status = Status.INVALIDATED
            stats = self.stats(record.executor_slot)
            stats.invalid += 1
            stats.cost -= record.actual_cost
        elif record.votes_valid > self.threshold:
            record.status = Status.VALIDATED
            self.stats(record.executor_slot).validated += 1

    def _finalize_round(self, nonce: int, msg: pb.MsgFinalizeRound) -> None:
        if self.finalize_nonce is not None:
            raise PlanError("second finalize")
        self.finalize_nonce = nonce

    # -- sealing -------------------------------------------------------------------------
    def _auto_seal(self, nonce: int) -> None:
        for record in self.live:
            stale = nonce >= record.inference_id + self.seal_grace_nonces
            if stale and (record.status in TERMINAL or record.status is Status.FINISHED):
                record.sealed_nonce = nonce

    def _settle(self, nonce: int) -> None:
        for record in self.live:
            if record.status in (Status.PENDING, Status.STARTED):
                record.drained, record.pre_drain_status = True, record.status
                refund = self.drain_rule == "refunded" and record.status is Status.PENDING
                if self.drain_rule != "unchanged" and not refund:  # paid in full, no finish transaction
                    record.status, record.actual_cost = Status.FINISHED, record.reserved_cost
                    self.stats(record.executor_slot).cost += record.reserved_cost
                elif refund:  # the reserved cost goes back to the creator; not a miss
                    record.status = Status.TIMED_OUT
            record.sealed_nonce = nonce
        self.settled_nonce = nonce


def tx_rows(txs_proto: bytes, group: Group) -> list[dict]:
    """One row per transaction of a diff: kind, inference, acting slot and verdict (truth `txs`)."""
    rows = []
    for tx_index, tx in enumerate(pb.DiffContent.FromString(txs_proto).txs):
        member = tx.WhichOneof("tx")
        msg: Any = getattr(tx, member) if member else None  # the tx's protobuf message
        row = {
            "tx_index": tx_index,
            "kind": TX_KINDS.get(member, "other"),
            "inference_id": getattr(msg, "inference_id", None),
            "slot": None,
            "valid": None,
        }
        if member in ("start_inference", "confirm_start"):
            row["slot"] = msg.inference_id % group.size
        elif member == "finish_inference":
            row["slot"] = msg.executor_slot
        elif member == "validation":
            row["slot"], row["valid"] = msg.validator_slot, msg.valid
        elif member == "validation_vote":
            row["slot"], row["valid"] = msg.voter_slot, msg.vote_valid
        rows.append(row)
    return rows
