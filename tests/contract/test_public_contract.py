"""Extend, never break: the public contract of now holds everything of the committed snapshot
(tests/contract/public.json): no public view column, evidence column, API name or parameter, command or
option is removed or renamed. Something added is added to the snapshot with
`python -m tests.contract.public --write` (docs/contributing.md)."""

from __future__ import annotations

import json

from tests.contract.public import SNAPSHOT, contract, missing


def test_the_public_contract_holds_everything_of_the_snapshot():
    snapshot = json.loads(SNAPSHOT.read_text())
    assert set(snapshot) == {"views", "evidence", "api", "cli"}
    assert missing(snapshot, contract()) == []


def test_a_removed_or_renamed_name_is_named():
    snapshot = {
        "views": {"inferences": ["epoch_id", "a_dropped_column"]},
        "api": {"ingest": ["source", "warehouse"], "a_removed_function": []},
        "cli": {"query": ["--warehouse", "--a-renamed-option"]},
    }
    assert missing(snapshot, contract()) == [
        "views: inferences: a_dropped_column",
        "api: a_removed_function",
        "cli: query: --a-renamed-option",
    ]


def test_the_snapshot_covers_what_the_docs_name():
    """The snapshot is no empty shell: the warehouse's core views, the facade, every command."""
    snapshot = json.loads(SNAPSHOT.read_text())
    assert "epoch_id" in snapshot["views"]["inferences"]
    assert {"ingest", "open_warehouse", "Warehouse.evidence", "Context.report"} <= set(snapshot["api"])
    assert {"ingest", "query", "report epoch", "network ingest", "verify"} <= set(snapshot["cli"])
    assert "--warehouse" in snapshot["cli"]["report epoch"] and "--config" in snapshot["cli"]["ingest"]
