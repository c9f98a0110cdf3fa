"""Inference outcomes from replaying the diff log under the devshard state machine.

Sealed rows are best-effort (missing, bare, live with sealed_nonce 0, absent for
in-flight records), so the diff log is the source of truth and sealed rows only
confirm it. Rules (newest build; docs/data-model.md, replay):

- start → Pending; confirm_start → Started; finish_inference → Finished.
- A timeout (REFUSED on Pending, EXECUTION on Started) or an error miss (on
  Finished) applies only when the accepting addresses' slot weight exceeds
  VoteThreshold → TimedOut.
- MsgValidation counts once per address: while Finished a valid verdict adds the
  address weight to votes_valid, an invalid one adds it to votes_invalid and
  challenges. What a validation does while Challenged depends on the rule set
  (pipeline/transforms/rule_sets.py): `finished-only` (older builds) adds nothing,
  `late-validation` (newer builds) adds its weight to the challenge tally like a vote.
- MsgValidationVote (while Challenged, once per address, not by an address that
  already validated) adds weight; then votes_invalid > T → Invalidated, else
  votes_valid > T → Validated (votes_valid includes the pre-challenge
  validations). Votes and validations after resolution are in the log but change nothing.
- The outcomes that depend on the rule set (status, votes, resolution, `counted`,
  `after_resolution`) come once per rule set, in columns `<name>@<rule set>`, from the
  same passes; the plain columns hold the rule set of the escrow's `rule_set` column
  (the newest where there is none). rule_sets.py chooses per escrow by its seals.
- A timeout with reason 3 (ERROR, one build line) is an error miss: it applies to a
  Finished record like MsgErrorMiss does.
- Settlement (latest nonce ≥ finalize nonce + N) drains the records still Pending or
  Started: live at the settlement nonce with no finish, timeout or error-miss
  transaction. What the drain did to them depends on the writer's release line
  (sealed unchanged, refunded, or paid); the replay only marks them `drained` with
  their `pre_drain_status` and leaves the outcome to the sealed rows (derive.py).
  The drain runs after the transactions of the settlement diff, and it seals every live
  record: a transaction in a later diff finds no live record and changes nothing.
- An escrow joined by import has no diffs before `imported_nonce`: the records live at the
  checkpoint whose start the log lacks enter the replay in the state the checkpoint gives
  them (pending, started or finished at the checkpoint nonce), and the finalize nonce comes
  from the checkpoint when the log does not hold the finalize transaction.

Everything is computed per inference with Polars window/group operations, so the
cost is a few passes over the escrow's transactions.
"""

from __future__ import annotations

import polars as pl

from pipeline.transforms.rule_sets import NEWEST, RULE_SETS, RULED_INFERENCE_COLUMNS, RULED_VERDICT_COLUMNS, pick, ruled

# Orders transactions within an escrow: nonce first, then position in the diff.
POS = (pl.col("nonce") * 1_000_000 + pl.col("tx_index")).alias("pos")
REFUSED, EXECUTION, ERROR = 1, 2, 3
INF = 2**62
KIND, ALIVE = pl.col("kind"), pl.col("in_life")  # in_life: before the settlement drain sealed the record
# A validation that counts: the address's first, while the record is Finished and live.
LIVE_VALIDATION = (KIND == "validation") & pl.col("first_of_address") & (pl.col("pos") > pl.col("finish_pos")) & ALIVE
# A verdict after the challenge that may go to its tally: the address's first, while live.
AFTER_CHALLENGE = (
    KIND.is_in(["vote", "validation"]) & pl.col("first_of_address") & (pl.col("pos") > pl.col("challenge_pos")) & ALIVE
)
# Which of those each rule set counts (pipeline/transforms/rule_sets.py).
COUNTS_AFTER_CHALLENGE = {"finished-only": KIND == "vote", "late-validation": pl.lit(True)}
assert tuple(COUNTS_AFTER_CHALLENGE) == RULE_SETS, "one tally rule per rule set, in order"


def _first(cond: pl.Expr, value: str = "pos") -> pl.Expr:
    return pl.col(value).filter(cond).min()


def replay(
    txs: pl.DataFrame, escrows: pl.DataFrame, slots: pl.DataFrame, checkpoint: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (inferences, verdicts) for the escrows in `escrows`.

    txs: tx_log rows; escrows: escrow_id, group_size, vote_threshold, latest_nonce, and optionally
    finalize_nonce (the checkpoint's, used where the log lacks the finalize transaction);
    slots: escrow_id, slot_id, address, address_slots; checkpoint: the records live at each escrow's
    checkpoint (escrow_id, inference_id, snapshot_nonce, status code); an optional `rule_set` column of
    `escrows` names the rule set of the plain columns (the newest where absent). Every rule set's
    outcome is also returned, in the `<name>@<rule set>` columns.
    """
    esc = escrows.select(
        "escrow_id",
        "group_size",
        "vote_threshold",
        "latest_nonce",
        (pl.col("finalize_nonce") if "finalize_nonce" in escrows.columns else pl.lit(None, pl.Int64)).alias(
            "checkpoint_finalize_nonce"
        ),
    )
    tx = _with_applied(txs.join(esc, on="escrow_id", how="inner").with_columns(POS), slots)
    settle = _settlement(tx)
    # The drain seals every live record after the settlement diff: later transactions are no-ops.
    tx = tx.join(settle.select("escrow_id", "settlement_nonce"), on="escrow_id", how="left").with_columns(
        in_life=(pl.col("pos") < (pl.col("settlement_nonce") + 1) * 1_000_000).fill_null(True)
    )
    per_inf = tx.filter(pl.col("inference_id").is_not_null())
    facts = _with_checkpoint(
        _inference_facts(per_inf), checkpoint, esc, tx.group_by("escrow_id").agg(first_nonce=pl.col("nonce").min())
    )
    facts = _with_miss_windows(facts)
    verdicts = _verdicts(per_inf, slots, facts)
    facts = _with_challenge(facts, verdicts)
    verdicts = verdicts.join(
        facts.select("escrow_id", "inference_id", "challenge_pos", "end_finished", "vote_threshold"),
        on=["escrow_id", "inference_id"],
        how="left",
    )
    facts = _with_tally(_with_pre_valid(facts, verdicts), verdicts).join(settle, on="escrow_id", how="left")
    rules = escrows.select("escrow_id", "rule_set") if "rule_set" in escrows.columns else esc.select("escrow_id")
    return _with_rule_set(_inferences(facts), rules, RULED_INFERENCE_COLUMNS), _with_rule_set(
        _verdict_rows(verdicts, facts), rules, RULED_VERDICT_COLUMNS
    )


def _with_rule_set(frame: pl.DataFrame, rules: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """The plain `columns` from each escrow's rule set, keeping every rule set's own columns."""
    joined = frame.join(rules, on="escrow_id", how="left")
    rule_set = pl.col("rule_set") if "rule_set" in joined.columns else pl.lit(NEWEST)
    return pick(joined, columns, rule_set, keep=True).drop("rule_set", strict=False)


def _with_applied(tx: pl.DataFrame, slots: pl.DataFrame) -> pl.DataFrame:
    """Vote-backed transitions: `applied` when the weight of the distinct accepting addresses exceeds
    the vote threshold."""
    accept = (
        tx.filter(pl.col("kind").is_in(["timeout", "error_miss"]))
        .select("escrow_id", "nonce", "tx_index", "votes")
        .explode("votes")
        .unnest("votes")
        .filter(pl.col("accept").fill_null(False))
        .join(slots, left_on=["escrow_id", "voter_slot"], right_on=["escrow_id", "slot_id"], how="inner")
        .unique(["escrow_id", "nonce", "tx_index", "address"])
        .group_by("escrow_id", "nonce", "tx_index")
        .agg(accept_weight=pl.col("address_slots").sum())
    )
    return tx.join(accept, on=["escrow_id", "nonce", "tx_index"], how="left").with_columns(
        applied=pl.col("accept_weight").fill_null(0) > pl.col("vote_threshold")
    )


def _settlement(tx: pl.DataFrame) -> pl.DataFrame:
    """Settlement drain point per escrow: finalize_nonce and settlement_nonce (None until reached)."""
    return (
        tx.group_by("escrow_id")
        .agg(
            finalize_nonce=pl.coalesce(
                pl.col("nonce").filter(pl.col("kind") == "finalize").min(), pl.col("checkpoint_finalize_nonce").first()
            ),
            max_nonce=pl.col("nonce").max(),
            group_size=pl.col("group_size").first(),
            latest_nonce=pl.col("latest_nonce").first(),
        )
        .with_columns(settlement_nonce=pl.col("finalize_nonce") + pl.col("group_size"))
        .with_columns(
            settlement_nonce=pl.when(
                pl.max_horizontal(pl.col("max_nonce"), pl.col("latest_nonce").fill_null(0))
                >= pl.col("settlement_nonce")
            ).then(pl.col("settlement_nonce"))
        )
        .select("escrow_id", "finalize_nonce", "settlement_nonce")
    )


def _inference_facts(per_inf: pl.DataFrame) -> pl.DataFrame:
    """Per inference: the first position of each transition while live, and the start, receipt and finish facts."""
    return per_inf.group_by("escrow_id", "inference_id").agg(
        start_pos=_first(KIND == "start"),
        start_nonce=_first(KIND == "start", "nonce"),
        confirm_pos=_first((KIND == "confirm") & ALIVE),
        finish_pos=_first((KIND == "finish") & ALIVE),
        refused_pos=_first((KIND == "timeout") & pl.col("applied") & ALIVE & (pl.col("timeout_reason") == REFUSED)),
        execution_pos=_first((KIND == "timeout") & pl.col("applied") & ALIVE & (pl.col("timeout_reason") == EXECUTION)),
        errormiss_pos=_first(
            ((KIND == "error_miss") | ((KIND == "timeout") & (pl.col("timeout_reason") == ERROR)))
            & pl.col("applied")
            & ALIVE
        ),
        model=pl.col("model").filter(KIND == "start").first(),
        started_at=pl.col("started_at").filter(KIND == "start").first(),
        confirmed_at=pl.col("confirmed_at").filter((KIND == "confirm") & ALIVE).first(),
        input_tokens=pl.col("input_tokens").filter((KIND == "finish") & ALIVE).first(),
        output_tokens=pl.col("output_tokens").filter((KIND == "finish") & ALIVE).first(),
        finish_slot=pl.col("slot").filter((KIND == "finish") & ALIVE).first(),
        invalid_validation=((KIND == "validation") & ALIVE & ~pl.col("valid").fill_null(False)).any(),
        group_size=pl.col("group_size").first(),
        vote_threshold=pl.col("vote_threshold").first(),
    )


def _with_miss_windows(facts: pl.DataFrame) -> pl.DataFrame:
    """A refusal needs Pending (before the receipt); an execution timeout needs Started; an error miss
    needs Finished."""
    return facts.with_columns(
        errormiss_pos=pl.when(pl.col("errormiss_pos") > pl.col("finish_pos")).then(pl.col("errormiss_pos")),
        timeout_pos=pl.min_horizontal(
            pl.when(pl.col("refused_pos") < pl.col("confirm_pos").fill_null(INF)).then(pl.col("refused_pos")),
            pl.when(
                (pl.col("execution_pos") > pl.col("confirm_pos"))
                & (pl.col("execution_pos") < pl.col("finish_pos").fill_null(INF))
            ).then(pl.col("execution_pos")),
        ),
    )


def _verdicts(per_inf: pl.DataFrame, slots: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Verdicts: one per address per inference (validations and votes share the bitmap)."""
    return (
        per_inf.filter(KIND.is_in(["validation", "vote"]))
        .join(slots, left_on=["escrow_id", "slot"], right_on=["escrow_id", "slot_id"], how="left")
        .join(
            facts.select("escrow_id", "inference_id", "finish_pos", "errormiss_pos"),
            on=["escrow_id", "inference_id"],
            how="left",
        )
        .sort("escrow_id", "inference_id", "pos")
        .with_columns(
            weight=pl.col("address_slots").fill_null(1),
            first_of_address=pl.col("pos")
            .rank("ordinal")
            .over("escrow_id", "inference_id", pl.col("address").fill_null(pl.col("slot").cast(pl.String)))
            == 1,
        )
    )


def _with_challenge(facts: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """The first invalid validation while Finished challenges: its position and the challenger's weight,
    and where the Finished state ends."""
    challenge = (
        verdicts.filter(LIVE_VALIDATION & ~pl.col("valid").fill_null(False))
        .group_by("escrow_id", "inference_id")
        .agg(challenge_pos=pl.col("pos").min(), challenger_weight=pl.col("weight").sort_by("pos").first())
    )
    return (
        facts.join(challenge, on=["escrow_id", "inference_id"], how="left")
        .with_columns(
            # An applied error miss before any challenge ends the Finished state for good.
            challenge_pos=pl.when(pl.col("errormiss_pos").fill_null(INF) < pl.col("challenge_pos"))
            .then(None)
            .otherwise(pl.col("challenge_pos")),
        )
        .with_columns(
            end_finished=pl.min_horizontal(
                pl.col("challenge_pos").fill_null(INF), pl.col("errormiss_pos").fill_null(INF)
            ),
            challenger_weight=pl.when(pl.col("challenge_pos").is_not_null())
            .then(pl.col("challenger_weight"))
            .otherwise(0),
        )
    )


def _with_pre_valid(facts: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """The weight of the valid validations while Finished (they count in votes_valid)."""
    pre_valid = (
        verdicts.filter(LIVE_VALIDATION & pl.col("valid").fill_null(False) & (pl.col("pos") < pl.col("end_finished")))
        .group_by("escrow_id", "inference_id")
        .agg(pre_valid=pl.col("weight").sum())
    )
    return facts.join(pre_valid, on=["escrow_id", "inference_id"], how="left").with_columns(
        pl.col("pre_valid").fill_null(0)
    )


def _with_tally(facts: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """The tally after the challenge, verdict by verdict, once per rule set: the resolution (the first
    counted verdict past the threshold) and the totals of every counted verdict."""
    valid = pl.col("valid").fill_null(False)
    tally = (
        verdicts.filter(AFTER_CHALLENGE)
        .join(
            facts.select("escrow_id", "inference_id", "pre_valid", "challenger_weight"),
            on=["escrow_id", "inference_id"],
        )
        .sort("escrow_id", "inference_id", "pos")
    )
    columns, aggregates = [], []
    for rule, counts in COUNTS_AFTER_CHALLENGE.items():
        weight = pl.col("weight") * counts.cast(pl.Int64)
        cum_valid = pl.col("pre_valid") + (weight * valid.cast(pl.Int64)).cum_sum().over("escrow_id", "inference_id")
        cum_invalid = pl.col("challenger_weight") + (weight * (~valid).cast(pl.Int64)).cum_sum().over(
            "escrow_id", "inference_id"
        )
        columns += [cum_valid.alias(ruled("cum_valid", rule)), cum_invalid.alias(ruled("cum_invalid", rule))]
        invalidates = pl.col(ruled("cum_invalid", rule)) > pl.col("vote_threshold")
        resolves = counts & (invalidates | (pl.col(ruled("cum_valid", rule)) > pl.col("vote_threshold")))
        # Rows keep their order (by position) within each group.
        aggregates += [
            pl.col("pos").filter(resolves).first().alias(ruled("resolved_pos", rule)),
            pl.col("nonce").filter(resolves).first().alias(ruled("resolved_nonce", rule)),
            invalidates.filter(resolves).first().alias(ruled("invalidates", rule)),
            pl.col(ruled("cum_valid", rule)).filter(resolves).first().alias(ruled("res_valid", rule)),
            pl.col(ruled("cum_invalid", rule)).filter(resolves).first().alias(ruled("res_invalid", rule)),
            pl.col(ruled("cum_valid", rule)).last().alias(ruled("all_valid", rule)),
            pl.col(ruled("cum_invalid", rule)).last().alias(ruled("all_invalid", rule)),
        ]
    per_inference = tally.with_columns(columns).group_by("escrow_id", "inference_id").agg(aggregates)
    return facts.join(per_inference, on=["escrow_id", "inference_id"], how="left").with_columns(
        pl.when(pl.col(ruled("resolved_pos", rule)).is_null())
        .then(None)
        .when(pl.col(ruled("invalidates", rule)))
        .then(pl.lit("invalidated"))
        .otherwise(pl.lit("validated"))
        .alias(ruled("outcome", rule))
        for rule in RULE_SETS
    )


def _inferences(facts: pl.DataFrame) -> pl.DataFrame:
    """Each inference's status, drain, miss and vote totals from its facts."""
    challenged_now = pl.col("challenge_pos").is_not_null()
    no_finish = pl.col("finish_pos").is_null()
    timed_out = pl.col("timeout_pos").is_not_null() & (pl.col("timeout_pos") < pl.col("finish_pos").fill_null(INF))
    drained = (
        no_finish
        & ~timed_out
        & pl.col("start_pos").is_not_null()
        & pl.col("settlement_nonce").is_not_null()
        & (pl.col("start_pos") < (pl.col("settlement_nonce") + 1) * 1_000_000)
    )
    error_missed = pl.col("errormiss_pos").is_not_null() & ~challenged_now & ~no_finish
    facts = facts.with_columns(
        drained=drained,
        pre_drain_status=pl.when(drained).then(
            pl.when(pl.col("confirm_pos").is_not_null()).then(pl.lit("started")).otherwise(pl.lit("pending"))
        ),
        miss_kind=pl.when(timed_out & (pl.col("timeout_pos") == pl.col("refused_pos")))
        .then(pl.lit("refused"))
        .when(timed_out)
        .then(pl.lit("execution"))
        .when(error_missed)
        .then(pl.lit("error_miss")),
        miss_nonce=pl.when(timed_out)
        .then(pl.col("timeout_pos") // 1_000_000)
        .when(error_missed)
        .then(pl.col("errormiss_pos") // 1_000_000),
    ).with_columns(
        finished=~no_finish,
        challenged=pl.col("invalid_validation"),
        executor_slot=pl.col("inference_id") % pl.col("group_size"),
        **{k: v for rule in RULE_SETS for k, v in _ruled_outcome(rule, timed_out, no_finish, challenged_now).items()},
    )
    return facts.select(
        "escrow_id",
        "inference_id",
        "model",
        "executor_slot",
        "challenged",
        "finished",
        "drained",
        "pre_drain_status",
        "miss_kind",
        "miss_nonce",
        "settlement_nonce",
        "input_tokens",
        "output_tokens",
        "started_at",
        "confirmed_at",
        "start_nonce",
        "finish_slot",
        *[ruled(c, r) for c in RULED_INFERENCE_COLUMNS for r in RULE_SETS],
    )


def _ruled_outcome(rule: str, timed_out: pl.Expr, no_finish: pl.Expr, challenged_now: pl.Expr) -> dict[str, pl.Expr]:
    """Status, vote totals, resolution nonce and `cleared` as the rule set `rule` gives them."""
    outcome = pl.col(ruled("outcome", rule))
    # A drained record keeps the status the log last gave it; derive.py applies the drain outcome.
    status = (
        pl.when(timed_out)
        .then(pl.lit("timed_out"))
        .when(no_finish & pl.col("confirm_pos").is_not_null())
        .then(pl.lit("started"))
        .when(no_finish)
        .then(pl.lit("pending"))
        .when(pl.col("errormiss_pos").is_not_null() & ~challenged_now)
        .then(pl.lit("timed_out"))
        .when(challenged_now & outcome.is_not_null())
        .then(outcome)
        .when(challenged_now)
        .then(pl.lit("challenged"))
        .otherwise(pl.lit("finished"))
    )
    return {
        ruled("status", rule): status,
        ruled("votes_valid", rule): pl.when(outcome.is_not_null())
        .then(pl.col(ruled("res_valid", rule)))
        .when(pl.col(ruled("all_valid", rule)).is_not_null())
        .then(pl.col(ruled("all_valid", rule)))
        .otherwise(pl.col("pre_valid")),
        ruled("votes_invalid", rule): pl.when(outcome.is_not_null())
        .then(pl.col(ruled("res_invalid", rule)))
        .when(pl.col(ruled("all_invalid", rule)).is_not_null())
        .then(pl.col(ruled("all_invalid", rule)))
        .otherwise(pl.col("challenger_weight")),
        ruled("resolved_nonce", rule): pl.col(ruled("resolved_nonce", rule)),
        ruled("cleared", rule): pl.col("invalid_validation") & (status == "validated"),
    }


def _verdict_rows(verdicts: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Every validation and vote, per rule set `counted` when it changed the tally and `after_resolution`
    when it came after the inference was resolved."""
    before_challenge = (KIND == "validation") & LIVE_VALIDATION & (pl.col("pos") <= pl.col("end_finished"))
    ruled_flags = {}
    for rule, counts in COUNTS_AFTER_CHALLENGE.items():
        resolved = pl.col(ruled("resolved_pos", rule))
        in_tally = AFTER_CHALLENGE & counts & (pl.col("pos") <= resolved.fill_null(INF))
        ruled_flags[ruled("counted", rule)] = (before_challenge | in_tally).fill_null(False)
        ruled_flags[ruled("after_resolution", rule)] = (pl.col("pos") > resolved).fill_null(False)
    return verdicts.join(
        facts.select("escrow_id", "inference_id", "group_size", *[ruled("resolved_pos", r) for r in RULE_SETS]),
        on=["escrow_id", "inference_id"],
        how="left",
    ).select(
        "epoch_id",
        "escrow_id",
        "inference_id",
        "nonce",
        "tx_index",
        "kind",
        pl.col("address").alias("validator"),
        pl.col("slot").alias("validator_slot"),
        "valid",
        (pl.col("inference_id") % pl.col("group_size")).alias("executor_slot"),
        *[ruled_flags[ruled(c, r)].alias(ruled(c, r)) for c in RULED_VERDICT_COLUMNS for r in RULE_SETS],
    )


def _with_checkpoint(
    facts: pl.DataFrame, checkpoint: pl.DataFrame | None, esc: pl.DataFrame, first: pl.DataFrame
) -> pl.DataFrame:
    """Records live at the checkpoint whose start the log lacks (an escrow joined by import) start
    their replay in the checkpoint's state: Pending, Started or Finished just before the log begins
    (what the log holds between that point and the checkpoint comes first where it says more).
    Other statuses (challenged, terminal) are left to the store's own record (derive.py)."""
    if checkpoint is None or checkpoint.height == 0:
        return facts
    seed_pos = pl.min_horizontal("snapshot_nonce", pl.col("first_nonce") - 1) * 1_000_000 + 999_999
    seeds = (
        checkpoint.filter(pl.col("status").is_in([0, 1, 2]))
        .join(first, on="escrow_id", how="left")
        .join(esc.select("escrow_id", "group_size", "vote_threshold"), on="escrow_id", how="inner")
        .select(
            "escrow_id",
            "inference_id",
            "group_size",
            "vote_threshold",
            seed_start=seed_pos,
            seed_confirm=pl.when(pl.col("status") >= 1).then(seed_pos),
            seed_finish=pl.when(pl.col("status") == 2).then(seed_pos),
        )
    )
    known = facts.filter(pl.col("start_pos").is_not_null()).select("escrow_id", "inference_id")
    seeds = seeds.join(known, on=["escrow_id", "inference_id"], how="anti")
    merged = facts.join(seeds, on=["escrow_id", "inference_id"], how="full", coalesce=True)
    return merged.with_columns(
        start_pos=pl.coalesce("start_pos", "seed_start"),
        confirm_pos=pl.min_horizontal("confirm_pos", "seed_confirm"),
        finish_pos=pl.min_horizontal("finish_pos", "seed_finish"),
        invalid_validation=pl.col("invalid_validation").fill_null(False),
        group_size=pl.coalesce("group_size", "group_size_right"),
        vote_threshold=pl.coalesce("vote_threshold", "vote_threshold_right"),
    ).drop("seed_start", "seed_confirm", "seed_finish", "group_size_right", "vote_threshold_right")
