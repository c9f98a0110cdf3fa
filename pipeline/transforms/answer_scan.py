"""Scanning of stored answers: sampling parameters and integrity facts of one request/response pair.

The request gives model, temperature, top_p, max_tokens and the logprobs settings (absent
sampling keys are the API defaults, temperature 1 and top_p 1; `*_given` says whether the
request named them). The response is either one `chat.completion` object or an SSE stream of
`chat.completion.chunk` objects ending in `data: [DONE]`, with `usage` in the final chunk (the
layouts are described in docs/sources.md, Payloads). Per answer we count logprob entries, positions whose
`top_logprobs` repeat a token, NaN and missing logprobs, tokens that are not numeric ids, and
whether the answer is empty.

The grammar, written once:
- A body is UTF-8 JSON as Python's `json` module reads it: standard JSON plus the `NaN` /
  `Infinity` literals some engines write (Python's own `json.dumps` does), integers of any length.
- Its shape is the msgspec structs below, which name only the fields the checks read; a value of
  another type than its field (a `choices` that is not a list, a `message` that is not an object,
  a top-logprob token that is a list, ...) makes the body unreadable, with msgspec's path to it.
- An SSE stream is read line by line: lines starting with `data:` carry one chunk each, every other
  line (blank separators, comments, `event:`/`id:` fields) is ignored, the first `data: [DONE]` ends
  it; a `data:` line that is not one JSON chunk, or no `[DONE]`, makes it unreadable.
- Usage counts, `max_tokens` and `top_logprobs` must fit the warehouse's 64-bit integers.

msgspec decodes straight into the structs (nothing is built for the fields the structs do not
name); a body msgspec refuses (a NaN literal, a lone surrogate escape, a number beyond its range,
or simply not JSON) is read by the `json` module and converted into the same structs, and that
answer decides. The facts are then computed from the structs by one function for both.

An unreadable body keeps a row with `complete = false` and NULL checks and is quarantined with
the reason; raw bodies are never stored.

This module is pure (bytes in, facts out) and imports no DuckDB or warehouse code, so that worker
processes (`check_payloads`, `check_payload_files`, run by `pipeline.core.parallel.BatchPool`) start
cheaply; `pipeline.ingest.payloads` writes the rows.
"""

from __future__ import annotations

import json
import math
import re
from itertools import chain
from operator import attrgetter, ne
from typing import Any

import msgspec

from pipeline.core.gcpause import gc_paused
from pipeline.sources.store.payloads import PayloadFile, RawPayload, read_payload_file

ENVELOPE_KEYS = ("request", "payload", "body", "inference_request", "openai_request")
INT64 = (-(2**63), 2**63)  # the warehouse's BIGINT columns
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
MAX_INT_DIGITS = 4300  # Python's default limit for int(str); longer integers are read as ±infinity


class BodyError(ValueError):
    """A body that cannot be read as the format it claims."""


# -- the shape: what the checks read, nothing else ----------------------------------------------------

Scalar = str | int | float | bool | None


class _Top(msgspec.Struct, frozen=True, gc=False):  # frozen: hashable by token, for the duplicate check
    token: Scalar = None


class _Entry(msgspec.Struct, gc=False):
    token: Any = None
    logprob: Any = None
    top_logprobs: list[_Top] | None = None


class _Logprobs(msgspec.Struct, gc=False):
    content: list[_Entry] | None = None


class _Content(msgspec.Struct, gc=False):
    content: str | list | dict | None = None  # what len() takes


class _Choice(msgspec.Struct, gc=False):
    message: _Content | None = None
    delta: _Content | None = None
    logprobs: _Logprobs | None = None


class _Doc(msgspec.Struct, gc=False):  # a chat.completion object, or one chat.completion.chunk
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None


_DOC = msgspec.json.Decoder(_Doc)
_ANY = msgspec.json.Decoder()
_TOKEN, _LOGPROB, _TOPS = attrgetter("token"), attrgetter("logprob"), attrgetter("top_logprobs")
_CHOICES, _LOGPROBS, _CONTENT = attrgetter("choices"), attrgetter("logprobs"), attrgetter("content")
_MESSAGE, _DELTA = attrgetter("message"), attrgetter("delta")


def _json_int(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else float(text)  # float(): ±inf


def _decode(data: bytes, decoder: msgspec.json.Decoder, what: str):
    """`data` decoded by msgspec, else as `_lenient` reads it."""
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _lenient(data, decoder is _ANY, what)


def _lenient(data: bytes, untyped: bool, what: str):
    """`data` read by the `json` module (what msgspec refuses: NaN literals, lone surrogate escapes,
    numbers beyond its range) and converted to the structs; this answer decides."""
    try:
        value = json.loads(data.decode(), parse_int=_json_int)
    except UnicodeDecodeError as exc:
        raise BodyError(f"not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise BodyError("not JSON (nested too deeply)") from None
    except ValueError as exc:
        raise BodyError(f"not JSON ({str(exc).splitlines()[0][:80]})") from None
    if _SURROGATE_ESCAPE.search(data):
        try:  # a \uD800-\uDFFF escape outside a pair is no text (msgspec refuses it too)
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise BodyError("not JSON (a lone surrogate escape)") from None
    if untyped:
        return value
    try:
        return msgspec.convert(value, _Doc)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise BodyError(f"{what} ({str(exc)[:120]})") from None


# -- requests -------------------------------------------------------------------------------------------


def scan_request(body: bytes | None) -> dict:
    if not body:
        raise BodyError("empty request body")
    doc = _decode(body, _ANY, "request")
    for key in ENVELOPE_KEYS:  # an envelope around the chat-completions request (unconfirmed shape)
        if isinstance(doc, dict) and "messages" not in doc and key in doc:
            inner = doc[key]
            doc = _decode(inner.encode(errors="surrogatepass"), _ANY, "request") if isinstance(inner, str) else inner
    if not isinstance(doc, dict):
        raise BodyError("request is not a JSON object")
    temperature, top_p = doc.get("temperature"), doc.get("top_p")
    return {
        "model": doc.get("model") if isinstance(doc.get("model"), str) else None,
        "temperature": 1.0 if temperature is None else _float(temperature, "temperature"),
        "top_p": 1.0 if top_p is None else _float(top_p, "top_p"),
        "temperature_given": temperature is not None,
        "top_p_given": top_p is not None,
        "max_tokens": _count(doc.get("max_tokens", doc.get("max_completion_tokens")), "max_tokens"),
        "logprobs_requested": bool(doc.get("logprobs")) if "logprobs" in doc else None,
        "top_logprobs": _count(doc.get("top_logprobs"), "top_logprobs"),
        "stream_requested": bool(doc.get("stream", False)),
        # what the client set of the parameters devshardd injects (docs/sources.md, payloads)
        "seed_given": doc.get("seed") is not None,
        "min_tokens": _count(doc.get("min_tokens"), "min_tokens"),
        "logprobs_mode": doc.get("logprobs_mode") if isinstance(doc.get("logprobs_mode"), str) else None,
    }


def _float(value, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise BodyError(f"{name} is not a number") from None


def _count(value, name: str) -> int | None:
    """A whole count: None when absent or not a number (as before), a BodyError beyond 64 bits."""
    try:
        count = None if value is None else int(value)
    except (TypeError, ValueError):
        return None
    except OverflowError:  # an infinite float
        raise BodyError(f"{name} is beyond 64 bits") from None
    if count is not None and not INT64[0] <= count < INT64[1]:
        raise BodyError(f"{name} is beyond 64 bits")
    return count


# -- responses ------------------------------------------------------------------------------------------


def scan_response(body: bytes | None) -> dict:
    """Integrity facts of one response body; raises BodyError when it cannot be read to the end."""
    if not body:
        raise BodyError("empty response body")
    if not body.isascii():  # msgspec does not check the UTF-8 of the strings it skips
        try:
            body.decode()
        except UnicodeDecodeError as exc:
            raise BodyError(f"not UTF-8 (byte {exc.start})") from None
    with gc_paused():
        if body[:64].lstrip().startswith((b"data:", b"event:", b":")):
            docs, sse = _sse_chunks(body), True
            # usage from the last chunk that has one
            usage = next(filter(None, map(attrgetter("usage"), reversed(docs))), None)
            choices = list(chain.from_iterable(filter(None, map(_CHOICES, docs))))
        else:
            doc = _decode(body, _DOC, "response is not a chat.completion object")
            if doc.choices is None:
                raise BodyError("response is not a chat.completion object (no choices)")
            choices, usage, sse = doc.choices, doc.usage, False
        return _facts(choices, usage or {}, sse)


def _sse_chunks(body: bytes) -> list[_Doc]:
    """The chunks of an SSE stream, up to its first `data: [DONE]`."""
    data_lines = [line[5:] for line in body.split(b"\n") if line.startswith(b"data:")]
    docs: list[_Doc] = []
    decode = _DOC.decode
    while True:
        try:
            for data in data_lines[len(docs) :]:  # the usual case: every chunk in msgspec, one call per line
                docs.append(decode(data))
            break
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            data = data_lines[len(docs)]
            if data.strip() == b"[DONE]":
                return docs
            try:
                docs.append(_lenient(data, False, "SSE chunk is not a chat.completion.chunk"))
            except BodyError as exc:
                if str(exc).startswith("not JSON"):
                    raise BodyError("SSE stream truncated or corrupt (a chunk is not JSON)") from None
                raise
    raise BodyError("SSE stream truncated (no data: [DONE])")


def _facts(choices: list[_Choice], usage: dict, sse: bool) -> dict:
    # a _Logprobs struct is always truthy; filter(None) drops the absent ones and empty/null contents
    entries = list(chain.from_iterable(filter(None, map(_CONTENT, filter(None, map(_LOGPROBS, choices))))))
    n, dup, nan, missing, not_ids = _entry_checks(entries)
    # the text only matters for an answer without logprob entries
    empty = n == 0 and not any(t is not None and t.content for t in map(_DELTA if sse else _MESSAGE, choices))
    return {
        "prompt_tokens": _count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        "completion_tokens": _count(usage.get("completion_tokens"), "usage.completion_tokens"),
        "logprob_tokens": n,
        "duplicate_top_logprob_positions": dup,
        "nan_logprobs": nan,
        "missing_logprobs": missing,
        "tokens_not_ids": not_ids,
        "empty": empty,
        "sse": sse,
        "complete": True,
    }


def _is_nan(value) -> bool:
    return value != value or (isinstance(value, str) and value.strip().lower() in ("nan", "-nan"))


def _entry_checks(entries: list[_Entry]) -> tuple[int, int, int, int, int]:
    """(entries, duplicate positions, NaN, missing, not ids).

    An entry's logprob is missing when null or absent and NaN when a NaN number or the string
    "nan"/"-nan"; its token is an id when it is a string of ASCII digits; a position is a duplicate
    when two of its top_logprobs name the same token. Each count first tries the whole list at once
    (the usual case: all finite numbers, all ids, no repeats) and counts one by one only if that fails."""
    n = len(entries)
    if not n:
        return 0, 0, 0, 0, 0
    tokens, logprobs, tops = list(map(_TOKEN, entries)), list(map(_LOGPROB, entries)), list(map(_TOPS, entries))
    missing = logprobs.count(None)
    try:  # all finite numbers: no NaN; a NaN or an infinity makes the sum not finite
        total = sum(logprobs if not missing else [v for v in logprobs if v is not None])
        nan = 0 if math.isfinite(total) else None
    except (TypeError, ValueError, OverflowError):
        nan = None
    if nan is None:
        nan = sum(1 for v in logprobs if v is not None and _is_nan(v))
    try:  # every token a non-empty ASCII digit string
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


# -- rows -----------------------------------------------------------------------------------------------

NULL_CHECKS = dict.fromkeys(
    (
        "prompt_tokens",
        "completion_tokens",
        "logprob_tokens",
        "duplicate_top_logprob_positions",
        "nan_logprobs",
        "missing_logprobs",
        "tokens_not_ids",
        "empty",
    )
)
NULL_REQUEST = dict.fromkeys(
    (
        "model",
        "temperature",
        "top_p",
        "temperature_given",
        "top_p_given",
        "max_tokens",
        "logprobs_requested",
        "top_logprobs",
        "stream_requested",
        "seed_given",
        "min_tokens",
        "logprobs_mode",
    )
)


def check_payload(p: RawPayload) -> tuple[dict, list[str]]:
    """One answer_checks_t row (without run/source ids) and the problems found."""
    row = {
        "epoch_id": p.epoch_id,
        "escrow_id": p.escrow_id,
        "inference_id": p.inference_id,
        "response_bytes": len(p.response) if p.response is not None else None,
        "payload_format": p.payload_format,
    }
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


__all__ = [
    "BodyError",
    "NULL_CHECKS",
    "NULL_REQUEST",
    "check_payload",
    "check_payload_files",
    "check_payloads",
    "scan_request",
    "scan_response",
]
