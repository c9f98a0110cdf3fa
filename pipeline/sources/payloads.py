"""Stored prompt/response payloads of a copy (sources.md §6.1), as raw bytes, never written.

PostgreSQL: the partitioned `payload_storage` table, read in Arrow batches inside the ingest's
snapshot. Files: `payloads/{epoch}/{escrow}/{inference}.json`, one JSON object whose two
fields are base64 (Go's encoding of byte slices). Both yield `RawPayload`s; `known` keys
(already in the warehouse: payloads are immutable, the first write wins) are skipped before
any body is read or decoded. A file that is not such an object comes back with `problem` set.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import orjson

from pipeline.paths import sql_text

NUMBER = re.compile(r"^\d+$")


@dataclass
class RawPayload:
    epoch_id: int
    escrow_id: str
    inference_id: int
    prompt: bytes | None
    response: bytes | None
    problem: str | None = None


def postgres_payloads(store, known: set[tuple[str, int]]) -> Iterator[RawPayload]:
    if store.table_columns("payload_storage") is None:
        return
    for batch in store.query_batches(sql_text("sources/postgres/payloads.sql"), batch_rows=2048):
        cols = batch.to_pydict()
        for epoch, escrow, inference, prompt, response in zip(
                cols["epoch_id"], cols["escrow_id"], cols["inference_id"], cols["prompt_payload"],
                cols["response_payload"]):
            if (escrow, inference) in known:
                continue
            yield RawPayload(epoch, escrow, inference, prompt, response)


@dataclass(frozen=True)
class PayloadFile:
    """One payload file, listed but not read yet (what a worker process is handed: a path, not bytes)."""
    epoch_id: int
    escrow_id: str
    inference_id: int
    path: Path


def payload_files(root: Path, known: set[tuple[str, int]]) -> Iterator[PayloadFile]:
    """`root/{epoch}/{escrow}/{inference}.json`, in path order; other names and `known` keys are skipped."""
    if not root.is_dir():
        return
    for epoch_dir in sorted(p for p in root.iterdir() if p.is_dir() and NUMBER.match(p.name)):
        for escrow_dir in sorted(p for p in epoch_dir.iterdir() if p.is_dir()):
            for path in sorted(escrow_dir.glob("*.json")):
                if not NUMBER.match(path.stem) or (escrow_dir.name, int(path.stem)) in known:
                    continue
                yield PayloadFile(int(epoch_dir.name), escrow_dir.name, int(path.stem), path)


def read_payload_file(f: PayloadFile) -> RawPayload:
    """The file's two base64 fields decoded; a file that is not such an object comes back with `problem` set."""
    try:
        doc = orjson.loads(f.path.read_bytes())
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        prompt, response = (None if doc.get(k) is None else base64.b64decode(doc[k], validate=True)
                            for k in ("prompt_payload", "response_payload"))
    except (orjson.JSONDecodeError, ValueError, binascii.Error, TypeError) as exc:
        return RawPayload(f.epoch_id, f.escrow_id, f.inference_id, None, None,
                          f"payload file is not a base64 JSON object ({exc})")
    return RawPayload(f.epoch_id, f.escrow_id, f.inference_id, prompt, response)


def file_payloads(root: Path, known: set[tuple[str, int]]) -> Iterator[RawPayload]:
    """`payload_files` read one after the other."""
    return map(read_payload_file, payload_files(root, known))
