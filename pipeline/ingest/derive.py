"""Recompute the derived tables (d_*) of a set of escrows from what the warehouse holds.

Called inside the ingest transaction of each chunk, so derived rows always match
the raw rows they come from. Only escrows touched by the chunk are recomputed:
an ingest costs what is new, not what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.ingest.runs import insert
from pipeline.transforms import rule_sets
from pipeline.transforms.clock import to_utc_datetime_expr, unix_seconds_expr
from pipeline.transforms.escrows import escrow_frames
from pipeline.transforms.replay import replay
from pipeline.warehouse.database import fetch_frame

STATUS_NAMES = ["pending", "started", "finished", "challenged", "validated", "invalidated", "timed_out"]


@dataclass
class DeriveOutcome:
    escrows: int = 0
    inferences: int = 0
    disagreements: int = 0
    quarantined: list[tuple[str, str, str]] = field(default_factory=list)  # (table, key, reason)
    # Per escrow: the replay rule set used and how it was chosen (rule_sets.CHOICE_SCHEMA columns).
    rule_sets: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=rule_sets.CHOICE_SCHEMA))


def _read(con: duckdb.DuckDBPyConnection, name: str) -> pl.DataFrame:
    return fetch_frame(con, sql_text(f"warehouse/derive/{name}.sql"))


def event_times(diffs: pl.DataFrame, txs: pl.DataFrame) -> pl.DataFrame:
    """Event time per (escrow, nonce): `created_at` when the escrow sets it, else the nonce clock.

    The nonce clock of nonce n is the `started_at` of the latest MsgStartInference at
    or before n in the same escrow (docs/data-model.md, event time); nonces before the first start
    take the first start's time.
    """
    starts = (
        txs.filter(pl.col("kind") == "start")
        .group_by("escrow_id", "nonce")
        .agg(start_s=unix_seconds_expr(pl.col("started_at")).max())
    )
    return (
        diffs.select("escrow_id", "nonce", "created_at")
        .join(starts, on=["escrow_id", "nonce"], how="left")
        .sort("escrow_id", "nonce")
        .with_columns(
            clock=pl.col("start_s").forward_fill().over("escrow_id"),
            created_s=unix_seconds_expr("created_at"),
        )
        .with_columns(clock=pl.col("clock").backward_fill().over("escrow_id"))
        .with_columns(event_at=to_utc_datetime_expr(pl.coalesce("created_s", "clock")))
        .select("escrow_id", "nonce", "event_at")
    )


def derive_escrows(con: duckdb.DuckDBPyConnection, escrow_ids: list[str]) -> DeriveOutcome:
    """Replace the derived rows of `escrow_ids` (must run inside the caller's transaction)."""
    outcome = DeriveOutcome()
    if not escrow_ids:
        return outcome
    chunk = pl.DataFrame({"escrow_id": escrow_ids}, schema={"escrow_id": pl.String})
    con.register("chunk_escrows", chunk.to_arrow())
    try:
        sessions = _read(con, "sessions")
        frames = escrow_frames(sessions, _read(con, "escrow_cache"), _read(con, "models"))
        outcome.quarantined += [("sessions", key, reason) for key, reason in frames.quarantined]
        txs = _read(con, "txs")
        diffs = _read(con, "diffs")
        times = event_times(diffs, txs)
        sealed = _read(con, "sealed")
        live = _read(con, "snapshot_live")
        checkpoints = _read(con, "snapshots")
        escrows = _escrows(frames.escrows, txs, diffs, checkpoints)
        inferences, verdicts, choice = _replayed(con, txs, escrows, frames.slots, live, sealed)
        del txs, diffs  # the replay's inputs: freed before the joins below, where the ingest peaks
        inferences, disagreements = _with_sealed(inferences, sealed, live, escrows, frames.slots)
        # Records still live in a checkpoint taken in the Settlement phase were left as they were by the
        # drain (builds whose drain did not seal them).
        settled_live = live.join(
            checkpoints.filter(pl.col("checkpoint_phase") == 2).select("escrow_id"), on="escrow_id", how="semi"
        ).select("escrow_id", "inference_id", checkpoint_status="status")
        inferences, drain_disagreements = drain_outcomes(
            inferences.join(settled_live, on=["escrow_id", "inference_id"], how="left"), _read(con, "sealed_conflicts")
        )
        disagreements = pl.concat([disagreements, drain_disagreements])
        inferences = _with_times(inferences, times)
        validations = _validations(verdicts, times, frames.slots, inferences)
        con.execute(sql_text("warehouse/derive/clear.sql"))
        insert(con, "d_escrows", escrows)
        insert(con, "d_escrow_slots", frames.slots)
        insert(con, "d_tx_times", times)
        insert(con, "d_inferences", inferences)
        insert(con, "d_validations", validations)
        insert(con, "d_replay_disagreements", disagreements)
        insert(con, "d_escrow_rule_sets", _rule_set_rows(choice, escrows))
        attribute_builds(con, "chunk_escrows")
        outcome.escrows = escrows.height
        outcome.inferences = inferences.height
        outcome.disagreements = disagreements.height
        outcome.rule_sets = choice.select(*rule_sets.CHOICE_SCHEMA)
    finally:
        con.unregister("chunk_escrows")
    return outcome


def _replayed(
    con: duckdb.DuckDBPyConnection,
    txs: pl.DataFrame,
    escrows: pl.DataFrame,
    slots: pl.DataFrame,
    live: pl.DataFrame,
    sealed: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The replay's inferences and verdicts under each escrow's rule set (the one whose outcomes reproduce
    its own seals: pipeline/transforms/rule_sets.py), and the choice."""
    inferences, verdicts = replay(
        txs, escrows, slots, live.select("escrow_id", "inference_id", "snapshot_nonce", "status")
    )
    choice = rule_sets.choose(inferences, sealed, escrows, _read(con, "rule_sets"))
    inferences, verdicts = rule_sets.apply(inferences, verdicts, choice)
    return inferences, verdicts, choice


def _escrows(escrows: pl.DataFrame, txs: pl.DataFrame, diffs: pl.DataFrame, checkpoints: pl.DataFrame) -> pl.DataFrame:
    """The escrows with their finalize nonce and the source of their event times."""
    with_created_at = diffs.filter(pl.col("created_at") > 0)["escrow_id"].unique().implode()
    # The finalize nonce from the log, else from the checkpoint (an escrow joined by import after
    # its finalize has no diff holding the finalize transaction).
    return (
        escrows.join(
            txs.filter(pl.col("kind") == "finalize").group_by("escrow_id").agg(finalize_nonce=pl.col("nonce").min()),
            on="escrow_id",
            how="left",
        )
        .join(checkpoints.drop("checkpoint_phase"), on="escrow_id", how="left")
        .with_columns(
            finalize_nonce=pl.coalesce("finalize_nonce", "checkpoint_finalize_nonce"),
            time_source=pl.when(pl.col("escrow_id").is_in(with_created_at))
            .then(pl.lit("created_at"))
            .otherwise(pl.lit("nonce_clock")),
        )
        .drop("checkpoint_finalize_nonce")
    )


def rule_set_lines(choices: list[dict], every: bool = False) -> list[str]:
    """Summary lines of the replay rule sets the derived escrows follow: one line of counts, one line per escrow
    whose seals no rule set reproduces, and with `every` one line per escrow."""
    if not choices:
        return []
    counts: dict[str, dict[str, int]] = {}
    for c in choices:
        by = counts.setdefault(c["rule_set"], {})
        by[c["chosen_by"]] = by.get(c["chosen_by"], 0) + 1
    parts = [
        f"{sum(by.values()):,} {name} ({', '.join(f'{how} {n:,}' for how, n in sorted(by.items()))})"
        for name, by in sorted(counts.items())
    ]
    unreproduced = [c for c in choices if c["chosen_by"] == rule_sets.NONE_REPRODUCES]
    lines = [
        f"replay rule sets (escrows): {'; '.join(parts)}; seals reproduced by no rule set: {len(unreproduced):,} "
        "escrows (view escrow_rule_sets)"
    ]
    for c in sorted(unreproduced if not every else choices, key=lambda c: c["escrow_id"]):
        lines.append(f"  escrow {c['escrow_id']}: {_rule_set_said(c)}")
    return lines


def _rule_set_said(c: dict) -> str:
    """How one escrow's rule set was chosen, in words."""
    if c["chosen_by"] == rule_sets.NONE_REPRODUCES:
        return (
            f"no rule set reproduces its {c['seals_compared']:,} seals (best {c['best_rule_set']}, "
            f"{c['best_reproduced']:,}); {c['rule_set']} used, flagged"
        )
    if c["chosen_by"] in (rule_sets.ASSUMED, rule_sets.ASSUMED_VERSION):
        return f"{c['rule_set']}, {c['chosen_by']} (no seals to compare)"
    return f"{c['rule_set']}, {c['seals_reproduced']:,} of {c['seals_compared']:,} seals reproduced ({c['chosen_by']})"


def _rule_set_rows(choice: pl.DataFrame, escrows: pl.DataFrame) -> pl.DataFrame:
    """d_escrow_rule_sets: the choice with the escrow's epoch and devshard version."""
    return choice.join(escrows.select("escrow_id", "epoch_id", "version"), on="escrow_id", how="left").select(
        "epoch_id", "escrow_id", "version", *[c for c in rule_sets.CHOICE_SCHEMA if c != "escrow_id"]
    )


def _validations(
    verdicts: pl.DataFrame, times: pl.DataFrame, slots: pl.DataFrame, inferences: pl.DataFrame
) -> pl.DataFrame:
    """The verdicts with their event time, their executor's address, and the judged inference's outcome."""
    return (
        verdicts.join(times, on=["escrow_id", "nonce"], how="left")
        .join(
            slots.select("escrow_id", pl.col("slot_id").alias("executor_slot"), pl.col("address").alias("executor")),
            on=["escrow_id", "executor_slot"],
            how="left",
        )
        .drop("executor_slot")
        # The judged inference's outcome and start travel with each verdict, so evidence
        # tables filter and count verdicts without joining the inferences back.
        .join(
            inferences.select(
                "escrow_id",
                "inference_id",
                pl.col("status").alias("final_status"),
                pl.col("started_at").alias("inference_started_at"),
            ),
            on=["escrow_id", "inference_id"],
            how="left",
        )
    )


def attribute_builds(con: duckdb.DuckDBPyConnection, escrows_relation: str) -> None:
    """Materialise the build columns of the escrows listed in the named relation (column escrow_id)."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW attribute_escrows AS SELECT escrow_id FROM {escrows_relation}")
    con.execute(sql_text("warehouse/builds/attribute.sql"))


def _with_times(inferences: pl.DataFrame, times: pl.DataFrame) -> pl.DataFrame:
    return (
        inferences.join(times.rename({"nonce": "start_nonce"}), on=["escrow_id", "start_nonce"], how="left")
        .with_columns(
            started_at=to_utc_datetime_expr(unix_seconds_expr("started_at")),
            confirmed_at=to_utc_datetime_expr(unix_seconds_expr("confirmed_at")),
            event_at=pl.coalesce("event_at", to_utc_datetime_expr(unix_seconds_expr("started_at"))),
        )
        .drop("start_nonce", "finish_slot")
    )


def _status_name(code: str) -> pl.Expr:
    return pl.col(code).replace_strict(dict(enumerate(STATUS_NAMES)), default=None, return_dtype=pl.String)


def _with_sealed(
    inferences: pl.DataFrame, sealed: pl.DataFrame, live: pl.DataFrame, escrows: pl.DataFrame, slots: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Attach sealed-row facts, add inferences known only from sealed rows or from the checkpoint's
    live records, list disagreements."""
    merged = _with_partial_records(_with_store_facts(_joined_records(inferences, sealed, live, escrows)))
    merged = merged.join(
        slots.select("escrow_id", pl.col("slot_id").alias("executor_slot"), pl.col("address").alias("executor")),
        on=["escrow_id", "executor_slot"],
        how="left",
    )
    return merged.select(*INFERENCE_COLUMNS), _sealed_disagreements(merged)


INFERENCE_COLUMNS = (
    "epoch_id",
    "escrow_id",
    "inference_id",
    "model",
    "executor",
    "executor_slot",
    "status",
    "sealed",
    "challenged",
    "cleared",
    "finished",
    "drained",
    "pre_drain_status",
    "miss_kind",
    "miss_nonce",
    "votes_valid",
    "votes_invalid",
    "input_tokens",
    "output_tokens",
    "started_at",
    "confirmed_at",
    "resolved_nonce",
    "sealed_nonce",
    "sealed_status",
    "obs_present",
    "in_diff_log",
    "start_nonce",
    "finish_slot",
)
# A row without obs_present comes from the old 3-column sealed_inferences (id and seal nonce only):
# it is bare, like obs_present = false (docs/sources.md, session store migrations).
_RICH_SEAL = (pl.col("sealed_nonce").fill_null(0) > 0) & pl.col("obs_present").fill_null(False)


def _joined_records(
    inferences: pl.DataFrame, sealed: pl.DataFrame, live: pl.DataFrame, escrows: pl.DataFrame
) -> pl.DataFrame:
    """The replayed inferences fully joined with the sealed rows and the checkpoint's live records, with
    their escrow's epoch, group size and finalize nonce."""
    sealed = sealed.with_columns(sealed_status_name=_status_name("sealed_status"))
    merged = inferences.with_columns(in_diff_log=pl.lit(True)).join(
        sealed.select(
            "escrow_id",
            "inference_id",
            "epoch_id",
            "sealed_nonce",
            "obs_present",
            "sealed_status",
            "sealed_status_name",
            "sealed_executor_slot",
            "sealed_votes_valid",
            "sealed_votes_invalid",
            "sealed_model",
            "sealed_input_tokens",
            "sealed_output_tokens",
            "sealed_started_at",
            "sealed_confirmed_at",
        ),
        on=["escrow_id", "inference_id"],
        how="full",
        coalesce=True,
    )
    # Records still live at the checkpoint. They matter where the diff log lacks their start: an
    # escrow joined by import has no diffs before imported_nonce, and its live records at the import
    # are known only from the checkpoint (and from their later transactions).
    merged = merged.join(
        live.select(
            "escrow_id",
            "inference_id",
            _status_name("status").alias("live_status"),
            pl.col("executor_slot").alias("live_executor_slot"),
            pl.col("model").alias("live_model"),
            pl.col("input_tokens").alias("live_input_tokens"),
            pl.col("output_tokens").alias("live_output_tokens"),
            pl.col("started_at").alias("live_started_at"),
            pl.col("confirmed_at").alias("live_confirmed_at"),
            pl.col("votes_valid").alias("live_votes_valid"),
            pl.col("votes_invalid").alias("live_votes_invalid"),
        ),
        on=["escrow_id", "inference_id"],
        how="full",
        coalesce=True,
    )
    merged = merged.join(
        escrows.select("escrow_id", pl.col("epoch_id").alias("escrow_epoch"), "group_size", "finalize_nonce"),
        on="escrow_id",
        how="inner",
    )
    return merged


def _with_store_facts(merged: pl.DataFrame) -> pl.DataFrame:
    """`store_*` columns: the store's own record of each fact (full sealed row, else live record)."""
    rich_seal = _RICH_SEAL

    def store_fact(fact: str) -> pl.Expr:
        """The store's own record of a fact: its full sealed row, else the checkpoint's live record."""
        return pl.when(rich_seal).then(pl.col(f"sealed_{fact}")).otherwise(pl.col(f"live_{fact}"))

    merged = merged.with_columns(
        store_status=pl.when(rich_seal).then(pl.col("sealed_status_name")).otherwise(pl.col("live_status")),
        **{
            f"store_{f}": store_fact(f)
            for f in (
                "executor_slot",
                "model",
                "input_tokens",
                "output_tokens",
                "started_at",
                "confirmed_at",
                "votes_valid",
                "votes_invalid",
            )
        },
    )
    return merged


def _with_partial_records(merged: pl.DataFrame) -> pl.DataFrame:
    """Records whose start the log lacks take the store's record; drain-sealed records are marked."""
    rich_seal = _RICH_SEAL
    # Without its start in the log (an escrow joined by import has no diffs before imported_nonce, and
    # inferences sealed before it have no diffs at all) the replay saw only part of the record's life;
    # the store's record, which carries the whole of it, knows better.
    partial = pl.col("start_nonce").is_null() & pl.col("store_status").is_not_null()
    in_log = pl.col("in_diff_log").fill_null(False)
    rank = {name: i for i, name in enumerate(STATUS_NAMES)}
    further = pl.col("status").replace_strict(rank, default=-1, return_dtype=pl.Int64) > pl.col(
        "store_status"
    ).replace_strict(rank, default=-1, return_dtype=pl.Int64)
    store_finished = pl.col("store_status").is_in(["finished", "challenged", "validated", "invalidated"]) | (
        (pl.col("store_status") == "timed_out") & (pl.col("store_output_tokens").fill_null(0) > 0)
    )
    # Sealed by the settlement drain although the log does not hold the record: sealed while Pending or
    # Started (the "unchanged" rule), or Finished at the settlement nonce without the tokens a finish
    # reports (paid at reserved cost). A Pending record refunded by the drain looks like a refusal
    # before the import and stays one.
    drain_sealed = (
        partial
        & rich_seal
        & (
            pl.col("sealed_status").is_in([0, 1])
            | (
                (pl.col("sealed_status") == 2)
                & (pl.col("sealed_input_tokens") == 0)
                & (pl.col("sealed_output_tokens") == 0)
                & (pl.col("sealed_nonce") == pl.col("finalize_nonce") + pl.col("group_size"))
            )
        )
    )
    drained_now = pl.col("drained").fill_null(False) | drain_sealed.fill_null(False)
    merged = merged.with_columns(
        epoch_id=pl.coalesce("escrow_epoch", "epoch_id"),
        in_diff_log=in_log,
        # A live record's later transactions may have moved it past the checkpoint; a seal is final.
        status=pl.when(partial)
        .then(pl.when(~rich_seal & in_log & further).then(pl.col("status")).otherwise(pl.col("store_status")))
        .otherwise(pl.col("status")),
        **{
            f: pl.when(partial).then(pl.coalesce(f, f"store_{f}")).otherwise(pl.col(f))
            for f in ("model", "input_tokens", "output_tokens", "started_at", "confirmed_at")
        },
        **{
            f: pl.when(partial)
            .then(pl.max_horizontal(pl.col(f).fill_null(0), pl.col(f"store_{f}").fill_null(0)))
            .otherwise(pl.col(f))
            for f in ("votes_valid", "votes_invalid")
        },
        executor_slot=pl.coalesce(
            "executor_slot", "store_executor_slot", pl.col("inference_id") % pl.col("group_size")
        ),
        sealed=pl.col("sealed_nonce").fill_null(0) > 0,
        challenged=pl.col("challenged").fill_null(False)
        | (
            partial
            & (
                (pl.col("store_votes_invalid").fill_null(0) > 0)
                | pl.col("store_status").is_in(["challenged", "invalidated"])
            )
        ),
        cleared=pl.col("cleared").fill_null(False),
        # A record the drain paid is Finished in the store without a finish transaction: not an answer.
        finished=pl.col("finished").fill_null(False) | (partial & store_finished & ~drained_now),
        drained=drained_now,
        pre_drain_status=pl.coalesce(
            "pre_drain_status",
            pl.when(drain_sealed).then(
                pl.when(pl.col("sealed_confirmed_at").fill_null(0) > 0)
                .then(pl.lit("started"))
                .otherwise(pl.lit("pending"))
            ),
        ),
    ).with_columns(
        cleared=pl.col("cleared") | (partial & pl.col("challenged") & (pl.col("status") == "validated")),
        # A timeout the log does not hold: after a finish an error miss, after a receipt an execution
        # timeout, else a refusal.
        miss_kind=pl.when(
            pl.col("miss_kind").is_null() & partial & (pl.col("status") == "timed_out") & ~pl.col("drained")
        )
        .then(
            pl.when(pl.col("finished"))
            .then(pl.lit("error_miss"))
            .when(pl.col("confirmed_at").fill_null(0) > 0)
            .then(pl.lit("execution"))
            .otherwise(pl.lit("refused"))
        )
        .otherwise(pl.col("miss_kind")),
    )
    return merged


def _sealed_disagreements(merged: pl.DataFrame) -> pl.DataFrame:
    """Where the replay and the real, full seals disagree, and finish slots that are not the executor's."""
    rich = pl.col("obs_present").fill_null(False)
    # Compare only real seals with full records (bare rows and live obs rows carry defaults).
    # A drained record's final status is the drain's doing (checked in drain_outcomes), not the log's.
    comparable = merged.filter(
        pl.col("in_diff_log")
        & pl.col("start_nonce").is_not_null()
        & (pl.col("sealed_nonce").fill_null(0) > 0)
        & rich
        & ~pl.col("drained")
    )
    checks = {
        "status": ("status", "sealed_status_name"),
        "votes_valid": ("votes_valid", "sealed_votes_valid"),
        "votes_invalid": ("votes_invalid", "sealed_votes_invalid"),
        "executor_slot": ("executor_slot", "sealed_executor_slot"),
        "output_tokens": ("output_tokens", "sealed_output_tokens"),
    }
    parts = []
    for name, (replayed, stored) in checks.items():
        r = pl.col(replayed).cast(pl.String)
        s = pl.col(stored).cast(pl.String)
        mask = r.fill_null("∅") != s.fill_null("∅")
        if name != "status":  # a column the copy's schema lacks (NULL in every row) cannot disagree
            mask = mask & s.is_not_null()
        if name == "output_tokens":
            mask = mask & pl.col("finished")
        parts.append(
            comparable.filter(mask).select(
                "epoch_id",
                "escrow_id",
                "inference_id",
                pl.lit(name).alias("field"),
                r.alias("replayed"),
                s.alias("sealed"),
            )
        )
    # The finish transaction names its executor slot too; it must be inference_id mod N.
    parts.append(
        merged.filter(pl.col("finish_slot").is_not_null() & (pl.col("finish_slot") != pl.col("executor_slot"))).select(
            "epoch_id",
            "escrow_id",
            "inference_id",
            pl.lit("finish_executor_slot").alias("field"),
            pl.col("executor_slot").cast(pl.String).alias("replayed"),
            pl.col("finish_slot").cast(pl.String).alias("sealed"),
        )
    )
    disagreements = pl.concat(parts)
    return disagreements


# What a full sealed row of a drained record says the drain did: sealed as it was (0 pending,
# 1 started), refunded (6 timed out) or paid (2 finished). Anything else is not a drain outcome.
DRAIN_OUTCOME_BY_SEALED_STATUS = {0: "unchanged", 1: "unchanged", 6: "refunded", 2: "paid"}
STATUS_AFTER_DRAIN = {"refunded": "timed_out", "paid": "finished"}


# A drained record with a full sealed row: its sealed status shows the drain's outcome.
_OBSERVED_ROW = (
    pl.col("drained")
    & (pl.col("sealed_nonce").fill_null(0) > 0)
    & pl.col("obs_present").fill_null(False)
    & pl.col("sealed_status").is_not_null()
)
_PENDING = pl.col("pre_drain_status") == "pending"


def drain_outcomes(inferences: pl.DataFrame, conflicts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`drain_outcome` and final status of the drained records, and the disagreements about them.

    Every host of one escrow applies the same drain rule (it changes the state root), and the rule
    is one of three: everything sealed unchanged; Pending refunded (timed out) and Started paid;
    or both paid. Full sealed rows of drained records show which one; a record whose row is bare or
    missing takes the outcome the escrow's rule gives its pre-drain status. Where the rows of one
    escrow contradict each other, or two copies disagree about a record's seal, the contradiction is
    listed and the outcome is left NULL (unknown) rather than resolved by newest-wins.
    """
    observed_row, pending = _OBSERVED_ROW, _PENDING
    if "checkpoint_status" not in inferences.columns:
        inferences = inferences.with_columns(checkpoint_status=pl.lit(None, pl.Int64))
    # Without a full sealed row, a record still live in the settlement checkpoint in its pre-drain
    # status shows the drain left it unchanged.
    live_unchanged = pl.col("drained") & (pl.col("checkpoint_status") == pl.when(pending).then(0).otherwise(1))
    frame = _observed_drains(inferences, live_unchanged)
    rules = _drain_rules(frame)
    frame = frame.join(rules, on="escrow_id", how="left")
    conflicted = conflicts.select("escrow_id", "inference_id").unique().with_columns(copies_disagree=pl.lit(True))
    frame = frame.join(conflicted, on=["escrow_id", "inference_id"], how="left").with_columns(
        pl.col("copies_disagree").fill_null(False)
    )
    by_rule = (
        pl.when(pl.col("contradicts"))
        .then(None)
        .when(pl.col("unchanged"))
        .then(pl.lit("unchanged"))
        .when(pl.col("refund"))
        .then(pl.when(pending).then(pl.lit("refunded")).otherwise(pl.lit("paid")))
        .when(pl.col("pay_pending"))
        .then(pl.lit("paid"))
        .when(pl.col("pay_started") & ~pending)
        .then(pl.lit("paid"))
    )
    outcome = (
        pl.when(~pl.col("drained") | pl.col("copies_disagree"))
        .then(None)
        .when(pl.col("observed").is_in(["unchanged", "refunded", "paid"]) & ~pl.col("contradicts").fill_null(False))
        .then(pl.col("observed"))
        .otherwise(by_rule)
    )
    frame = frame.with_columns(drain_outcome=outcome).with_columns(
        # status stays what the store says; without a full sealed row, what the drain made of it.
        status=pl.when(~pl.col("drained"))
        .then(pl.col("status"))
        .when(observed_row)
        .then(_status_name("sealed_status"))
        .otherwise(
            pl.coalesce(
                pl.col("drain_outcome").replace_strict(STATUS_AFTER_DRAIN, default=None, return_dtype=pl.String),
                pl.col("pre_drain_status"),
            )
        ),
    )
    disagreements = _drain_disagreements(frame, conflicts)
    keep = [c for c in inferences.columns if c not in ("obs_present", "checkpoint_status")] + ["drain_outcome"]
    return frame.select(keep), disagreements


def _observed_drains(inferences: pl.DataFrame, live_unchanged: pl.Expr) -> pl.DataFrame:
    """`observed`: the drain outcome a record's own full sealed row (or its live checkpoint record) shows."""
    code, observed_row, pending = pl.col("sealed_status"), _OBSERVED_ROW, _PENDING
    return inferences.with_columns(
        observed=pl.when(observed_row)
        .then(code.replace_strict(DRAIN_OUTCOME_BY_SEALED_STATUS, default="unexpected", return_dtype=pl.String))
        .when(live_unchanged)
        .then(pl.lit("unchanged")),
    ).with_columns(
        # The outcome must fit the record: unchanged keeps the pre-drain status, and only a Pending
        # record can be refunded.
        observed=pl.when(
            ((pl.col("observed") == "unchanged") & (pl.col("sealed_status") != pl.when(pending).then(0).otherwise(1)))
            | ((pl.col("observed") == "refunded") & ~pending)
        )
        .then(pl.lit("unexpected"))
        .otherwise(pl.col("observed")),
    )


def _drain_rules(frame: pl.DataFrame) -> pl.DataFrame:
    """Per escrow, which drain rule its observed outcomes show, and whether they contradict each other."""
    pending = _PENDING
    return (
        frame.filter(pl.col("observed").is_not_null())
        .group_by("escrow_id")
        .agg(
            unchanged=(pl.col("observed") == "unchanged").any(),
            refund=((pl.col("observed") == "refunded") & pending).any(),
            pay_pending=((pl.col("observed") == "paid") & pending).any(),
            pay_started=((pl.col("observed") == "paid") & ~pending).any(),
        )
        .with_columns(
            contradicts=(
                pl.col("unchanged").cast(pl.Int8) + pl.col("refund").cast(pl.Int8) + pl.col("pay_pending").cast(pl.Int8)
                > 1
            )
            | (pl.col("unchanged") & pl.col("pay_started")),
        )
    )


def _drain_disagreements(frame: pl.DataFrame, conflicts: pl.DataFrame) -> pl.DataFrame:
    """Drained records whose outcome is unexpected or contradicted, and drained records copies disagree on."""
    unexpected = frame.filter(
        (pl.col("observed") == "unexpected") | (pl.col("observed").is_not_null() & pl.col("contradicts"))
    )
    copies = conflicts.join(
        frame.filter(pl.col("drained")).select("escrow_id", "inference_id", "epoch_id"),
        on=["escrow_id", "inference_id"],
        how="inner",
    )
    disagreements = pl.concat(
        [
            unexpected.select(
                "epoch_id",
                "escrow_id",
                "inference_id",
                pl.lit("drain_outcome").alias("field"),
                pl.concat_str(pl.lit("drained while "), pl.col("pre_drain_status")).alias("replayed"),
                pl.concat_str(
                    pl.lit("sealed_status "),
                    pl.col("sealed_status").cast(pl.String),
                    pl.when(pl.col("contradicts"))
                    .then(pl.lit(" (escrow's drained rows contradict each other)"))
                    .otherwise(pl.lit("")),
                ).alias("sealed"),
            ),
            copies.group_by("epoch_id", "escrow_id", "inference_id")
            .agg(
                pl.lit("drained_between_copies").alias("field"),
                pl.concat_str(
                    pl.col("field"),
                    pl.lit(" "),
                    pl.col("stored"),
                    pl.lit(" ("),
                    pl.col("stored_source_id"),
                    pl.lit(")"),
                )
                .sort()
                .str.join("; ")
                .alias("replayed"),
                pl.concat_str(
                    pl.col("field"), pl.lit(" "), pl.col("copy"), pl.lit(" ("), pl.col("copy_source_id"), pl.lit(")")
                )
                .sort()
                .str.join("; ")
                .alias("sealed"),
            )
            .select("epoch_id", "escrow_id", "inference_id", "field", "replayed", "sealed"),
        ]
    )
    return disagreements
