"""Planted behaviour: who sits in which group, what each inference goes through, and when.

The planner writes each escrow's complete diff log (encoded protobuf) plus the side facts a
copy needs (payload bodies, sampling parameters, nonce clock). It never decides outcomes by
itself: `model.EscrowMachine` replays the log. Every inference's follow-up transactions lie in
later diffs than its start and before its seal-grace nonce, so any prefix of the log is a
consistent history (that is how copies cut the newest epoch and how the drain is planted).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from pipeline.core import address as bech32
from pipeline.sources.decode import devshard_pb2 as pb

from . import payloads, wire
from .model import Group
from .spec import BUILD_CHUNK, BUILD_FIX, BUILD_RAW, BUILD_V1, CALENDAR_START, EPOCH_SECONDS, MODEL, SampleSpec

VERSION_TAGS = ("v0.2.3", "v0.2.4", "v0.2.5", "v0.2.6", "v0.2.7")
UNKNOWN_TX_FIELD = 15


def address(*key: object) -> str:
    """A well-formed ``gonka1…`` bech32 address: 32 made-up data characters and their checksum."""
    return bech32.encode([b % 32 for b in wire.fake_bytes("address", *key, size=32)])


@dataclass(frozen=True)
class BuildWindow:
    host: str
    label: str
    since: int  # unix seconds; lasts until the host's next window


@dataclass(frozen=True)
class Cast:
    """The addresses of a timeline and the focal host's build windows."""

    focal: str
    hosts: tuple[str, ...]  # focal first
    gateways: tuple[str, ...]
    builds: tuple[BuildWindow, ...]

    def focal_build(self, at: int) -> str:
        label = self.builds[0].label
        for window in self.builds:
            if window.host == self.focal and window.since <= at:
                label = window.label
        return label


def cast_for(spec: SampleSpec) -> Cast:
    hosts = tuple(address(spec.seed, "host", i) for i in range(spec.n_hosts))
    focal, peer = hosts[0], hosts[1]
    builds = (
        BuildWindow(focal, BUILD_V1, CALENDAR_START - 10 * 86400),
        # Both boundaries fall inside an epoch (the second and third of the calendar).
        BuildWindow(focal, BUILD_RAW, CALENDAR_START + EPOCH_SECONDS + 36 * 3600),
        BuildWindow(focal, BUILD_FIX, CALENDAR_START + 2 * EPOCH_SECONDS + 48 * 3600),
        BuildWindow(peer, BUILD_V1, CALENDAR_START - 20 * 86400),
        # Added last (no earlier entry moves): on the fourth epoch's fourth day, after the bundled copy is taken.
        BuildWindow(focal, BUILD_CHUNK, CALENDAR_START + 3 * EPOCH_SECONDS + 3 * 86400 + 6 * 3600),
    )
    gateways = tuple(address(spec.seed, "gateway", i) for i in range(spec.n_gateways))
    return Cast(focal, hosts, gateways, builds)


@dataclass
class InferencePlan:
    inference_id: int
    started_at: int
    temperature: float | None
    top_p: float | None
    stream: bool
    max_tokens: int
    input_length: int
    output_tokens: int
    prompt: bytes
    response: bytes


@dataclass
class EscrowPlan:
    epoch_id: int
    escrow_id: str
    group: Group
    threshold: int
    vote_threshold_factor: int
    config: dict
    creator: str
    version: str | None
    initial_balance: int
    legacy_build: bool  # the old epoch file: narrow sealed_inferences, created_at = 0
    created_at_unit: str  # "zero", "s" or "ms"
    opened_at: int
    nonce_times: list[int]  # unix seconds of nonce n at index n - 1
    diffs: list[bytes] = field(default_factory=list)
    inferences: dict[int, InferencePlan] = field(default_factory=dict)
    bare_sealed_ids: frozenset[int] = frozenset()
    unknown_tx: list[tuple[int, int]] = field(default_factory=list)  # (nonce, tx_index)
    finalizes: bool = True
    drains: bool = False
    drain_rule: str = "paid"  # what settlement does to records still live (model.DRAIN_RULES)
    error_miss_as_timeout: bool = False  # error misses sent as MsgTimeoutInference reason 3 (ERROR)
    # What the writer's build did with this escrow's checkpoint, host stats and payload files
    # (docs/sources.md, blob encodings and payload storage): "protobuf" or "json" (pre-devshard-v2);
    # HostStatsProto field 7 as None (fields 1-6 only), "model_stats" or "counters" (PR #1757); payload
    # files zstd-compressed ({inference}.json.zst).
    checkpoint_format: str = "protobuf"
    host_stats_line: str | None = None
    compress_payloads: bool = False
    # One sampled validation cast by the focal host on its own answer from another of its slots (older
    # builds checked the slot, not the address; gonka-ai/gonka#1573).
    self_validation: bool = False
    # The writer build's rule for a MsgValidation while Challenged (model.EscrowMachine.validation_rule).
    validation_rule: str = "finished-only"

    def created_at(self, nonce: int) -> int:
        at = self.nonce_times[nonce - 1]
        return {"zero": 0, "s": at, "ms": at * 1000 + (nonce * 37) % 1000}[self.created_at_unit]

    def escrow_json(self) -> str:
        return json.dumps(
            {
                "escrow_id": self.escrow_id,
                "amount": self.initial_balance,
                "creator_address": self.creator,
                "app_hash": wire.fake_bytes("app", self.escrow_id).hex(),
                "slots": list(self.group.slots),
                "token_price": self.config["TokenPrice"],
                "create_devshard_fee": self.config["CreateDevshardFee"],
                "fee_per_nonce": self.config["FeePerNonce"],
                "inference_seal_grace_nonces": self.config["InferenceSealGraceNonces"],
                "inference_seal_grace_seconds": self.config["InferenceSealGraceSeconds"],
                "auto_seal_every_n_nonces": self.config["AutoSealEveryNNonces"],
                "validation_rate": self.config["ValidationRate"],
                "vote_threshold_factor": self.vote_threshold_factor,
                "epoch_id": self.epoch_id,
            }
        )

    def group_json(self) -> str:
        return json.dumps([{"SlotID": s, "ValidatorAddress": a} for s, a in enumerate(self.group.slots)])


def _is_sampled(temperature: float | None) -> bool:
    """Not greedy. An absent temperature is the API default 1; temperature 0 is greedy whatever
    its top_p (and the planner never pairs temperature 0 with top_p < 1)."""
    return (1.0 if temperature is None else temperature) > 0


class EscrowPlanner:
    """Plans one escrow. `position` is the epoch's index in the spec, `index` the escrow's in its epoch."""

    def __init__(self, spec: SampleSpec, cast: Cast, epoch_id: int, index: int):
        self.spec, self.cast = spec, cast
        self.position = spec.epochs.index(epoch_id)
        self.index = index
        self.newer = self.position > 0
        self.rng = random.Random(f"{spec.seed}:{epoch_id}:{index}")
        self.escrow_id = str(epoch_id * 1000 + 100 + index)
        self.epoch_id = epoch_id
        self.events: dict[int, list[tuple[int, int, pb.DevshardTx]]] = {}
        self._order = 0
        self._self_validated = False

    # -- setup ---------------------------------------------------------------------------
    def _group(self) -> Group:
        rng, spec = self.rng, self.spec
        size = rng.randint(*spec.group_size_range)
        focal_slots = 2 if self.index == 1 else 1
        slots = [self.cast.focal] * focal_slots
        others = list(self.cast.hosts[1:])
        while len(slots) < size:
            candidate = rng.choice(others[: max(4, size - 3)] if len(others) > 4 else others)
            if slots.count(candidate) < spec.max_slots_per_host:
                slots.append(candidate)
        rng.shuffle(slots)
        return Group(tuple(slots))

    def _nonce_times(self, opened_at: int, count: int) -> list[int]:
        times, at = [], opened_at
        for _ in range(count):
            times.append(at)
            at += self.rng.randint(15, 75)
        return times

    # -- scheduling ----------------------------------------------------------------------
    def _emit(self, nonce: int, inference_id: int, tx: pb.DevshardTx) -> None:
        self._order += 1
        self.events.setdefault(nonce, []).append((inference_id, self._order, tx))

    def _timeout_votes(self, group: Group, executor: str, inference_id: int, threshold: int, kind: str):
        """Votes that pass: accept weight over unique addresses > threshold, a few rejections."""
        voters = [a for a in group.addresses() if a != executor]
        self.rng.shuffle(voters)
        votes, accepted = [], 0
        remaining = sum(group.weight(a) for a in voters)
        for voter in voters:
            remaining -= group.weight(voter)
            # A rejection only where the voters still to come can carry the vote.
            accept = accepted + remaining <= threshold or self.rng.random() >= 0.15
            if accept:
                accepted += group.weight(voter)
            votes.append(
                (
                    self.rng.choice(group.slots_of(voter)),
                    accept,
                    wire.signature(self.escrow_id, inference_id, kind, voter),
                )
            )
            if accepted > threshold and self.rng.random() < 0.5:
                break
        return votes

    def plan(self) -> EscrowPlan:
        spec, rng, cast = self.spec, self.rng, self.cast
        group = self._group()
        n = group.size
        factor = 0 if (self.position, self.index) == (0, 2) else spec.vote_threshold_factor
        threshold = n * factor // 100 if factor else n // 2
        variants = self._variants()
        count = max(30, round(spec.inferences_per_escrow * rng.uniform(0.8, 1.2)))
        epoch_start = CALENDAR_START + self.position * EPOCH_SECONDS
        opened_at = epoch_start + int((self.index + 0.1 + 0.3 * rng.random()) * EPOCH_SECONDS / spec.escrows_per_epoch)
        times = self._nonce_times(opened_at, int(count * 1.3) + 2 * n + 60)

        starts: list[int] = []
        nonce = 1
        while len(starts) < count:
            if nonce == 1 or rng.random() > 0.12:
                starts.append(nonce)
            nonce += 1

        plan = EscrowPlan(
            epoch_id=self.epoch_id,
            escrow_id=self.escrow_id,
            group=group,
            threshold=threshold,
            vote_threshold_factor=factor,
            config=self._config(n, threshold),
            creator=rng.choice(cast.gateways),
            version=None if self.position == 0 else VERSION_TAGS[min(self.position, len(VERSION_TAGS) - 1)],
            initial_balance=5_000_000 + 1000 * rng.randrange(1000),
            legacy_build=self.position == 0,
            created_at_unit="zero" if self.position == 0 else ("ms" if self.position == 2 else "s"),
            opened_at=opened_at,
            nonce_times=times,
            **variants,
        )

        forced = self._forced_stories(starts, group)
        for position, start in enumerate(starts):
            story = forced.get(start)
            if plan.drains and position >= count - 5:
                story = ("pending", "pending", "started", "started", "stalled_challenge")[count - 1 - position]
            plan.inferences[start] = self._plan_inference(plan, start, story)
        self._plan_diffs(plan, starts)
        return plan

    def _config(self, n: int, threshold: int) -> dict[str, int | str]:
        """The escrow's devshard config (the newer builds name their logprobs mode)."""
        config: dict[str, int | str] = {
            "RefusalTimeout": 60,
            "ExecutionTimeout": 600,
            "TokenPrice": self.spec.token_price,
            "CreateDevshardFee": 1000,
            "FeePerNonce": 1,
            "VoteThreshold": threshold,
            "ValidationRate": self.spec.validation_rate,
            "InferenceSealGraceNonces": max(n, 20),
            "InferenceSealGraceSeconds": 600,
            "AutoSealEveryNNonces": 10,
        }
        if self.newer:
            config["LogprobsMode"] = "processed_logprobs" if self.position >= 3 else "raw_logprobs"
        return config

    def _variants(self) -> dict[str, Any]:
        """The escrow's place in the story: which drain rule settles it, whether it finalizes, and the build
        quirks of its epoch (EscrowPlan's fields by name)."""
        spec = self.spec
        n_epochs = len(spec.epochs)
        drains = self.position == min(2, n_epochs - 1) and self.index == 0 and n_epochs > 1
        # The host ran three release lines over the calendar: in the second epoch the first escrow
        # settles under the oldest drain rule (sealed unchanged) and the second under the refund
        # rule; later escrows are paid. The third escrow of the second epoch comes from the build
        # line that sent error misses as reason-3 timeouts.
        drain_rule = "paid"
        if self.position == 1 and n_epochs > 2 and self.index < 2:
            drains, drain_rule = True, ("unchanged", "refunded")[self.index]
        # The oldest escrow of the copy comes from a pre-devshard-v2 build (JSON checkpoint); in the next one
        # the focal host (two slots) validates one of its own answers from its other slot, which builds that
        # checked the slot, not the address, accepted. In the last two epochs one escrow's checkpoint carries
        # per-model host stats and one PR #1757's counters, and one escrow's payload files were written compressed.
        oldest = self.position == 1 and self.index == 0 and n_epochs > 2
        host_stats_line = None
        if n_epochs > 3 and (self.position, self.index) == (n_epochs - 2, 1):
            host_stats_line = "model_stats"
        elif n_epochs > 2 and (self.position, self.index) == (n_epochs - 1, 0):
            host_stats_line = "counters"
        return {
            "finalizes": not (
                self.position == min(1, n_epochs - 1) and self.index == spec.escrows_per_epoch - 1 and n_epochs > 1
            ),
            "drains": drains,
            "drain_rule": drain_rule,
            "error_miss_as_timeout": self.position == 1 and self.index == 2,
            "checkpoint_format": "json" if oldest else "protobuf",
            "host_stats_line": host_stats_line,
            "compress_payloads": n_epochs > 2 and (self.position, self.index) == (n_epochs - 1, 2),
            "self_validation": self.position == 1 and self.index == 1 and n_epochs > 2,
        }

    def _plan_diffs(self, plan: EscrowPlan, starts: list[int]) -> None:
        """The escrow's diffs, one per nonce: the starts and the planned events, the finalize and a heartbeat
        after it, an unknown transaction in a newer build's first escrow; bare sealed rows in later epochs."""
        n = plan.group.size
        end = max(max(self.events), starts[-1])
        finalize_at = None
        if plan.drains:
            finalize_at = starts[-1] + 1
        elif plan.finalizes:
            finalize_at = end + 1
        last_nonce = finalize_at + n if finalize_at else end + 2
        if self.position > 0 and self.index == 0:
            plan.bare_sealed_ids = frozenset(starts[20:23]) if len(starts) > 23 else frozenset()
        unknown_at = starts[min(11, len(starts) - 1)] if self.newer and self.index == 0 else None

        for nonce in range(1, last_nonce + 1):
            txs: list[pb.DevshardTx | bytes] = []
            if nonce in plan.inferences:
                txs.append(self._start_tx(plan, plan.inferences[nonce]))
            txs += [tx for _, _, tx in sorted(self.events.get(nonce, []), key=lambda e: (e[0], e[1]))]
            if nonce == finalize_at:
                txs.append(pb.DevshardTx(finalize_round=pb.MsgFinalizeRound()))
            if self.newer and finalize_at and nonce == finalize_at + 1:
                txs.append(pb.DevshardTx(heartbeat=pb.MsgHeartbeat()))
            if nonce == unknown_at:
                plan.unknown_tx.append((nonce, len(txs)))
                txs.append(wire.unknown_member(UNKNOWN_TX_FIELD, wire.varint(8) + wire.varint(nonce)))
            plan.diffs.append(wire.encode_diff(txs))

    def _forced_stories(self, starts: list[int], group: Group) -> dict[int, str]:
        """Every escrow gets each variant early on, so even a copy's cut shows it."""
        wanted = [(3, "refused"), (6, "execution"), (12, "challenge_cleared"), (16, "challenge_upheld")]
        if self.newer:
            wanted.append((9, "error_miss"))
        forced: dict[int, str] = {}
        for position, story in wanted:
            for start in starts[position:]:
                if start in forced:
                    continue
                if story.startswith("challenge") and group.slots[start % group.size] == self.cast.focal:
                    continue  # the focal host's challenges follow the planted sampling rule only
                forced[start] = story
                break
        return forced

    def _start_tx(self, plan: EscrowPlan, inference: InferencePlan) -> pb.DevshardTx:
        msg = pb.MsgStartInference(
            inference_id=inference.inference_id,
            prompt_hash=hashlib.sha256(inference.prompt).digest(),
            model=MODEL,
            input_length=inference.input_length,
            max_tokens=inference.max_tokens,
            started_at=inference.started_at,
        )
        if self.newer:
            msg.observed_height = 1_200_000 + (inference.started_at - CALENDAR_START) // 6
            msg.protocol_version = "2"
        return pb.DevshardTx(start_inference=msg)

    def _inference_payload(self, plan: EscrowPlan, i: int) -> InferencePlan:
        """The request and response of inference `i`, from a generator of its own (payloads never shift the
        planner's draws)."""
        payload_rng = random.Random(f"{self.spec.seed}:{self.escrow_id}:{i}:payload")
        roll = payload_rng.random()
        if roll < 0.25:
            temperature, top_p = 0.0, payload_rng.choice([None, 1.0])
        elif roll < 0.45:
            temperature, top_p = None, None
        else:
            temperature = payload_rng.choice([0.6, 0.7, 0.8, 1.0])
            top_p = payload_rng.choice([None, 0.9, 0.95, 1.0])
        stream = payload_rng.random() < 0.4
        max_tokens = payload_rng.choice([64, 128, 256])
        input_length = payload_rng.randint(20, 400)
        output_tokens = payload_rng.randint(5, 40)
        started_at = plan.nonce_times[i - 1]
        prompt = payloads.request_body(payload_rng, MODEL, max_tokens, temperature, top_p, stream)
        response = payloads.response_body(payload_rng, MODEL, i, started_at + 3, input_length, output_tokens, stream)
        return InferencePlan(
            i, started_at, temperature, top_p, stream, max_tokens, input_length, output_tokens, prompt, response
        )

    def _plan_inference(self, plan: EscrowPlan, i: int, story: str | None) -> InferencePlan:
        rng, group, spec = self.rng, plan.group, self.spec
        inference = self._inference_payload(plan, i)
        started_at, response = inference.started_at, inference.response
        input_length, output_tokens = inference.input_length, inference.output_tokens
        executor_slot = i % group.size
        executor = group.slots[executor_slot]
        skew = self.cast.hosts.index(executor) % 3  # the executor's clock runs 0-2 s behind
        if story is None:
            roll = rng.random()
            if roll < spec.refused_rate:
                story = "refused"
            elif roll < spec.refused_rate + spec.execution_timeout_rate:
                story = "execution"
            elif self.newer and roll < spec.refused_rate + spec.execution_timeout_rate + 0.004:
                story = "error_miss"
        if story == "pending":
            return inference
        if story == "refused":
            self._emit(
                i + rng.randint(2, 5), i, self._timeout(group, executor, i, pb.TIMEOUT_REASON_REFUSED, plan.threshold)
            )
            return inference
        confirm_at = i + rng.randint(1, 2)
        confirmed_at = started_at + rng.randint(0, 2) - skew
        self._emit(
            confirm_at,
            i,
            pb.DevshardTx(
                confirm_start=pb.MsgConfirmStart(
                    inference_id=i, executor_sig=wire.signature(self.escrow_id, i, "receipt"), confirmed_at=confirmed_at
                )
            ),
        )
        if story == "started":
            return inference
        if story == "execution":
            self._emit(
                confirm_at + rng.randint(2, 5),
                i,
                self._timeout(group, executor, i, pb.TIMEOUT_REASON_EXECUTION, plan.threshold),
            )
            return inference
        finish_at = confirm_at + rng.randint(1, 3)
        self._emit(
            finish_at,
            i,
            pb.DevshardTx(
                finish_inference=pb.MsgFinishInference(
                    inference_id=i,
                    response_hash=hashlib.sha256(response).digest(),
                    input_tokens=input_length,
                    output_tokens=output_tokens,
                    executor_slot=executor_slot,
                    proposer_sig=wire.signature(self.escrow_id, i, "finish"),
                    escrow_id=self.escrow_id,
                )
            ),
        )
        if story == "error_miss":
            self._plan_error_miss(plan, executor, i, finish_at)
            return inference
        self._plan_validations(plan, inference, executor, finish_at, story)
        return inference

    def _plan_error_miss(self, plan: EscrowPlan, executor: str, i: int, finish_at: int) -> None:
        """An error miss on a finished answer: MsgErrorMiss, or a reason-3 timeout from the build line that
        sent them so."""
        group, rng = plan.group, self.rng
        if plan.error_miss_as_timeout:  # the votes first, as for MsgErrorMiss: the same draws
            tx = self._timeout(group, executor, i, pb.TIMEOUT_REASON_ERROR, plan.threshold)
            self._emit(finish_at + rng.randint(1, 2), i, tx)
            return
        votes = self._timeout_votes(group, executor, i, plan.threshold, "error")
        self._emit(
            finish_at + rng.randint(1, 2),
            i,
            pb.DevshardTx(
                error_miss=pb.MsgErrorMiss(
                    inference_id=i,
                    votes=[pb.ErrorMissVote(voter_slot=s, accept=a, signature=g) for s, a, g in votes],
                )
            ),
        )

    def _timeout(self, group, executor, i, reason, threshold) -> pb.DevshardTx:
        votes = self._timeout_votes(group, executor, i, threshold, reason)
        return pb.DevshardTx(
            timeout_inference=pb.MsgTimeoutInference(
                inference_id=i,
                reason=reason,
                votes=[pb.TimeoutVote(voter_slot=s, accept=a, signature=g) for s, a, g in votes],
            )
        )

    def _focal_raw(self, plan: EscrowPlan, nonce: int) -> bool:
        at = plan.nonce_times[min(nonce, len(plan.nonce_times)) - 1]
        return self.cast.focal_build(at) == BUILD_RAW

    def _plan_self_validation(self, plan, inference, executor, finish_at, story, checks) -> None:
        """Once per escrow that allows it: a passing validation by the focal host, as executor, from another of
        its slots, on an answer nobody else finds invalid (no draw from the planner's generator)."""
        group, i = plan.group, inference.inference_id
        if not plan.self_validation or self._self_validated or story is not None or i < 30:
            return
        if executor != self.cast.focal or group.weight(executor) < 2 or not all(valid for _, _, valid in checks):
            return
        self._self_validated = True
        slot = next(s for s in group.slots_of(executor) if s != i % group.size)
        self._emit(
            finish_at + 1,
            i,
            pb.DevshardTx(
                validation=pb.MsgValidation(
                    inference_id=i,
                    validator_slot=slot,
                    valid=True,
                    proposer_sig=wire.signature(self.escrow_id, i, "validation", executor, finish_at + 1),
                    escrow_id=self.escrow_id,
                )
            ),
        )

    def _plan_validations(
        self, plan: EscrowPlan, inference: InferencePlan, executor: str, finish_at: int, story: str | None
    ) -> None:
        others = [a for a in plan.group.addresses() if a != executor]
        validators, challenge, challenger = self._plan_challenge(plan, inference, executor, story, others)
        checks = self._plan_checks(plan, inference, executor, finish_at, story, validators, challenger)
        # The tally as the machine will see it: valid weight before the first invalid verdict.
        first_invalid = next((k for k, c in enumerate(checks) if not c[2]), None)
        if first_invalid is None or challenge == "stalled":
            return
        voters = [a for a in others if a not in validators]
        self._plan_votes(plan, inference, executor, story, challenge, checks[: first_invalid + 1], voters)

    def _plan_challenge(
        self, plan: EscrowPlan, inference: InferencePlan, executor: str, story: str | None, others: list[str]
    ) -> tuple[list[str], str | None, str | None]:
        """The sampled validators, the planned outcome of a challenge ("cleared", "upheld", "stalled" or None)
        and its challenger (added to the validators when not sampled)."""
        rng, group, spec, focal = self.rng, plan.group, self.spec, self.cast.focal
        rate = spec.validation_rate / 10000
        validators = [
            a for a in others if rng.random() < rate * group.weight(a) / (group.size - group.weight(executor))
        ]
        challenge = None
        if story == "stalled_challenge":
            challenge = "stalled"  # challenged, and the escrow settles before anyone votes
        elif executor == focal and self._focal_raw(plan, inference.inference_id):
            if _is_sampled(inference.temperature):
                challenge = "upheld"
        elif story in ("challenge_cleared", "challenge_upheld"):
            challenge = story.removeprefix("challenge_")
        elif rng.random() < spec.challenge_rate:
            challenge = rng.choice(["cleared", "upheld"])
        challenger = None
        if challenge:
            candidates = [a for a in others if a != focal] or others
            challenger = next((a for a in validators if a in candidates), None) or rng.choice(candidates)
            if challenger not in validators:
                validators.append(challenger)
        return validators, challenge, challenger

    def _plan_checks(
        self,
        plan: EscrowPlan,
        inference: InferencePlan,
        executor: str,
        finish_at: int,
        story: str | None,
        validators: list[str],
        challenger: str | None,
    ) -> list[tuple[int, str, bool]]:
        """The validations, (nonce, address, verdict) in the order the machine will see them, emitted."""
        rng, group, spec, focal = self.rng, plan.group, self.spec, self.cast.focal
        i = inference.inference_id
        checks = []
        for validator in validators:
            at = finish_at + rng.randint(1, 5)
            if validator == challenger:
                valid = False
            elif validator == focal and self._focal_raw(plan, at):
                valid = rng.random() >= spec.focal_invalid_vote_rate
            else:
                valid = True
            checks.append((at, validator, valid))
        checks.sort(key=lambda c: c[0])
        self._plan_self_validation(plan, inference, executor, finish_at, story, checks)
        if rng.random() < 0.02 and checks:  # a second verdict from the same address: a no-op
            at, validator, valid = checks[-1]
            checks.append((at + 1, validator, valid))
        for at, validator, valid in checks:
            self._emit(
                at,
                i,
                pb.DevshardTx(
                    validation=pb.MsgValidation(
                        inference_id=i,
                        validator_slot=rng.choice(group.slots_of(validator)),
                        valid=valid,
                        proposer_sig=wire.signature(self.escrow_id, i, "validation", validator, at),
                        escrow_id=self.escrow_id,
                    )
                ),
            )
        return checks

    def _plan_votes(
        self,
        plan: EscrowPlan,
        inference: InferencePlan,
        executor: str,
        story: str | None,
        challenge: str | None,
        checks: list[tuple[int, str, bool]],
        voters: list[str],
    ) -> None:
        """The challenge's votes after the first invalid verdict (the last of `checks`), one at a time until
        the tally resolves, sometimes one more after it."""
        rng, group, spec, focal = self.rng, plan.group, self.spec, self.cast.focal
        i = inference.inference_id
        votes_valid = sum(group.weight(a) for _, a, v in checks[:-1] if v)
        votes_invalid = group.weight(checks[-1][1])
        want_valid = challenge != "upheld"
        rng.shuffle(voters)
        # Some tallies get one more vote after they resolved: a no-op that still sits in the log.
        # It rides in the same diff as the deciding vote, before any seal can remove the record.
        late_vote = story == "challenge_cleared" or rng.random() < 0.3
        at, resolved = checks[-1][0], False
        for voter in voters:
            if not resolved:
                at += 1 if rng.random() < 0.6 else 0
            if voter == focal and self._focal_raw(plan, at + 1):
                vote_valid = rng.random() >= spec.focal_invalid_vote_rate
            elif executor == focal and challenge == "upheld":
                vote_valid = False
            else:
                vote_valid = want_valid if rng.random() < 0.9 else not want_valid
            self._emit(
                at + 1,
                i,
                pb.DevshardTx(
                    validation_vote=pb.MsgValidationVote(
                        inference_id=i,
                        voter_slot=rng.choice(group.slots_of(voter)),
                        vote_valid=vote_valid,
                        proposer_sig=wire.signature(self.escrow_id, i, "vote", voter),
                        escrow_id=self.escrow_id,
                    )
                ),
            )
            if resolved:
                break
            votes_valid += group.weight(voter) * vote_valid
            votes_invalid += group.weight(voter) * (not vote_valid)
            resolved = votes_invalid > plan.threshold or votes_valid > plan.threshold
            if resolved and not late_vote:
                break
