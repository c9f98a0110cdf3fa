"""Integrity faults planted into the stored response bodies of a copy, and the per-answer truth.

Faults (the body layouts are in docs/sources.md, Payloads), each planted in one JSON body and one SSE body:
- ``token_mismatch``: usage.completion_tokens is 3 more than the logprob entries;
- ``duplicate_top``: a position whose top_logprobs repeat a token (2 positions in the JSON body,
  1 in the SSE body);
- ``nan_logprob``: one entry's logprob is a literal NaN (not strict JSON);
- ``missing_logprob``: entries whose logprob is null (JSON body: 2) or absent (SSE body: 1);
- ``tokens_text``: every token named by text instead of a numeric id;
- ``empty``: no content, no logprobs, completion_tokens 0;
- ``not_json`` (JSON form only): the body is not JSON at all → quarantine;
- ``truncated`` (SSE form only): the stream stops mid-chunk, without ``data: [DONE]``.

The truth is computed from the structured bodies the generator built (stdlib json), not by
the pipeline's scanner.
"""

from __future__ import annotations

import json
import math

import polars as pl

from .scenario import InferencePlan

FAULTS = ("token_mismatch", "duplicate_top", "nan_logprob", "missing_logprob", "tokens_text", "empty")
MALFORMED = {"json": "not_json", "sse": "truncated"}

TRUTH_SCHEMA = {
    "epoch_id": pl.Int64,
    "escrow_id": pl.String,
    "inference_id": pl.Int64,
    "temperature": pl.Float64,
    "top_p": pl.Float64,
    "completion_tokens": pl.Int64,
    "logprob_tokens": pl.Int64,
    "duplicate_top_logprob_positions": pl.Int64,
    "nan_logprobs": pl.Int64,
    "missing_logprobs": pl.Int64,
    "tokens_not_ids": pl.Int64,
    "empty": pl.Boolean,
    "sse": pl.Boolean,
    "complete": pl.Boolean,
    "fault": pl.String,
}


def _sse_events(body: bytes) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in body.decode().split("\n\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _sse_body(events: list[dict]) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events)
        + b"data: [DONE]\n\n"
    )


def _entries(events_or_obj, sse: bool) -> list[dict]:
    if not sse:
        return events_or_obj["choices"][0]["logprobs"]["content"]
    return [
        e
        for ev in events_or_obj
        for ch in ev.get("choices", [])
        for e in ((ch.get("logprobs") or {}).get("content") or [])
    ]


def _apply(fault: str, doc, sse: bool) -> None:
    entries = _entries(doc, sse)
    usage = (doc[-1] if sse else doc)["usage"]
    if fault == "token_mismatch":
        usage["completion_tokens"] += 3
        usage["total_tokens"] += 3
    elif fault == "duplicate_top":
        for entry in entries[: 1 if sse else 2]:
            entry["top_logprobs"][2]["token"] = entry["top_logprobs"][1]["token"]
    elif fault == "nan_logprob":
        entries[0]["logprob"] = math.nan
    elif fault == "missing_logprob":
        if sse:
            del entries[0]["logprob"]
        else:
            entries[0]["logprob"] = entries[1]["logprob"] = None
    elif fault == "tokens_text":
        for k, entry in enumerate(entries):
            entry["token"] = f"word{k}"
    elif fault == "empty":
        usage["total_tokens"] -= usage["completion_tokens"]
        usage["completion_tokens"] = 0
        if sse:
            doc[:] = doc[-1:]
        else:
            doc["choices"][0]["message"]["content"] = ""
            doc["choices"][0]["logprobs"] = {"content": []}


def _facts(doc, sse: bool) -> dict:
    entries = _entries(doc, sse)
    usage = (doc[-1] if sse else doc)["usage"]
    if sse:
        text = "".join((ch.get("delta") or {}).get("content") or "" for ev in doc for ch in ev.get("choices", []))
    else:
        text = doc["choices"][0]["message"]["content"] or ""
    dup = 0
    for e in entries:
        tokens = [t["token"] for t in e.get("top_logprobs") or []]
        dup += len(tokens) != len(set(tokens))
    return {
        "completion_tokens": usage["completion_tokens"],
        "logprob_tokens": len(entries),
        "duplicate_top_logprob_positions": dup,
        "nan_logprobs": sum(isinstance(e.get("logprob"), float) and math.isnan(e["logprob"]) for e in entries),
        "missing_logprobs": sum(e.get("logprob") is None for e in entries),
        "tokens_not_ids": sum(not str(e.get("token", "")).isdigit() for e in entries),
        "empty": text == "" and not entries,
    }


def plant(payloads: list[dict], plans: dict[tuple[str, int], InferencePlan], malformed: bool = False) -> pl.DataFrame:
    """Fault the response bodies of `payloads` in place; return the truth of every payload.

    `plans` maps (escrow_id, inference_id) to the InferencePlan (sampling parameters, stream flag).
    `malformed` also plants the two unreadable bodies (quarantined at ingest; off by default so a
    default copy's quarantine holds only the session-store problems).
    """
    ordered = sorted(payloads, key=lambda p: (p["epoch_id"], p["escrow_id"], p["inference_id"]))
    queues = {form: [*FAULTS, *([MALFORMED[form]] if malformed else [])] for form in MALFORMED}
    rows = []
    for k, payload in enumerate(ordered):
        plan = plans[(payload["escrow_id"], payload["inference_id"])]
        sse = plan.stream
        form = "sse" if sse else "json"
        # Faults go to every third answer of each form, so they spread over escrows and epochs.
        fault = queues[form].pop(0) if queues[form] and k % 3 == 0 else None
        body = payload["response_payload"]
        doc = _sse_events(body) if sse else json.loads(body)
        row = {
            "epoch_id": payload["epoch_id"],
            "escrow_id": payload["escrow_id"],
            "inference_id": payload["inference_id"],
            "temperature": 1.0 if plan.temperature is None else plan.temperature,
            "top_p": 1.0 if plan.top_p is None else plan.top_p,
            "sse": sse,
            "fault": fault,
        }
        if fault == "not_json":
            payload["response_payload"] = b"<html>502 Bad Gateway</html>"
            rows.append(row | {"complete": False})
            continue
        if fault == "truncated":
            cut = body.rfind(b"data: ", 0, len(body) // 2)
            payload["response_payload"] = body[: cut + 20]
            rows.append(row | {"complete": False})
            continue
        if fault:
            _apply(fault, doc, sse)
            payload["response_payload"] = _sse_body(doc) if sse else json.dumps(doc, separators=(",", ":")).encode()
        rows.append(row | _facts(doc, sse) | {"complete": True})
    if any(queues.values()):
        raise ValueError(f"too few payloads to plant every fault: {queues}")
    return pl.DataFrame(rows, schema=TRUTH_SCHEMA)
