"""Escrow parameters and group membership from `sessions` (+ `escrow_cache`).

`config_json` and `group_json` are Go structs without JSON tags (PascalCase keys);
`escrow_json` is snake_case (docs/sources.md, session store). A session whose group cannot be
read is quarantined: without the group no slot can be attributed to an address.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from pipeline.transforms.clock import to_utc_datetime_expr, unix_seconds


@dataclass
class EscrowFrames:
    escrows: pl.DataFrame
    slots: pl.DataFrame
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (escrow_id, reason)


SLOT_SCHEMA = {
    "epoch_id": pl.Int64,
    "escrow_id": pl.String,
    "slot_id": pl.Int64,
    "address": pl.String,
    "address_slots": pl.Int64,
}


def parse_group(group_json: str | None) -> list[str]:
    """Addresses in slot order; raises ValueError when the JSON is not a valid group."""
    group = json.loads(group_json or "")
    if not isinstance(group, list) or not group:
        raise ValueError("group_json is not a non-empty array")
    addresses = []
    for position, entry in enumerate(group):
        if not isinstance(entry, dict) or "ValidatorAddress" not in entry:
            raise ValueError(f"group_json entry {position} has no ValidatorAddress")
        if int(entry.get("SlotID", position)) != position:
            raise ValueError(f"group_json entry {position} has SlotID {entry.get('SlotID')}")
        addresses.append(str(entry["ValidatorAddress"]))
    return addresses


def vote_threshold(config: dict, cache: dict, group_size: int) -> int:
    """The frozen VoteThreshold; else derived from the escrow's factor (0 = legacy floor(N/2))."""
    if isinstance(config.get("VoteThreshold"), int):
        return config["VoteThreshold"]
    factor = int(cache.get("vote_threshold_factor") or 0)
    return group_size * factor // 100 if factor else group_size // 2


def escrow_frames(sessions: pl.DataFrame, escrow_cache: pl.DataFrame, models: pl.DataFrame) -> EscrowFrames:
    """`sessions` rows (canonical columns) → escrow and slot frames.

    `models` maps escrow_id → model (the most common MsgStartInference model).
    """
    cache = {r["escrow_id"]: r["escrow_json"] for r in escrow_cache.iter_rows(named=True)}
    escrow_rows, slot_rows, quarantined = [], [], []
    for s in sessions.iter_rows(named=True):
        escrow_id = s["escrow_id"]
        try:
            addresses = parse_group(s["group_json"])
        except (ValueError, TypeError) as exc:
            quarantined.append((escrow_id, f"malformed group_json: {exc}"))
            continue
        try:
            config = json.loads(s["config_json"] or "{}")
            if not isinstance(config, dict):
                raise ValueError("config_json is not an object")
        except ValueError as exc:
            quarantined.append((escrow_id, f"malformed config_json: {exc}"))
            config = {}
        try:
            cached = json.loads(cache.get(escrow_id) or "{}")
        except ValueError:
            cached = {}
        n = len(addresses)
        weights = {a: addresses.count(a) for a in set(addresses)}
        escrow_rows.append(
            {
                "epoch_id": s["epoch_id"],
                "escrow_id": escrow_id,
                "version": s["version"],
                "status": s["status"],
                "group_size": n,
                "vote_threshold": vote_threshold(config, cached if isinstance(cached, dict) else {}, n),
                "validation_rate": config.get(
                    "ValidationRate", cached.get("validation_rate") if isinstance(cached, dict) else None
                ),
                "creator_addr": s["creator_addr"],
                "settled_at_s": unix_seconds(s["settled_at"]),
                "latest_nonce": s["latest_nonce"],
            }
        )
        slot_rows += [
            {"epoch_id": s["epoch_id"], "escrow_id": escrow_id, "slot_id": i, "address": a, "address_slots": weights[a]}
            for i, a in enumerate(addresses)
        ]
    escrows = pl.DataFrame(
        escrow_rows,
        schema={
            "epoch_id": pl.Int64,
            "escrow_id": pl.String,
            "version": pl.String,
            "status": pl.String,
            "group_size": pl.Int64,
            "vote_threshold": pl.Int64,
            "validation_rate": pl.Int64,
            "creator_addr": pl.String,
            "settled_at_s": pl.Int64,
            "latest_nonce": pl.Int64,
        },
    )
    escrows = (
        escrows.join(models, on="escrow_id", how="left")
        .with_columns(settled_at=to_utc_datetime_expr(pl.col("settled_at_s")))
        .drop("settled_at_s")
    )
    return EscrowFrames(escrows, pl.DataFrame(slot_rows, schema=SLOT_SCHEMA), quarantined)
