"""Stored prompt/response payloads of a copy, as raw bytes, never written.

PostgreSQL: the partitioned `payload_storage` table, read in Arrow batches inside the ingest's
snapshot. Files: `payloads/{epoch}/{escrow}/{inference}.json`, one JSON object whose two
fields are base64 (Go's encoding of byte slices). Both yield `RawPayload`s; `known` keys
(already in the warehouse: payloads are immutable, the first write wins) are skipped before
any body is read or decoded. A file that cannot be used (not a regular file, larger than
`MAX_PAYLOAD_FILE_BYTES`, unreadable, or not such an object) comes back with `problem` set, and
so is quarantined with that reason; it is never waited on (a FIFO) or read without limit (a
symlink to /dev/zero).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from pipeline.core.paths import sql_text
from pipeline.sources.files import FileReadError, read_regular_file

NUMBER = re.compile(r"^\d+$")
# The largest payload file one read may take: answers of tens of thousands of tokens with top-20
# logprobs stay far below it, and it bounds the memory a single file can claim.
MAX_PAYLOAD_FILE_BYTES = 256 * 2**20


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
    # Keys first: when every payload is known (a re-ingest of an unchanged copy) no body is read.
    # (Read to the end: the next query runs on the same connection.)
    batches = list(store.query_batches(sql_text("sources/postgres/payload_keys.sql")))
    if all(
        key in known
        for b in batches
        for key in zip(b.column("escrow_id").to_pylist(), b.column("inference_id").to_pylist(), strict=True)
    ):
        return
    for batch in store.query_batches(sql_text("sources/postgres/payloads.sql"), batch_rows=2048):
        cols = batch.to_pydict()
        for epoch, escrow, inference, prompt, response in zip(
            cols["epoch_id"],
            cols["escrow_id"],
            cols["inference_id"],
            cols["prompt_payload"],
            cols["response_payload"],
            strict=True,
        ):
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
    size: int = 0  # from the listing (0 when it could not be stat'ed): batching weight only


def payload_files(root: Path, known: set[tuple[str, int]]) -> Iterator[PayloadFile]:
    """`root/{epoch}/{escrow}/{inference}.json`, in path order; other names and `known` keys are skipped."""
    if not root.is_dir():
        return
    for epoch_dir in sorted(p for p in root.iterdir() if p.is_dir() and NUMBER.match(p.name)):
        for escrow_dir in sorted(p for p in epoch_dir.iterdir() if p.is_dir()):
            for path in sorted(escrow_dir.glob("*.json")):
                if not NUMBER.match(path.stem) or (escrow_dir.name, int(path.stem)) in known:
                    continue
                try:
                    size = path.stat().st_size
                except OSError:  # e.g. a dangling symlink: reading it reports the problem
                    size = 0
                yield PayloadFile(int(epoch_dir.name), escrow_dir.name, int(path.stem), path, size)


class _PayloadFileDoc(msgspec.Struct):
    """The file's object; msgspec decodes the base64 strings into bytes (strictly, padding included)."""

    prompt_payload: bytes | None = None
    response_payload: bytes | None = None


_FILE_DOC = msgspec.json.Decoder(_PayloadFileDoc)


def read_payload_file(f: PayloadFile) -> RawPayload:
    """The file's two base64 fields decoded; a file that cannot be used comes back with `problem` set."""
    try:
        doc = _FILE_DOC.decode(read_regular_file(f.path, MAX_PAYLOAD_FILE_BYTES))
    except FileReadError as exc:
        return RawPayload(f.epoch_id, f.escrow_id, f.inference_id, None, None, f"payload file {exc}")
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        return RawPayload(
            f.epoch_id, f.escrow_id, f.inference_id, None, None, f"payload file is not a base64 JSON object ({exc})"
        )
    return RawPayload(f.epoch_id, f.escrow_id, f.inference_id, doc.prompt_payload, doc.response_payload)


def file_payloads(root: Path, known: set[tuple[str, int]]) -> Iterator[RawPayload]:
    """`payload_files` read one after the other."""
    return map(read_payload_file, payload_files(root, known))
