"""Scanning of stored answers: sampling parameters and integrity facts of one request/response pair.

The request gives model, temperature, top_p, max_tokens and the logprobs settings (absent
sampling keys are the API defaults, temperature 1 and top_p 1; `*_given` says whether the
request named them). The response is either one `chat.completion` object or an SSE stream of
`chat.completion.chunk` objects ending in `data: [DONE]`, with `usage` in the final chunk
(sources.md §6.2). Per answer we count logprob entries, positions whose `top_logprobs` repeat a
token, NaN and missing logprobs, tokens that are not numeric ids, and whether the answer is empty.

Three scanners give the same facts. First a C scanner (`pipeline._answerscan`,
pipeline/native/answerscan.c) reads, in one pass and without building Python objects, every body
it can read exactly as the reference would (strict JSON, the plain SSE layout, the expected value
types, no duplicate keys) and returns None for anything else. The fast path (`_scan_fast`)
decodes with msgspec into typed structs that name only the fields the checks read (everything
else is skipped without building a Python object), turns an SSE stream into one JSON array so
it is decoded in one call, and counts with C-level list operations; the garbage collector is
paused while a body is scanned (the objects are acyclic). Whatever the fast path cannot take
exactly as the reference would (not strict JSON, e.g. NaN literals; a value of another type than
its struct field; a stream that is truncated, has comment or event lines, or an empty `data:`
line; invalid UTF-8) goes to the reference scanner (`_scan_reference`): orjson, and for a body orjson rejects the standard
library, which accepts the NaN / Infinity literals some engines write, so those still count as
NaN. Results and quarantine reasons are therefore the same whichever path a body takes.
A body that is not JSON, or a stream cut before `[DONE]`, keeps a row with `complete = false`
and NULL checks, and is quarantined with the reason (design.md invariant 4). Raw bodies are
never stored (invariant 8).

This module is pure (bytes in, facts out) and imports no DuckDB or warehouse code, so that worker processes
(`check_payloads`, `check_payload_files`, run by `pipeline.parallel.BatchPool`) start cheaply;
`pipeline.transforms.answers` writes the rows.
"""

from __future__ import annotations

import json
import math
from itertools import chain
from operator import attrgetter, ne
from typing import Any

import msgspec
import orjson

from pipeline.extensions import optional_extension
from pipeline.gcpause import gc_paused
from pipeline.sources.payloads import PayloadFile, RawPayload, read_payload_file

# The C scanner (pipeline/native/answerscan.c): the facts of the bodies it reads exactly, else None and the
# Python paths below decide. Optional at build time; GONKA_EVIDENCE_NATIVE_ANSWERS=0 switches it off.
_native = optional_extension("_answerscan", "GONKA_EVIDENCE_NATIVE_ANSWERS")

ENVELOPE_KEYS = ("request", "payload", "body", "inference_request", "openai_request")


class BodyError(ValueError):
    """A body that cannot be read as the format it claims."""


def _loads(data: bytes):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data)  # NaN / Infinity literals
        except ValueError as exc:
            raise BodyError(f"not JSON ({str(exc).splitlines()[0][:80]})") from None


def scan_request(body: bytes | None) -> dict:
    if not body:
        raise BodyError("empty request body")
    doc = _loads(body)
    for key in ENVELOPE_KEYS:  # an envelope around the chat-completions request (unconfirmed shape)
        if isinstance(doc, dict) and "messages" not in doc and key in doc:
            inner = doc[key]
            doc = _loads(inner.encode() if isinstance(inner, str) else inner) if isinstance(inner, (str, bytes)) else inner
    if not isinstance(doc, dict):
        raise BodyError("request is not a JSON object")
    temperature, top_p = doc.get("temperature"), doc.get("top_p")
    return {
        "model": doc.get("model"),
        "temperature": 1.0 if temperature is None else float(temperature),
        "top_p": 1.0 if top_p is None else float(top_p),
        "temperature_given": temperature is not None, "top_p_given": top_p is not None,
        "max_tokens": _int(doc.get("max_tokens", doc.get("max_completion_tokens"))),
        "logprobs_requested": bool(doc.get("logprobs")) if "logprobs" in doc else None,
        "top_logprobs": _int(doc.get("top_logprobs")), "stream_requested": bool(doc.get("stream", False)),
    }


def _int(value) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


class _Checks:
    __slots__ = ("entries", "dup", "nan", "missing", "not_ids", "chars")

    def __init__(self):
        self.entries = self.dup = self.nan = self.missing = self.not_ids = self.chars = 0

    def add_entries(self, entries) -> None:
        if not entries:
            return
        for e in entries:
            self.entries += 1
            lp = e.get("logprob")
            if lp is None:
                self.missing += 1
            elif lp != lp or (isinstance(lp, str) and lp.strip().lower() in ("nan", "-nan")):
                self.nan += 1
            token = e.get("token")
            if not (isinstance(token, str) and token.isascii() and token.isdigit()):
                self.not_ids += 1
            tops = e.get("top_logprobs")
            if tops and len(tops) > 1:
                tokens = [t.get("token") for t in tops]
                if len(set(tokens)) != len(tokens):
                    self.dup += 1


def scan_response(body: bytes | None) -> dict:
    """Integrity facts of one response body; raises BodyError when it cannot be read to the end."""
    if not body:
        raise BodyError("empty response body")
    if _native is not None:
        facts = _native.scan(body)
        if facts is not None:
            return facts
    with gc_paused():
        facts = _scan_fast(body)
        return facts if facts is not None else _scan_reference(body)


def scan_responses(bodies: list[bytes | None]) -> list[dict | BodyError]:
    """`scan_response` of many bodies: per body its facts, or the BodyError it raises."""
    out: list[dict | BodyError] = []
    with gc_paused():
        for body in bodies:
            try:
                out.append(scan_response(body))
            except BodyError as exc:
                out.append(exc)
    return out


def _scan_reference(body: bytes) -> dict:
    """The reference scanner: orjson (stdlib for NaN / Infinity), per SSE line, per entry."""
    head = body[:64].lstrip()
    checks = _Checks()
    if head.startswith((b"data:", b"event:", b":")):
        usage = _scan_sse(body, checks)
        sse = True
    else:
        doc = _loads(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
            raise BodyError("response is not a chat.completion object")
        for choice in doc["choices"]:
            message = choice.get("message") or {}
            checks.chars += len(message.get("content") or "")
            checks.add_entries((choice.get("logprobs") or {}).get("content"))
        usage = doc.get("usage") or {}
        sse = False
    return {
        "prompt_tokens": _int(usage.get("prompt_tokens")), "completion_tokens": _int(usage.get("completion_tokens")),
        "logprob_tokens": checks.entries, "duplicate_top_logprob_positions": checks.dup, "nan_logprobs": checks.nan,
        "missing_logprobs": checks.missing, "tokens_not_ids": checks.not_ids,
        "empty": checks.chars == 0 and checks.entries == 0, "sse": sse, "complete": True,
    }


def _scan_sse(body: bytes, checks: _Checks) -> dict:
    usage: dict = {}
    done = False
    for line in body.split(b"\n"):
        if not line.startswith(b"data:"):
            continue  # blank separators, comments, event names
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        try:
            chunk = _loads(data)
        except BodyError:
            raise BodyError("SSE stream truncated or corrupt (a chunk is not JSON)") from None
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            checks.chars += len((choice.get("delta") or {}).get("content") or "")
            checks.add_entries((choice.get("logprobs") or {}).get("content"))
    if not done:
        raise BodyError("SSE stream truncated (no data: [DONE])")
    return usage


# -- fast path: msgspec structs naming only the fields the checks read -------------------------------

class _Top(msgspec.Struct, frozen=True, gc=False):  # frozen: hashable by token, for the duplicate check
    token: Any = None


class _Entry(msgspec.Struct, gc=False):
    token: Any = None
    logprob: Any = None
    top_logprobs: list[_Top] | None = None


class _Logprobs(msgspec.Struct, gc=False):
    content: list[_Entry] | None = None


class _Content(msgspec.Struct, gc=False):
    content: str | list | dict | None = None  # what len() takes; a number or bool goes to the reference


class _Choice(msgspec.Struct, gc=False):
    message: _Content | None = None
    delta: _Content | None = None
    logprobs: _Logprobs | None = None


class _Doc(msgspec.Struct, gc=False):  # a chat.completion object, or one chat.completion.chunk
    choices: list[_Choice] | None = None
    usage: Any = None


_DOC = msgspec.json.Decoder(_Doc)
_CHUNKS = msgspec.json.Decoder(list[_Doc])
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])  # the array's elements as their bytes, nothing decoded
_TOKEN, _LOGPROB, _TOPS = attrgetter("token"), attrgetter("logprob"), attrgetter("top_logprobs")
_USAGE, _CHOICES, _LOGPROBS, _CONTENT = attrgetter("usage"), attrgetter("choices"), attrgetter("logprobs"), attrgetter("content")
_MESSAGE, _DELTA = attrgetter("message"), attrgetter("delta")
_ORJSON_INT = (-(2**63), 2**64)  # orjson reads integers outside this range as floats; msgspec exactly


def _scan_fast(body: bytes) -> dict | None:
    """The facts, or None when the reference scanner must decide (see the module docstring)."""
    if not body.isascii():
        try:
            body.decode()  # msgspec does not check the UTF-8 of the strings it skips; orjson/stdlib reject it
        except UnicodeDecodeError:
            return None
    try:
        if body.startswith(b"data:"):
            sse_array = _sse_array(body)
            if sse_array is None:
                return None
            chunks, lines = sse_array
            # Lines the reference rejects can still join into a valid array: a separator inside a chunk
            # (`{"a":1` + `\n\ndata: ` + `"b":2}`) or two chunks on one line (`{...},{...}`). Each element
            # must be one line: no element holds a CR (so every separator is between two elements),
            # and there are as many elements as lines (so no other comma is).
            elements = _ELEMENTS.decode(chunks)
            if len(elements) != lines or b"\r" in b"".join(elements):
                return None
            docs = _CHUNKS.decode(chunks)
            usage: Any = {}
            for usage in filter(None, map(_USAGE, reversed(docs))):  # the last chunk that has one
                break
            choices = list(chain.from_iterable(filter(None, map(_CHOICES, docs))))
            sse = True
        elif body[:64].lstrip().startswith(b"{"):
            doc = _DOC.decode(body)
            if doc.choices is None:
                return None
            choices = doc.choices
            usage = doc.usage or {}
            sse = False
        else:
            return None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    # a _Logprobs struct is always truthy; filter(None) drops the absent ones and empty/null contents
    entries = list(chain.from_iterable(filter(None, map(_CONTENT, filter(None, map(_LOGPROBS, choices))))))
    n, dup, nan, missing, not_ids = _entry_checks(entries)
    # the text only matters for an answer without logprob entries
    empty = n == 0 and not any(t is not None and t.content for t in map(_DELTA if sse else _MESSAGE, choices))
    prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if _beyond_orjson(prompt_tokens) or _beyond_orjson(completion_tokens):
        return None
    return {
        "prompt_tokens": _int(prompt_tokens), "completion_tokens": _int(completion_tokens),
        "logprob_tokens": n, "duplicate_top_logprob_positions": dup, "nan_logprobs": nan, "missing_logprobs": missing,
        "tokens_not_ids": not_ids, "empty": empty, "sse": sse, "complete": True,
    }


def _sse_array(body: bytes) -> tuple[bytearray, int] | None:
    """An SSE stream ending in `data: [DONE]` as one JSON array of its chunks and their number of
    `data:` lines, else None.

    The separator is the one before the `[DONE]` line (`\n\n`, `\r\n\r\n` or `\n`, then `data:`);
    every separator becomes `\r,` (one `bytes.replace`), the first `data:` opens the array and
    the `[DONE]` line closes it: one decode per stream instead of one per line. A newline left
    before `[DONE]` means a line that is not a `data:` line in that layout (comment, event name,
    extra blank line, a chunk continued on the next line): None, the reference decides. A
    separator cannot end up inside a JSON string (a raw CR is invalid there), and an empty
    `data:` line, two values on one line without a comma or an earlier `[DONE]` make the array
    invalid JSON, so the decode fails and the reference, which reads line by line, reports it
    (a separator between two tokens of a chunk, or a comma between two chunks on one line, are
    valid JSON: `_scan_fast` checks the elements against the line count).
    """
    done = body.rfind(b"[DONE]")
    start = body.rfind(b"\n", 0, done) + 1
    if done < 0 or start == 0 or not body.startswith(b"data:", start) or body[start + 5:done].strip() \
            or body[done + 6:].strip():
        return None  # truncated, or anything after [DONE]: the reference decides
    if body.startswith(b"\r\n\r\n", start - 4):
        sep = b"\r\n\r\ndata:"
    elif body.startswith(b"\n\n", start - 2):
        sep = b"\n\ndata:"
    else:
        sep = b"\ndata:"
    joined = body.replace(sep, b"\r,")
    close = joined.rfind(b",", 0, joined.rfind(b"[DONE]"))
    if joined.find(b"\n", 0, close) >= 0:
        return None
    array = bytearray(joined)
    array[0:5] = b"    ["
    array[close] = 0x5D  # "]"
    array[close + 1:] = b" " * (len(array) - close - 1)
    return array, (len(body) - len(joined)) // (len(sep) - 2)  # each separator became 2 bytes


def _entry_checks(entries: list[_Entry]) -> tuple[int, int, int, int, int]:
    """(entries, duplicate positions, NaN, missing, not ids) with the reference's exact rules."""
    n = len(entries)
    if not n:
        return 0, 0, 0, 0, 0
    tokens, logprobs, tops = list(map(_TOKEN, entries)), list(map(_LOGPROB, entries)), list(map(_TOPS, entries))
    missing = logprobs.count(None)
    try:  # all finite numbers (the usual case): no NaN; a NaN or an infinity makes the sum not finite
        total = sum(logprobs if not missing else [v for v in logprobs if v is not None])
        nan = 0 if math.isfinite(total) else None
    except (TypeError, ValueError, OverflowError):
        nan = None
    if nan is None:
        nan = sum(1 for v in logprobs if v is not None and
                  (v != v or (isinstance(v, str) and v.strip().lower() in ("nan", "-nan"))))
    try:  # every token a non-empty ASCII digit string (the usual case)
        joined = "".join(tokens)
        not_ids = 0 if joined.isascii() and joined.isdigit() and all(tokens) else None
    except TypeError:
        not_ids = None
    if not_ids is None:
        not_ids = sum(1 for t in tokens if not (isinstance(t, str) and t.isascii() and t.isdigit()))
    if tops.count(None):
        tops = [t or () for t in tops]
    lens, distinct = list(map(len, tops)), list(map(len, map(set, tops)))  # a set of _Top is the set of their tokens
    dup = 0 if distinct == lens else sum(map(ne, distinct, lens))
    return n, dup, nan, missing, not_ids


def _beyond_orjson(value) -> bool:
    """An integer orjson reads as a float. The reference's value then depends on whether orjson or the
    standard library (exact) read the body, e.g. orjson rejects `1e999` elsewhere in it: the reference decides."""
    return isinstance(value, int) and not isinstance(value, bool) and not _ORJSON_INT[0] <= value < _ORJSON_INT[1]


NULL_CHECKS = dict.fromkeys(("prompt_tokens", "completion_tokens", "logprob_tokens", "duplicate_top_logprob_positions",
                             "nan_logprobs", "missing_logprobs", "tokens_not_ids", "empty"))
NULL_REQUEST = dict.fromkeys(("model", "temperature", "top_p", "temperature_given", "top_p_given", "max_tokens",
                              "logprobs_requested", "top_logprobs", "stream_requested"))


def check_payload(p: RawPayload) -> tuple[dict, list[str]]:
    """One answer_checks_t row (without run/source ids) and the problems found."""
    row = {"epoch_id": p.epoch_id, "escrow_id": p.escrow_id, "inference_id": p.inference_id,
           "response_bytes": len(p.response) if p.response is not None else None}
    if p.problem:
        return row | NULL_REQUEST | NULL_CHECKS | {"sse": None, "complete": False, "problem": p.problem}, [p.problem]
    problems = []
    try:
        row |= scan_request(p.prompt)
    except BodyError as exc:
        problems.append(f"prompt_payload: {exc}")
        row |= NULL_REQUEST
    try:
        row |= scan_response(p.response)
    except BodyError as exc:
        problems.append(f"response_payload: {exc}")
        row |= NULL_CHECKS | {"sse": (p.response or b"")[:64].lstrip().startswith(b"data:"), "complete": False}
    row["problem"] = "; ".join(problems) or None
    return row, problems


def check_payloads(payloads: list[RawPayload]) -> list[tuple[dict, list[str]]]:
    """`check_payload` of each payload, in order (a batch for `BatchPool.map`)."""
    with gc_paused():
        return [check_payload(p) for p in payloads]


def check_payload_files(files: list[PayloadFile]) -> list[tuple[dict, list[str]]]:
    """`check_payload` of each payload file, read and decoded here (in the worker), one at a time."""
    with gc_paused():
        return [check_payload(read_payload_file(f)) for f in files]


__all__ = ["BodyError", "NULL_CHECKS", "NULL_REQUEST", "check_payload", "check_payload_files", "check_payloads",
           "scan_request", "scan_response", "scan_responses"]
