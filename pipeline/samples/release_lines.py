"""What the writer's release line changes in a copy: its migration lists, the snapshot format and
whether escrows can be joined by import.

The step lists are the upstream writers' own, line by line: ids mean different things on different
lines. The drain rule and the reason-3 error misses are per escrow (scenario.py), because a host
that upgrades keeps its older escrows.
"""

from __future__ import annotations

from dataclasses import dataclass

# Tables of an epoch file / epoch partition, in write order.
EPOCH_TABLES = (
    "sessions",
    "diffs",
    "signatures",
    "snapshots",
    "sealed_inferences",
    "slot_validation_obs",
    "inference_validation_obs",
    "sealed_validation_obs",
)

_PG_BASE = (
    (1, "devshard_session_index"),
    (2, "devshard_session_index_by_epoch"),
    (3, "devshard_sessions_parent"),
    (4, "devshard_diffs_parent"),
    (5, "devshard_signatures_parent"),
    (6, "devshard_snapshots_parent"),
    (7, "devshard_sealed_inferences_parent"),
    (8, "devshard_slot_validation_obs_parent"),
    (9, "devshard_inference_validation_obs_parent"),
)
_PG_HA = _PG_BASE + (
    (10, "devshard_validation_leases_parent"),
    (11, "devshard_escrow_cache"),
    (13, "devshard_storage_identity"),
)

# SQLite epoch files. Before the squash,
# step 5 made a 3-column sealed_inferences and later steps added columns and tables; the squashed list
# reuses ids 6 and 7 for other steps. The import step's name on SQLite is the PostgreSQL one
# (unconfirmed upstream).
SQLITE_OLD_EPOCH = ((1, "sessions"), (2, "diffs"), (3, "signatures"), (4, "snapshots"), (5, "sealed_inferences"))
SQLITE_PRE_SQUASH_EPOCH = SQLITE_OLD_EPOCH + (
    (6, "sessions_version_column"),
    (7, "slot_validation_obs"),
    (8, "sealed_inferences_obs_snapshot"),
    (10, "inference_validation_obs"),
    (11, "noop"),
)
SQLITE_EPOCH = SQLITE_OLD_EPOCH + ((6, "slot_validation_obs"), (7, "inference_validation_obs"))
SQLITE_IMPORT_EPOCH = SQLITE_EPOCH + ((8, "snapshot_import_watermark"),)
SQLITE_META = ((1, "escrow_epoch"), (2, "escrow_epoch_by_epoch"), (3, "noop"), (4, "escrow_cache"))
# The sealed-row columns the pre-squash step 8 did not add (its files keep only the obs snapshot).
PRE_SQUASH_MISSING_SEALED = (
    "sealed_model",
    "sealed_prompt_hash",
    "sealed_response_hash",
    "sealed_input_length",
    "sealed_max_tokens",
    "sealed_input_tokens",
    "sealed_output_tokens",
    "sealed_reserved_cost",
    "sealed_actual_cost",
    "sealed_started_at",
    "sealed_confirmed_at",
)


@dataclass(frozen=True)
class SampleReleaseLine:
    name: str
    postgres_migrations: tuple[tuple[int, str], ...]
    sqlite_epoch_migrations: tuple[tuple[int, str], ...]
    snapshot_root_prefix: bool  # newer builds prefix state_data with the marker and the state root
    imports: bool  # sessions.imported_nonce exists; the copy holds one escrow joined by import
    tables_absent: tuple[str, ...] = ()  # PostgreSQL tables this line never created
    # The gateway ledger of the same era: set tables it does not have yet, and whether its
    # invalid-nonce set carries the executor slot.
    ledger_tables_absent: tuple[str, ...] = ()
    ledger_invalid_slot: bool = True
    payload_inference_id_type: str = "INT"  # payload_storage.inference_id: INT upstream, BIGINT in some builds


SAMPLE_LINES = {
    line.name: line
    for line in (
        SampleReleaseLine(
            "v0.2.13",
            _PG_BASE,
            SQLITE_PRE_SQUASH_EPOCH,
            False,
            False,
            ("devshard_validation_leases", "devshard_escrow_cache", "devshard_storage_identity"),
            ("accounting_escrow_protocol_nonces", "accounting_escrow_challenges"),
            False,
        ),
        SampleReleaseLine(
            "v0.2.14",
            _PG_BASE + ((10, "devshard_escrow_cache"),),
            SQLITE_PRE_SQUASH_EPOCH,
            False,
            False,
            ("devshard_validation_leases", "devshard_storage_identity"),
        ),
        SampleReleaseLine(
            "ha",
            _PG_HA + ((14, "devshard_storage_challenge"), (15, "devshard_connection_lineage")),
            SQLITE_EPOCH,
            True,
            False,
            payload_inference_id_type="BIGINT",
        ),
        SampleReleaseLine(
            "snapshot-import",
            _PG_BASE
            + (
                (10, "devshard_validation_leases_parent"),
                (11, "devshard_escrow_cache"),
                (12, "snapshot_import_watermark"),
                (13, "devshard_storage_identity"),
            ),
            SQLITE_IMPORT_EPOCH,
            True,
            True,
        ),
    )
}
DEFAULT_LINE = "ha"
