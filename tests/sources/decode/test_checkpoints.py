"""Checkpoints of every build line (docs/sources.md, blob encodings): protobuf with and without the root
prefix, pre-devshard-v2 JSON, HostStatsProto field 7 told by its wire type, the FloorIndexProto message
at snapshot field 5 and inference-record fields 18/19."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pipeline.sources.decode.snapshot_pb2 import (
    HostStatsCounterLineProto,
    HostStatsModelLineProto,
    InferenceRecordProto,
    StateSnapshotProto,
)
from pipeline.sources.decode.snapshots import ROOT_PREFIX, decode_snapshots, parse_checkpoint


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _snapshot() -> StateSnapshotProto:
    s = StateSnapshotProto()
    s.state.escrow_id, s.state.latest_nonce, s.state.phase = "e1", 40, 1
    s.state.config.token_price, s.state.config.vote_threshold = 7, 2
    for slot in range(3):
        s.state.group.add(slot_id=slot, validator_address=f"gonka1host{slot}")
        s.state.host_stats[slot].slot_id = slot
    s.state.host_stats[0].missed, s.state.host_stats[0].cost = 2, 900
    return s


def test_counters_line_field_7_and_8_as_varints():
    s = _snapshot()
    # PR #1757: validated = 7, finished = 8 (varints); validated can go below zero.
    s.state.host_stats[0].MergeFromString(HostStatsCounterLineProto(validated=5, finished=9).SerializeToString())
    s.state.host_stats[1].MergeFromString(HostStatsCounterLineProto(validated=-1, finished=3).SerializeToString())
    # slot 2 has both counters 0: proto3 leaves them off the wire, and they are 0, not NULL
    c = parse_checkpoint(s.SerializeToString())
    assert c.checkpoint_format == "protobuf"
    assert {k: (v["validated"], v["finished"]) for k, v in c.host_stats.items()} == {0: (5, 9), 1: (-1, 3), 2: (0, 0)}
    assert c.host_stats[0]["missed"] == 2 and c.host_stats[0]["cost"] == 900
    assert c.model_stats == []


def test_counters_line_with_only_field_8_present():
    s = _snapshot()
    # validated 0 is absent on the wire; finished alone still says the line
    s.state.host_stats[2].MergeFromString(b"\x40" + _varint(4))  # field 8, wire type 0
    c = parse_checkpoint(s.SerializeToString())
    assert (c.host_stats[2]["validated"], c.host_stats[2]["finished"]) == (0, 4)


def test_model_stats_line_field_7_length_delimited():
    s = _snapshot()
    line = HostStatsModelLineProto()
    line.model_stats.add(model="m/a", prompt_tokens=100, completion_tokens=20, inference_count=3, cost=840)
    line.model_stats.add(model="m/b", prompt_tokens=5, completion_tokens=1, inference_count=1, cost=42)
    s.state.host_stats[1].MergeFromString(line.SerializeToString())
    c = parse_checkpoint(s.SerializeToString())
    assert all(v["validated"] is None and v["finished"] is None for v in c.host_stats.values())
    assert c.model_stats == [
        {
            "slot_id": 1,
            "model": "m/a",
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "inference_count": 3,
            "cost": 840,
        },
        {"slot_id": 1, "model": "m/b", "prompt_tokens": 5, "completion_tokens": 1, "inference_count": 1, "cost": 42},
    ]


def test_floor_index_message_and_record_fields_18_19_and_the_root_prefix():
    s = _snapshot()
    # height_sync_floor (field 5) is a FloorIndexProto message with fields of its own
    s.height_sync_floor.MergeFromString(b"\x0a\x04\x08\x01\x10\x02" + b"\x18\x01")
    record = InferenceRecordProto(inference_id=12, status=1, executor_slot=0, model="m", started_at=100)
    record.started_at_height, record.confirmed_at_height = 5_000_001, 5_000_003
    s.state.inferences[12].CopyFrom(record)
    s.committed_entries[12] = record.SerializeToString()
    blob = ROOT_PREFIX + b"\x01" * 32 + s.SerializeToString()
    c = parse_checkpoint(blob)
    assert c.checkpoint_format == "protobuf_rooted"
    assert list(c.records) == [12] and c.records[12]["status"] == 1 and c.records[12]["started_at"] == 100


def _json_state() -> dict:
    """An EscrowState as Go's encoding/json writes it (gonka-ai/gonka devshard/types/domain.go, pre-v2)."""
    return {
        "EscrowID": "e9",
        "Version": "",
        "Config": {"RefusalTimeout": 60, "ExecutionTimeout": 600, "TokenPrice": 3, "VoteThreshold": 1},
        "Group": [{"SlotID": 0, "ValidatorAddress": "gonka1a"}, {"SlotID": 1, "ValidatorAddress": "gonka1b"}],
        "Balance": 1000,
        "Fees": 12,
        "Phase": 1,
        "FinalizeNonce": 30,
        "Inferences": {
            "31": {
                "status": 1,
                "executor_slot": 1,
                "model": "m",
                "prompt_hash": "AAE=",
                "input_length": 9,
                "max_tokens": 64,
                "reserved_cost": 219,
                "started_at": 1700000000,
                "confirmed_at": 1700000001,
            },
        },
        "HostStats": {
            "0": {"Missed": 1, "Invalid": 0, "Cost": 57, "RequiredValidations": 0, "CompletedValidations": 0},
            "1": {"Missed": 0, "Invalid": 2, "Cost": 0},
        },
        "WarmKeys": None,
        "LatestNonce": 32,
    }


@pytest.mark.parametrize("wrapped", [True, False], ids=["state-wrapper", "bare"])
def test_json_checkpoint_of_pre_devshard_v2_builds(wrapped):
    state = _json_state()
    blob = json.dumps({"state": state} if wrapped else state).encode()
    c = parse_checkpoint(blob)
    assert c.checkpoint_format == "json"
    assert c.state == {
        "state_latest_nonce": 32,
        "phase": 1,
        "finalize_nonce": 30,
        "balance": 1000,
        "fees": 12,
        "token_price": 3,
        "vote_threshold": 1,
        "group_size": 2,
    }
    assert c.host_stats[0] | {} == {
        "missed": 1,
        "invalid": 0,
        "cost": 57,
        "required_validations": 0,
        "completed_validations": 0,
        "validated": None,
        "finished": None,
    }
    assert c.host_stats[1]["invalid"] == 2
    assert c.records[31]["inference_id"] == 31 and c.records[31]["confirmed_at"] == 1700000001
    assert c.records[31]["input_tokens"] == 0  # omitempty: absent is zero


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (b'{"state": ', "starts like JSON but is not JSON"),
        (b'{"hello": 1}', "JSON checkpoint holds no escrow state"),
        (json.dumps({"state": {"EscrowID": "x", "Phase": "one"}}).encode(), "Phase is not an integer"),
        (json.dumps({"EscrowID": "x", "HostStats": {"zero": {}}}).encode(), "a HostStats slot is not an integer"),
        (b"\xff\xff\xff", "does not parse as StateSnapshotProto"),
        (json.dumps({"EscrowID": "x", "HostStats": [1]}).encode(), "HostStats is not a JSON object"),
        (json.dumps({"EscrowID": "x", "Inferences": {"3": 7}}).encode(), "Inferences[3] is not a JSON object"),
    ],
)
def test_checkpoints_that_are_neither_are_quarantined_with_the_reason(blob, reason):
    batch = pa.table(
        {
            "epoch_id": [3],
            "escrow_id": ["e"],
            "nonce": [10],
            "state_data": pa.array([blob], pa.binary()),
            "created_at": [0],
        }
    )
    decoded = decode_snapshots(batch)
    assert decoded.snapshots.num_rows == 0
    assert len(decoded.quarantined) == 1 and reason in decoded.quarantined[0][1], decoded.quarantined


def test_decode_snapshots_names_the_format_and_fills_the_new_tables():
    s = _snapshot()
    s.state.host_stats[0].MergeFromString(HostStatsCounterLineProto(validated=2, finished=2).SerializeToString())
    m = _snapshot()
    line = HostStatsModelLineProto()
    line.model_stats.add(model="m", prompt_tokens=1, completion_tokens=2, inference_count=1, cost=3)
    m.state.host_stats[2].MergeFromString(line.SerializeToString())
    blobs = [
        s.SerializeToString(),
        json.dumps(_json_state()).encode(),
        ROOT_PREFIX + b"\0" * 32 + m.SerializeToString(),
    ]
    batch = pa.table(
        {
            "epoch_id": [1, 1, 1],
            "escrow_id": ["a", "b", "c"],
            "nonce": [5, 6, 7],
            "state_data": pa.array(blobs, pa.binary()),
            "created_at": [0, 0, 0],
        }
    )
    d = decode_snapshots(batch)
    assert d.quarantined == []
    assert d.snapshots.column("checkpoint_format").to_pylist() == ["protobuf", "json", "protobuf_rooted"]
    assert d.snapshots.column("root_prefixed").to_pylist() == [False, False, True]
    stats = {(r["escrow_id"], r["slot_id"]): (r["validated"], r["finished"]) for r in d.host_stats.to_pylist()}
    assert stats[("a", 0)] == (2, 2) and stats[("a", 1)] == (0, 0) and stats[("b", 0)] == (None, None)
    assert d.model_stats.to_pylist() == [
        {
            "epoch_id": 1,
            "escrow_id": "c",
            "slot_id": 2,
            "snapshot_nonce": 7,
            "model": "m",
            "prompt_tokens": 1,
            "completion_tokens": 2,
            "inference_count": 1,
            "cost": 3,
        }
    ]
    assert d.live.column("escrow_id").to_pylist() == ["b"]  # the JSON checkpoint's live record
