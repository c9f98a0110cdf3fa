"""Replay rule sets: the devshard rules that changed upstream, each named, and the choice per escrow.

A rule set names one version of the state machine's rules (docs/sources.md, replay rule sets, gives each
one's upstream source). The replay computes every rule set's outcome in the same passes (columns
`<name>@<rule set>`); `choose` picks, per escrow, the rule set whose outcomes reproduce the escrow's own
seals (sealed status and vote counts), and `apply` copies the chosen outcome into the plain columns.
"""

from __future__ import annotations

import polars as pl

# Oldest first; the last is the newest.
# finished-only: a MsgValidation counts only while the record is Finished (gonka-ai/gonka
#   devshard/state/machine.go @39854687, applyValidation).
# late-validation: a MsgValidation while Challenged goes to the challenge tally like a vote and can resolve
#   it (gonka-ai/gonka devshard/state/machine.go @d5fbfa38, applyValidation → addChallengeVoteLocked).
RULE_SETS: tuple[str, ...] = ("finished-only", "late-validation")
NEWEST = RULE_SETS[-1]
# Rule set per devshard version (sessions.version) where upstream ties one: none does. The version is a
# link-time stamp (DEVSHARD_VERSION) and the commit that made late validations count is undated, so a
# version's rule set is known only from seals (of other escrows of the same version: `version_ties`).
VERSION_RULE_SETS: dict[str, str] = {}

# How the rule set of an escrow was chosen (d_escrow_rule_sets.chosen_by, view escrow_rule_sets).
BY_SEALS = "seals"  # exactly one rule set reproduces every compared seal
SEALS_TIE = "seals_tie"  # several do (no seal tells them apart): the version's, else the newest of them
NONE_REPRODUCES = "none_reproduces"  # no rule set reproduces every seal: the one reproducing most, flagged
ASSUMED_VERSION = "assumed_version"  # no seals: the rule set the escrow's version is known to use
ASSUMED = "assumed"  # no seals and no known version: the newest

# Rule-dependent columns of the replay's inferences and verdicts.
RULED_INFERENCE_COLUMNS = ("status", "votes_valid", "votes_invalid", "resolved_nonce", "cleared")
RULED_VERDICT_COLUMNS = ("counted", "after_resolution")

CHOICE_SCHEMA = {
    "escrow_id": pl.String,
    "rule_set": pl.String,
    "chosen_by": pl.String,
    "seals_compared": pl.Int64,
    "seals_reproduced": pl.Int64,
    "reproduced_by": pl.String,
    "best_rule_set": pl.String,
    "best_reproduced": pl.Int64,
}


def ruled(column: str, rule_set: str) -> str:
    """The name of `column` as the rule set `rule_set` computes it."""
    return f"{column}@{rule_set}"


def pick(frame: pl.DataFrame, columns: tuple[str, ...], rule_set: pl.Expr, keep: bool = False) -> pl.DataFrame:
    """Fill the plain `columns` from the rule set `rule_set` names per row (the newest where it is null),
    and drop the per-rule-set columns unless `keep`."""
    chosen = rule_set.fill_null(pl.lit(NEWEST))
    picked = {
        column: pl.coalesce(*[pl.when(chosen == r).then(pl.col(ruled(column, r))) for r in RULE_SETS])
        for column in columns
    }
    frame = frame.with_columns(**picked)
    return frame if keep else frame.drop([ruled(c, r) for c in columns for r in RULE_SETS])


def choose(
    inferences: pl.DataFrame, sealed: pl.DataFrame, escrows: pl.DataFrame, known: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Per escrow: the rule set, how it was chosen, and how many of the escrow's seals it reproduced.

    inferences: the replay's, with the `@rule set` columns; sealed: the stored rows (sealed_nonce, obs_present,
    sealed_status, sealed_votes_valid, sealed_votes_invalid); escrows: escrow_id, version; known: other escrows'
    choices already stored (escrow_id, version, rule_set, chosen_by), for the version ties.
    A seal is compared where it is a real, full row (sealed_nonce > 0, obs_present) of a record the log
    holds from its start and that the drain did not seal; it is reproduced when the status and each vote
    count the row has (not NULL) are equal.
    """
    compared = _compared(inferences, sealed)
    counts = compared.group_by("escrow_id").agg(
        seals_compared=pl.len(),
        **{f"n_{r}": pl.col(f"ok_{r}").sum() for r in RULE_SETS},
    )
    frame = escrows.select("escrow_id", "version").join(counts, on="escrow_id", how="left")
    frame = frame.with_columns(
        pl.col("seals_compared").fill_null(0), *[pl.col(f"n_{r}").fill_null(0) for r in RULE_SETS]
    )
    full = {r: (pl.col("seals_compared") > 0) & (pl.col(f"n_{r}") == pl.col("seals_compared")) for r in RULE_SETS}
    n_full = pl.sum_horizontal(*[e.cast(pl.Int64) for e in full.values()])
    reproduced_by = pl.concat_str(
        *[pl.when(full[r]).then(pl.lit(r)) for r in RULE_SETS], separator=",", ignore_nulls=True
    )
    frame = frame.with_columns(n_full=n_full, reproduced_by=pl.when(n_full > 0).then(reproduced_by))
    frame = _with_version_rule(frame, known)
    newest_full = pl.coalesce(*[pl.when(full[r]).then(pl.lit(r)) for r in reversed(RULE_SETS)])
    version_full = pl.coalesce(*[pl.when(full[r] & (pl.col("version_rule") == r)).then(pl.lit(r)) for r in RULE_SETS])
    no_seals = pl.col("seals_compared") == 0
    best = pl.max_horizontal(*[pl.col(f"n_{r}") for r in RULE_SETS])
    # The rule set reproducing the most seals (the newest of equals).
    best_rule = pl.coalesce(*[pl.when(pl.col(f"n_{r}") == best).then(pl.lit(r)) for r in reversed(RULE_SETS)])
    return frame.with_columns(
        rule_set=pl.when(no_seals)
        .then(pl.coalesce("version_rule", pl.lit(NEWEST)))
        .when(pl.col("n_full") >= 1)
        .then(pl.coalesce(version_full, newest_full))
        .otherwise(best_rule),
        chosen_by=pl.when(no_seals & pl.col("version_rule").is_not_null())
        .then(pl.lit(ASSUMED_VERSION))
        .when(no_seals)
        .then(pl.lit(ASSUMED))
        .when(pl.col("n_full") == 1)
        .then(pl.lit(BY_SEALS))
        .when(pl.col("n_full") > 1)
        .then(pl.lit(SEALS_TIE))
        .otherwise(pl.lit(NONE_REPRODUCES)),
    ).select(
        "escrow_id",
        "rule_set",
        "chosen_by",
        "seals_compared",
        # How many seals the chosen rule set reproduced.
        seals_reproduced=pl.coalesce(*[pl.when(pl.col("rule_set") == r).then(pl.col(f"n_{r}")) for r in RULE_SETS]),
        reproduced_by=pl.col("reproduced_by"),
        best_rule_set=pl.when(~no_seals).then(best_rule),
        best_reproduced=best,
    )


def _compared(inferences: pl.DataFrame, sealed: pl.DataFrame) -> pl.DataFrame:
    """The seals compared, with `ok_<rule set>` when that rule set's outcome reproduces the seal."""
    status_names = ["pending", "started", "finished", "challenged", "validated", "invalidated", "timed_out"]
    seals = sealed.filter((pl.col("sealed_nonce").fill_null(0) > 0) & pl.col("obs_present").fill_null(False)).select(
        "escrow_id",
        "inference_id",
        pl.col("sealed_status").replace_strict(dict(enumerate(status_names)), default=None, return_dtype=pl.String),
        "sealed_votes_valid",
        "sealed_votes_invalid",
    )
    rows = inferences.filter(pl.col("start_nonce").is_not_null() & ~pl.col("drained").fill_null(False)).join(
        seals, on=["escrow_id", "inference_id"], how="inner"
    )

    def same(column: str, rule: str, stored: str, required: bool) -> pl.Expr:
        equal = pl.col(ruled(column, rule)).cast(pl.String).fill_null("∅") == pl.col(stored).cast(pl.String)
        return equal.fill_null(not required)  # a vote count the row lacks (NULL) cannot disagree

    return rows.select(
        "escrow_id",
        **{
            f"ok_{r}": same("status", r, "sealed_status", True)
            & same("votes_valid", r, "sealed_votes_valid", False)
            & same("votes_invalid", r, "sealed_votes_invalid", False)
            for r in RULE_SETS
        },
    )


def _with_version_rule(frame: pl.DataFrame, known: pl.DataFrame | None) -> pl.DataFrame:
    """`version_rule`: the rule set of the escrow's version, from VERSION_RULE_SETS, else the one every
    escrow of that version whose seals chose a single rule set chose (stored ones and those of this call)."""
    ties = version_ties(frame, known)
    static = pl.col("version").replace_strict(VERSION_RULE_SETS, default=None, return_dtype=pl.String)
    return frame.join(ties, on="version", how="left").with_columns(version_rule=pl.coalesce(static, "tied_rule"))


def version_ties(frame: pl.DataFrame, known: pl.DataFrame | None) -> pl.DataFrame:
    """Per devshard version: the one rule set its escrows' seals chose (state `seals`), where they agree."""
    single = pl.col("n_full") == 1
    here = frame.filter(single & pl.col("version").is_not_null()).select(
        "escrow_id", "version", tied_rule=pl.col("reproduced_by")
    )
    if known is not None and known.height:
        stored = known.filter(
            (pl.col("chosen_by") == BY_SEALS)
            & pl.col("version").is_not_null()
            & ~pl.col("escrow_id").is_in(frame["escrow_id"].implode())
        ).select("escrow_id", "version", tied_rule=pl.col("rule_set"))
        here = pl.concat([here, stored])
    return (
        here.group_by("version")
        .agg(pl.col("tied_rule").unique())
        .filter(pl.col("tied_rule").list.len() == 1)
        .select("version", pl.col("tied_rule").list.first())
    )


def apply(inferences: pl.DataFrame, verdicts: pl.DataFrame, choice: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The inferences and verdicts with the plain rule-dependent columns of each escrow's chosen rule set."""
    rules = choice.select("escrow_id", "rule_set")
    inferences = pick(
        inferences.drop("rule_set", strict=False).join(rules, on="escrow_id", how="left"),
        RULED_INFERENCE_COLUMNS,
        pl.col("rule_set"),
    ).drop("rule_set")
    verdicts = pick(
        verdicts.drop("rule_set", strict=False).join(rules, on="escrow_id", how="left"),
        RULED_VERDICT_COLUMNS,
        pl.col("rule_set"),
    ).drop("rule_set")
    return inferences, verdicts
