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
  challenges; later validations add nothing.
- MsgValidationVote (while Challenged, once per address, not by an address that
  already validated) adds weight; then votes_invalid > T → Invalidated, else
  votes_valid > T → Validated (votes_valid includes the pre-challenge
  validations). Votes after resolution are in the log but change nothing.
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

# Orders transactions within an escrow: nonce first, then position in the diff.
POS = (pl.col("nonce") * 1_000_000 + pl.col("tx_index")).alias("pos")
REFUSED, EXECUTION, ERROR = 1, 2, 3
INF = 2**62
KIND, ALIVE = pl.col("kind"), pl.col("in_life")  # in_life: before the settlement drain sealed the record
# A validation that counts: the address's first, while the record is Finished and live.
LIVE_VALIDATION = (KIND == "validation") & pl.col("first_of_address") & (pl.col("pos") > pl.col("finish_pos")) & ALIVE


def _first(cond: pl.Expr, value: str = "pos") -> pl.Expr:
    return pl.col(value).filter(cond).min()


def replay(
    txs: pl.DataFrame, escrows: pl.DataFrame, slots: pl.DataFrame, checkpoint: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (inferences, verdicts) for the escrows in `escrows`.

    txs: tx_log rows; escrows: escrow_id, group_size, vote_threshold, latest_nonce, and optionally
    finalize_nonce (the checkpoint's, used where the log lacks the finalize transaction);
    slots: escrow_id, slot_id, address, address_slots; checkpoint: the records live at each escrow's
    checkpoint (escrow_id, inference_id, snapshot_nonce, status code).
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
    return _inferences(facts), _verdict_rows(verdicts, facts)


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
    """The tally after the challenge, vote by vote: the resolution (the first vote past the threshold) and
    the totals of every vote."""
    votes = (
        verdicts.filter(
            (KIND == "vote") & pl.col("first_of_address") & (pl.col("pos") > pl.col("challenge_pos")) & ALIVE
        )
        .join(
            facts.select("escrow_id", "inference_id", "pre_valid", "challenger_weight"),
            on=["escrow_id", "inference_id"],
        )
        .sort("escrow_id", "inference_id", "pos")
        .with_columns(
            cum_valid=pl.col("pre_valid")
            + (pl.col("weight") * pl.col("valid").cast(pl.Int64)).cum_sum().over("escrow_id", "inference_id"),
            cum_invalid=pl.col("challenger_weight")
            + (pl.col("weight") * (~pl.col("valid")).cast(pl.Int64)).cum_sum().over("escrow_id", "inference_id"),
        )
        .with_columns(
            invalidates=pl.col("cum_invalid") > pl.col("vote_threshold"),
            validates=pl.col("cum_valid") > pl.col("vote_threshold"),
        )
    )
    resolution = (
        votes.filter(pl.col("invalidates") | pl.col("validates"))
        .group_by("escrow_id", "inference_id")
        .agg(
            resolved_pos=pl.col("pos").min(),
            resolved_nonce=pl.col("nonce").sort_by("pos").first(),
            outcome=pl.when(pl.col("invalidates").sort_by("pos").first())
            .then(pl.lit("invalidated"))
            .otherwise(pl.lit("validated")),
            res_valid=pl.col("cum_valid").sort_by("pos").first(),
            res_invalid=pl.col("cum_invalid").sort_by("pos").first(),
        )
    )
    tally = votes.group_by("escrow_id", "inference_id").agg(
        all_valid=pl.col("cum_valid").sort_by("pos").last(), all_invalid=pl.col("cum_invalid").sort_by("pos").last()
    )
    return facts.join(resolution, on=["escrow_id", "inference_id"], how="left").join(
        tally, on=["escrow_id", "inference_id"], how="left"
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
        # A drained record keeps the status the log last gave it; derive.py applies the drain outcome.
        status=pl.when(timed_out)
        .then(pl.lit("timed_out"))
        .when(no_finish & pl.col("confirm_pos").is_not_null())
        .then(pl.lit("started"))
        .when(no_finish)
        .then(pl.lit("pending"))
        .when(pl.col("errormiss_pos").is_not_null() & ~challenged_now)
        .then(pl.lit("timed_out"))
        .when(challenged_now & pl.col("outcome").is_not_null())
        .then(pl.col("outcome"))
        .when(challenged_now)
        .then(pl.lit("challenged"))
        .otherwise(pl.lit("finished")),
        votes_valid=pl.when(pl.col("outcome").is_not_null())
        .then(pl.col("res_valid"))
        .when(pl.col("all_valid").is_not_null())
        .then(pl.col("all_valid"))
        .otherwise(pl.col("pre_valid")),
        votes_invalid=pl.when(pl.col("outcome").is_not_null())
        .then(pl.col("res_invalid"))
        .when(pl.col("all_invalid").is_not_null())
        .then(pl.col("all_invalid"))
        .otherwise(pl.col("challenger_weight")),
        finished=~no_finish,
        challenged=pl.col("invalid_validation"),
        executor_slot=pl.col("inference_id") % pl.col("group_size"),
    )
    return facts.select(
        "escrow_id",
        "inference_id",
        "model",
        "executor_slot",
        "status",
        "challenged",
        "finished",
        "drained",
        "pre_drain_status",
        "miss_kind",
        "miss_nonce",
        "settlement_nonce",
        "votes_valid",
        "votes_invalid",
        "input_tokens",
        "output_tokens",
        "started_at",
        "confirmed_at",
        "resolved_nonce",
        "start_nonce",
        "finish_slot",
    ).with_columns(cleared=pl.col("challenged") & (pl.col("status") == "validated"))


def _verdict_rows(verdicts: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Every validation and vote, `counted` when it changed the tally and `after_resolution` when it came late."""
    counted = ((KIND == "validation") & LIVE_VALIDATION & (pl.col("pos") <= pl.col("end_finished"))) | (
        (KIND == "vote")
        & pl.col("first_of_address")
        & (pl.col("pos") > pl.col("challenge_pos"))
        & ALIVE
        & (pl.col("pos") <= pl.col("resolved_pos").fill_null(INF))
    )
    return verdicts.join(
        facts.select("escrow_id", "inference_id", "resolved_pos", "group_size"),
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
        counted.fill_null(False).alias("counted"),
        (pl.col("pos") > pl.col("resolved_pos")).fill_null(False).alias("after_resolution"),
        (pl.col("inference_id") % pl.col("group_size")).alias("executor_slot"),
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
