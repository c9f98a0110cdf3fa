"""Stored prompt/response payloads of a copy, as raw bytes, never written.

PostgreSQL: the partitioned `payload_storage` table, read in Arrow batches inside the ingest's
snapshot. Files: `payloads/{epoch}/{escrow}/{inference}.json`, one JSON object whose two
fields are base64 (Go's encoding of byte slices), or `{inference}.json.zst`, the same JSON
zstd-compressed (builds with `CompressFiles` on); where both exist the `.zst` is read, as upstream
does. Anything else in the payload directory is no payload: it is listed by name (`strays`) so the
ingest quarantines it, never skipped in silence. Both yield `RawPayload`s; `known` keys
(already in the warehouse: payloads are immutable, the first write wins) are skipped before
any body is read or decoded. A file that cannot be used (not a regular file, larger than
`MAX_PAYLOAD_FILE_BYTES`, unreadable, or not such an object) comes back with `problem` set, and
so is quarantined with that reason; it is never waited on (a FIFO) or read without limit (a
symlink to /dev/zero).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from pipeline.core.limits import LIMITS, in_int64
from pipeline.core.paths import sql_text
from pipeline.sources.files import FileReadError, read_regular_file

NUMBER = re.compile(r"^\d+$")
# The largest payload file one read may take: answers of tens of thousands of tokens with top-20
# logprobs stay far below it, and it bounds the memory a single file can claim.
MAX_PAYLOAD_FILE_BYTES = LIMITS.payload_bytes  # (pipeline/core/limits.py)


PAYLOAD_FORMATS = ("postgres", "json", "json_zst")  # answer_checks.payload_format
SUFFIXES = ((".json.zst", "json_zst"), (".json", "json"))  # the compressed name first: it wins
NOT_A_PAYLOAD = "not a payload file (payloads/EPOCH/ESCROW/INFERENCE.json or .json.zst)"


@dataclass
class RawPayload:
    epoch_id: int
    escrow_id: str
    inference_id: int
    prompt: bytes | None
    response: bytes | None
    problem: str | None = None
    payload_format: str = "postgres"


@dataclass
class PayloadListing:
    """What a read of the payloads found besides the payloads it yields: entries of a payload directory
    that are no payload (paths relative to the directory), `.json` files superseded by a `.json.zst`
    of the same answer, and payloads (files or rows) whose key is `known`, not read."""

    strays: list[str] = field(default_factory=list)
    superseded: int = 0
    skipped: int = 0


def postgres_payloads(
    store, known: set[tuple[str, int]], listing: PayloadListing | None = None
) -> Iterator[RawPayload]:
    """The rows of `payload_storage` not in `known`, in source order; the known ones are counted in
    `listing.skipped`."""
    listing = listing if listing is not None else PayloadListing()
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
        listing.skipped += sum(b.num_rows for b in batches)
        return
    query = sql_text("sources/postgres/payloads.sql")
    for batch in store.query_batches(query, (MAX_PAYLOAD_FILE_BYTES,), batch_rows=2048):
        cols = batch.to_pydict()
        for epoch, escrow, inference, prompt, response, size in zip(
            cols["epoch_id"],
            cols["escrow_id"],
            cols["inference_id"],
            cols["prompt_payload"],
            cols["response_payload"],
            cols["payload_bytes"],
            strict=True,
        ):
            if (escrow, inference) in known:
                listing.skipped += 1
                continue
            if size > MAX_PAYLOAD_FILE_BYTES:  # its bodies were not read (the query left them out)
                problem = f"payload larger than {MAX_PAYLOAD_FILE_BYTES:,} bytes ({size:,})"
                yield RawPayload(epoch, escrow, inference, None, None, problem)
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
    payload_format: str = "json"  # json | json_zst


def _payload_name(name: str) -> tuple[int, str] | None:
    """(inference id, format) of a payload file's name, None for any other name."""
    for suffix, fmt in SUFFIXES:
        if name.endswith(suffix) and NUMBER.match(name[: -len(suffix)]) and in_int64(name[: -len(suffix)]):
            return int(name[: -len(suffix)]), fmt
    return None


def payload_files(
    root: Path, known: set[tuple[str, int]], listing: PayloadListing | None = None
) -> Iterator[PayloadFile]:
    """`root/{epoch}/{escrow}/{inference}.json[.zst]`, in path order, `known` keys skipped (counted in
    `listing.skipped`); the other entries of the directory go to `listing.strays`."""
    listing = listing if listing is not None else PayloadListing()
    if not root.is_dir():
        return
    for epoch_dir in sorted(root.iterdir()):
        if not (epoch_dir.is_dir() and NUMBER.match(epoch_dir.name) and in_int64(epoch_dir.name)):
            listing.strays.append(epoch_dir.name)
            continue
        for escrow_dir in sorted(epoch_dir.iterdir()):
            if not escrow_dir.is_dir():
                listing.strays.append(f"{epoch_dir.name}/{escrow_dir.name}")
                continue
            found: dict[int, tuple[str, Path]] = {}
            for path in sorted(escrow_dir.iterdir()):
                named = _payload_name(path.name)
                if named is None:
                    listing.strays.append(f"{epoch_dir.name}/{escrow_dir.name}/{path.name}")
                elif named[0] in found:  # both names of one answer: the .zst is read
                    listing.superseded += 1
                    if named[1] == "json_zst":
                        found[named[0]] = (named[1], path)
                else:
                    found[named[0]] = (named[1], path)
            for inference_id, (fmt, path) in sorted(found.items()):
                if (escrow_dir.name, inference_id) in known:
                    listing.skipped += 1
                    continue
                try:
                    size = path.stat().st_size
                except OSError:  # e.g. a dangling symlink: reading it reports the problem
                    size = 0
                yield PayloadFile(int(epoch_dir.name), escrow_dir.name, inference_id, path, size, fmt)


class _PayloadFileDoc(msgspec.Struct):
    """The file's object; msgspec decodes the base64 strings into bytes (strictly, padding included)."""

    prompt_payload: bytes | None = None
    response_payload: bytes | None = None


_FILE_DOC = msgspec.json.Decoder(_PayloadFileDoc)


def _decompressed(data: bytes) -> bytes:
    """A zstd frame's content, never more than `MAX_PAYLOAD_FILE_BYTES` of it (zstandard is imported here:
    a copy without compressed payload files, and every network worker, never loads it)."""
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(data)
    out = bytearray()
    try:
        while chunk := reader.read(2**20):
            out += chunk
            if len(out) > MAX_PAYLOAD_FILE_BYTES:
                raise FileReadError(f"larger than {MAX_PAYLOAD_FILE_BYTES:,} bytes once decompressed")
    except zstandard.ZstdError as exc:
        raise FileReadError(f"is not zstd ({exc})") from None
    return bytes(out)


def read_payload_file(f: PayloadFile) -> RawPayload:
    """The file's two base64 fields decoded; a file that cannot be used comes back with `problem` set."""
    ids = (f.epoch_id, f.escrow_id, f.inference_id)
    try:
        data = read_regular_file(f.path, MAX_PAYLOAD_FILE_BYTES)
        if f.payload_format == "json_zst":
            data = _decompressed(data)
    except FileReadError as exc:
        return RawPayload(*ids, None, None, f"payload file {exc}", f.payload_format)
    try:
        doc = _FILE_DOC.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        return RawPayload(*ids, None, None, f"payload file is not a base64 JSON object ({exc})", f.payload_format)
    return RawPayload(*ids, doc.prompt_payload, doc.response_payload, payload_format=f.payload_format)


def file_payloads(root: Path, known: set[tuple[str, int]]) -> Iterator[RawPayload]:
    """`payload_files` read one after the other."""
    return map(read_payload_file, payload_files(root, known))
