"""The `tracker` evidence table: the gateway ledger's record of a participant, per epoch."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import fisher_exact_2x2, holm_adjust, interval_stat, with_wilson
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "tracker"
SHARES = {  # share column -> (part, whole)
    "slow_decode_share": ("slow_decode", "delivered_outside_poc"),
    "slow_chunk_share": ("slow_chunk", "delivered_outside_poc"),
    "protocol_invalid_share": ("protocol_invalid", "assigned_nonces"),
    "protocol_misses_share": ("protocol_misses", "assigned_nonces"),
}
COLUMNS = [
    Column("epoch", "the epoch"),
    Column("participant", "the participant's address"),
    Column(
        "assigned_nonces",
        "nonces 1 … latest with `nonce mod N` = one of the participant's slots, protocol-only included",
    ),
    Column("delivered", "answers that reached the gateway (`finished_*` dispositions), warm-up probes left out"),
    Column("delivered_outside_poc", "those of them outside the PoC phase"),
    Column("slow_decode", "answers flagged slow to decode, outside the PoC phase (warm-up left out)"),
    Column("slow_decode_share", "`slow_decode / delivered_outside_poc`"),
    *column_group(
        "slow_decode_ci_low", "slow_decode_ci_high", meaning="its Wilson 95% interval (none for a share above 1)"
    ),
    Column("slow_chunk", "answers flagged for a slow chunk, outside the PoC phase (warm-up left out)"),
    Column("slow_chunk_share", "`slow_chunk / delivered_outside_poc`"),
    *column_group(
        "slow_chunk_ci_low", "slow_chunk_ci_high", meaning="its Wilson 95% interval (none for a share above 1)"
    ),
    Column("protocol_invalid", "the host stats' invalid count (the chain's `HostStats.Invalid`)"),
    Column("protocol_invalid_share", "`protocol_invalid / assigned_nonces`"),
    *column_group(
        "protocol_invalid_ci_low",
        "protocol_invalid_ci_high",
        meaning="its Wilson 95% interval (none for a share above 1)",
    ),
    Column("protocol_misses", "the host stats' missed count (the chain's `HostStats.Missed`)"),
    Column("protocol_misses_share", "`protocol_misses / assigned_nonces`"),
    *column_group(
        "protocol_misses_ci_low",
        "protocol_misses_ci_high",
        meaning="its Wilson 95% interval (none for a share above 1)",
    ),
    Column(
        "findings", "the recomputed findings ([tracker_findings](data-model.md#tracker_findings)) as `code (severity)`"
    ),
]


def tracker(
    con: duckdb.DuckDBPyConnection,
    host: str | None,
    window: Window,
    *,
    all_participants: bool = False,
    compare: int | None = None,
) -> EvidenceResult:
    """The tracker's per-epoch record of the host (or of every participant, ranked)."""
    if window.since is not None:
        raise EvidenceError("tracker is per epoch (the ledger has no event times): use --epoch N")
    if compare is not None and window.epoch is None:
        raise EvidenceError("--compare EPOCH needs --epoch N (the epoch to compare it with)")
    epochs = None if window.epoch is None else [window.epoch] + ([compare] if compare is not None else [])
    who = None if all_participants else host
    rows = fetch_frame(con, sql_text("evidence/tracker_rows.sql"), {"host": who, "epochs": epochs})
    rows = rows.with_columns(
        (pl.when(pl.col(whole) > 0).then(pl.col(part) / pl.col(whole)).otherwise(None)).alias(share)
        for share, (part, whole) in SHARES.items()
    ).rename({"epoch_id": "epoch"})
    for share, (part, whole) in SHARES.items():
        rows = _with_share_interval(rows, share, part, whole)
    stats: dict = {}
    if compare is not None:
        rows = rows.sort("participant", pl.col("epoch").replace_strict({window.epoch: 0, compare: 1}, default=2))
        assert window.epoch is not None  # --compare without --epoch was refused above
        stats["compare"] = _compare(rows, window.epoch, compare) if not all_participants else {}
        if family := holm_adjust(stats):
            stats["multiple_testing"] = family
    if all_participants:
        ranked = rows.sort(
            ["critical", "n_findings", "protocol_invalid_share", "slow_decode_share"], descending=True, nulls_last=True
        )
        if compare is None:
            rows = ranked.with_row_index("rank", offset=1).with_columns(pl.col("rank").cast(pl.Int64))
        else:  # rank participants by the --epoch rows, keep the pair together
            order = ranked.filter(pl.col("epoch") == window.epoch)["participant"].to_list()
            rank = {p: k + 1 for k, p in enumerate(order)}
            rows = rows.with_columns(
                rank=pl.col("participant").replace_strict(rank, default=None, return_dtype=pl.Int64)
            ).sort("rank", "epoch", nulls_last=True)
    columns = (["rank"] if all_participants else []) + COLUMNS
    disagreements = fetch_frame(con, sql_text("evidence/tracker_disagreements.sql"), {"host": who, "epochs": epochs})
    stats["disagreements"] = disagreements.to_dicts()
    stats["interval"] = {
        share: interval_stat(f"{part} / {whole}, per row", _interval_columns(share))
        for share, (part, whole) in SHARES.items()
    }
    notes = []
    if rows.height == 0:
        notes.append(
            f"no tracker record for {who or 'any participant'} in {window.describe()} "
            "(ingest a copy with its accounting ledger, or saved API responses with `ingest-json`)."
        )
    if disagreements.height:
        notes.append(
            f"{disagreements.height} tracker/session-storage disagreement(s) (view tracker_disagreements): "
            + "; ".join(
                f"epoch {r['epoch_id']} escrow {r['escrow_id']} {r['participant']} "
                f"{r['check_name']}: tracker {r['tracker']}, session {r['session']}"
                for r in disagreements.iter_rows(named=True)
            )
        )
    notes.append(
        "delivered = finished_* dispositions without warm-up probes; slow_* count answers outside the "
        "PoC phase, shares of the answers delivered outside PoC; protocol_* are the chain host stats, "
        "shares of assigned_nonces; findings recomputed with the newer build's thresholds, none below 20."
    )
    scope = "every participant" if all_participants else host
    versus = f" vs epoch {compare}" if compare is not None else ""
    return EvidenceResult(
        evidence=NAME,
        title=f"Gateway tracker record of {scope} ({window.describe()}{versus})",
        params={"host": host, **window.params, "all_participants": all_participants, "compare": compare},
        rows=rows.select(columns),
        stats=stats,
        notes=notes,
    )


def _interval_columns(share: str) -> tuple[str, str]:
    stem = share.removesuffix("_share")
    return f"{stem}_ci_low", f"{stem}_ci_high"


def _with_share_interval(rows: pl.DataFrame, share: str, part: str, whole: str) -> pl.DataFrame:
    """The Wilson 95% interval of one share (docs/evidence.md, tracker). A flag may also be set on answers
    that were not delivered, so a part above its whole has a share but no interval (it is not a proportion)."""
    low, _ = _interval_columns(share)
    counted = rows.with_columns(pl.when(pl.col(part) <= pl.col(whole)).then(pl.col(part)).alias("_part"))
    return with_wilson(counted, "_part", whole, prefix=low.removesuffix("_low")).drop("_part")


def _compare(rows: pl.DataFrame, first: int, second: int) -> dict:
    """Fisher's exact test of each share between the two epochs (one participant)."""
    by_epoch = {r["epoch"]: r for r in rows.iter_rows(named=True)}
    if first not in by_epoch or second not in by_epoch:
        return {}
    out = {}
    for share, (part, whole) in SHARES.items():
        a, b = by_epoch[first], by_epoch[second]
        # A flag counted on more answers than were delivered is not a proportion: no test.
        if a[whole] and b[whole] and a[part] <= a[whole] and b[part] <= b[whole]:
            result = fisher_exact_2x2(a[part], a[whole] - a[part], b[part], b[whole] - b[part])
            out[share] = result.as_stat(epochs=[first, second])
    return out


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The gateway tracker's per-participant record (accounting ledger or saved accounting-API responses), "
        "per epoch.",
        compute=tracker,
        columns=tuple(COLUMNS),
        sql=("evidence/tracker_rows.sql", "evidence/tracker_disagreements.sql"),
        options=(
            Option("all_participants", "--all", "Every participant, ranked.", without_host=True),
            Option(
                "compare", "--compare", "Side by side with another epoch (with --epoch N).", type=int, metavar="EPOCH"
            ),
        ),
        # The report compares the epoch with the one before it.
        report=ReportSection(
            order=40,
            heading="Tracker (against the previous epoch)",
            options=lambda epoch: {"compare": epoch - 1} if epoch > 0 else {},
        ),
        description="The gateway ledger's per-participant record (view `tracker_participants`, from the accounting "
        "ledger or saved accounting-API responses), per epoch, summed over the participant's slots and models. "
        "Windows are epochs only (the ledger has no event times); `--since/--until` is an error.",
        notes="The slow shares are of `delivered_outside_poc` (the ledger's own exclusion), the protocol shares of "
        "`assigned_nonces`; a share above 1 (a flag counted on more answers than were delivered) has no interval, and "
        "`stats.interval` names each share's interval. `--all` lists every participant, ranked by critical findings, "
        "then number of findings, then `protocol_invalid_share`, then `slow_decode_share` (a `rank` column first). "
        "`--compare EPOCH` (with `--epoch`) shows both epochs per participant, and `stats.compare` holds Fisher's "
        "exact two-sided test of each share between the two epochs, Holm-adjusted over the shares tested (`p_holm`; "
        "`stats.multiple_testing`). `stats.disagreements` lists where the ledger and session storage disagree (view "
        "`tracker_disagreements`) for the participants shown.",
    )
)
