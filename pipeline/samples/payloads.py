"""Prompt and response bodies (docs/sources.md, Payloads): chat-completions requests and answers."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

_PROMPTS = (
    "Summarise the rules of chess in one sentence.",
    "What is the capital of Australia?",
    "Write a haiku about distributed consensus.",
    "Explain speculative decoding briefly.",
    "Translate 'good morning' into French.",
    "Give one use of a Merkle tree.",
    "Name three prime numbers above 100.",
    "Why is the sky blue? Answer shortly.",
)
_WORDS = (
    "the",
    "a",
    "node",
    "vote",
    "token",
    "model",
    "answer",
    "is",
    "of",
    "and",
    "to",
    "in",
    "block",
    "proof",
    "fast",
    "valid",
    "chain",
    "host",
    "yes",
    "it",
)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def request_body(
    rng: random.Random, model: str, max_tokens: int, temperature: float | None, top_p: float | None, stream: bool
) -> bytes:
    """An OpenAI chat-completions request; absent sampling keys mean the API defaults (1, 1)."""
    body: dict = {
        "model": model,
        "messages": [{"role": "user", "content": rng.choice(_PROMPTS)}],
        "max_tokens": max_tokens,
    }
    if temperature is not None:
        body["temperature"] = temperature
    if top_p is not None:
        body["top_p"] = top_p
    body.update(logprobs=True, top_logprobs=5, stream=stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
    return _dumps(body)


def _logprob_entry(rng: random.Random) -> tuple[str, dict]:
    token_id = rng.randrange(100, 129000)
    best = round(-rng.random() * 0.5, 4)
    alternatives: list[dict[str, Any]] = [{"token": str(token_id), "logprob": best}]
    for _ in range(4):
        alternatives.append(
            {"token": str(rng.randrange(100, 129000)), "logprob": round(best - 1 - rng.random() * 6, 4)}
        )
    alternatives[1:] = sorted(alternatives[1:], key=lambda a: -a["logprob"])
    return str(token_id), {"token": str(token_id), "logprob": best, "top_logprobs": alternatives}


def response_body(
    rng: random.Random,
    model: str,
    inference_id: int,
    created: int,
    prompt_tokens: int,
    completion_tokens: int,
    stream: bool,
) -> bytes:
    """A chat.completion object, or an SSE stream of chunks with usage in the final chunk."""
    completion_id = f"chatcmpl-{inference_id:06d}{rng.randrange(16**6):06x}"
    pieces, entries = [], []
    for position in range(completion_tokens):
        _, entry = _logprob_entry(rng)
        entries.append(entry)
        pieces.append(("" if position == 0 else " ") + rng.choice(_WORDS))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if not stream:
        return _dumps(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(pieces)},
                        "logprobs": {"content": entries},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
        )
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
    events = []
    for piece, entry in zip(pieces, entries, strict=True):
        events.append(
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {"content": piece}, "logprobs": {"content": [entry]}, "finish_reason": None}
                ],
            }
        )
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
    lines = [b"data: " + _dumps(event) + b"\n\n" for event in events]
    return b"".join(lines) + b"data: [DONE]\n\n"


def payload_file(prompt: bytes, response: bytes) -> bytes:
    """`payloads/{epoch}/{escrow}/{inference}.json` as Go's encoding/json writes it (bytes → base64)."""
    return _dumps(
        {"prompt_payload": base64.b64encode(prompt).decode(), "response_payload": base64.b64encode(response).decode()}
    )
