"""The stored-answer scanner (`pipeline.transforms.answer_scan`) against an independent oracle.

The oracle below reads the grammar the scanner's module docstring states with the standard
library alone (`json.loads`, plain dict and list walks, per SSE line), never msgspec. Checked on edge
bodies, traps (duplicate and escaped keys, escapes, invalid UTF-8, number forms and sizes, usage
integers beyond 64 bits, nesting depth, value types, SSE layouts, chunks split over lines), generated
bodies with planted faults, and seeded random mutations of real bodies. Ordinary bodies must be read
by msgspec alone, without the `json` module.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from pipeline.samples.payloads import response_body
from pipeline.transforms import answer_scan
from pipeline.transforms.answer_scan import BodyError, scan_response

INT64 = (-(2**63), 2**63)


class Unreadable(Exception):
    """The oracle's verdict on a body the grammar cannot read, with its kind."""


def _json(data: bytes):
    def big(text):  # integers beyond Python's 4,300-digit limit read as ±infinity
        return int(text) if len(text.lstrip("-")) <= 4300 else float(text)

    try:
        value = json.loads(data.decode(), parse_int=big)
        if re.search(rb"\\u[dD][89a-fA-F]", data):  # a surrogate escape: it must be part of a pair
            json.dumps(value, ensure_ascii=False).encode()
        return value
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        raise Unreadable("not JSON") from None


def _obj(value, where):
    if value is not None and not isinstance(value, dict):
        raise Unreadable(f"shape: {where}")
    return value


def _list(value, where):
    if value is not None and not isinstance(value, list):
        raise Unreadable(f"shape: {where}")
    return value or []


def _shape(doc) -> dict:
    """The document checked against the grammar's types (what the structs allow)."""
    _obj(doc, "document")
    if doc is None:
        raise Unreadable("shape: document")
    for choice in _list(doc.get("choices"), "choices"):
        if not isinstance(choice, dict):
            raise Unreadable("shape: choice")
        for part in ("message", "delta"):
            content = (_obj(choice.get(part), part) or {}).get("content")
            if content is not None and not isinstance(content, (str, list, dict)):
                raise Unreadable("shape: content")
        for entry in _list((_obj(choice.get("logprobs"), "logprobs") or {}).get("content"), "logprobs.content"):
            _obj(entry, "entry")
            if entry is None:
                raise Unreadable("shape: entry")
            for top in _list(entry.get("top_logprobs"), "top_logprobs"):
                if not isinstance(top, dict) or isinstance(top.get("token"), (list, dict)):
                    raise Unreadable("shape: top")
    _obj(doc.get("usage"), "usage")
    return doc


def _count(value):
    try:
        count = None if value is None else int(value)
    except (TypeError, ValueError):
        return None
    except OverflowError:
        raise Unreadable("range") from None
    if count is not None and not INT64[0] <= count < INT64[1]:
        raise Unreadable("range")
    return count


def oracle(body: bytes) -> dict:
    """The facts of one response body by the standard library, or Unreadable."""
    if not body:
        raise Unreadable("empty")
    try:
        body.decode()
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8") from None
    if body[:64].lstrip().startswith((b"data:", b"event:", b":")):
        docs, sse = [], True
        for line in body.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            if line[5:].strip() == b"[DONE]":
                break
            try:
                docs.append(_shape(_json(line[5:])))
            except Unreadable as exc:
                raise Unreadable("SSE corrupt" if str(exc) == "not JSON" else str(exc)) from None
        else:
            raise Unreadable("SSE no [DONE]")
        usage = next((d["usage"] for d in reversed(docs) if d.get("usage")), {})
        choices = [c for d in docs for c in d.get("choices") or []]
    else:
        doc = _shape(_json(body))
        if doc.get("choices") is None:
            raise Unreadable("shape: no choices")
        docs, sse, usage, choices = [doc], False, doc.get("usage") or {}, doc["choices"]
    n = dup = nan = missing = not_ids = 0
    text = False
    for choice in choices:
        text = text or bool((choice.get("delta" if sse else "message") or {}).get("content"))
        for e in (choice.get("logprobs") or {}).get("content") or []:
            n += 1
            lp = e.get("logprob")
            if lp is None:
                missing += 1
            elif lp != lp or (isinstance(lp, str) and lp.strip().lower() in ("nan", "-nan")):
                nan += 1
            token = e.get("token")
            if not (isinstance(token, str) and token.isascii() and token.isdigit()):
                not_ids += 1
            tokens = [t.get("token") for t in e.get("top_logprobs") or []]
            dup += len(set(tokens)) != len(tokens)
    return {
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "logprob_tokens": n,
        "duplicate_top_logprob_positions": dup,
        "nan_logprobs": nan,
        "missing_logprobs": missing,
        "tokens_not_ids": not_ids,
        "empty": n == 0 and not text,
        "sse": sse,
        "complete": True,
    }


def _kind(reason: str) -> str:
    """The oracle's kind of a scanner's BodyError reason."""
    for prefix, kind in (
        ("empty", "empty"),
        ("not UTF-8", "not UTF-8"),
        ("SSE stream truncated or corrupt", "SSE corrupt"),
        ("SSE stream truncated (no", "SSE no [DONE]"),
        ("not JSON", "not JSON"),
        ("usage.", "range"),
    ):
        if reason.startswith(prefix):
            return kind
    return "shape"


def _same_as_oracle(body: bytes) -> dict | str:
    """The scanner's facts, which must be the oracle's; or the kind of unreadable body both report."""
    try:
        want = oracle(body)
    except Unreadable as exc:
        want = str(exc).split(":")[0]
    try:
        got = scan_response(body)
    except BodyError as exc:
        got = _kind(str(exc))
    assert got == want, body[:300]
    return got


def _entry(tok='"1"', lp="-0.5", tops='[{"token":"1","logprob":-0.5},{"token":"2","logprob":-1}]'):
    return f'{{"token":{tok},"logprob":{lp},"top_logprobs":{tops}}}'


def _json_body(entries, content='"hi"', usage='{"prompt_tokens":3,"completion_tokens":2}', extra=""):
    return (
        f'{{"id":"x","choices":[{{"index":0,"message":{{"role":"assistant","content":{content}}},'
        f'"logprobs":{{"content":[{",".join(entries)}]}}}}],'
        f'"usage":{usage}{extra}}}'
    ).encode()


def _sse_body(entries, usage='{"prompt_tokens":3,"completion_tokens":2}', sep="\n\n", tail="data: [DONE]\n\n", pre=""):
    chunks = [
        f'{{"id":"x","choices":[{{"index":0,"delta":{{"content":"w"}},"logprobs":{{"content":[{e}]}}}}]}}'
        for e in entries
    ]
    chunks.append(f'{{"id":"x","choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{usage}}}')
    return (pre + "".join("data: " + c + sep for c in chunks) + tail).encode()


EDGE_BODIES = [
    # logprob values: NaN literal (not strict JSON), null, NaN as a string, Infinity, RapidJSON-only literals
    *(_json_body([_entry(lp=lp)]) for lp in ("NaN", "null", '"nan"', '" -NaN "', "Infinity", "1e999", "-Inf", "0")),
    # tokens: a number, text, empty, a non-ASCII digit, an escaped digit, null, absent
    *(_json_body([_entry(tok=tok)]) for tok in ("123", '"12a"', '""', '"\\u0663"', '"\\u0031"', "null")),
    _json_body(['{"logprob":-1}']),
    # top_logprobs: repeated token, absent tokens, number vs float, empty, null, an object, a null item, one item
    *(
        _json_body([_entry(tops=tops)])
        for tops in (
            '[{"token":"1"},{"token":"1"}]',
            '[{"token":"1"},{}]',
            "[{},{}]",
            '[{"token":1},{"token":1.0}]',
            "[]",
            "null",
            "{}",
            "[null]",
            '[{"token":"1"}]',
        )
    ),
    # content and usage shapes
    *(_json_body([], content=c) for c in ('""', "null", "[]", '["a"]', "{}")),
    *(
        _json_body([_entry()], usage=u)
        for u in (
            "{}",
            "null",
            '{"completion_tokens":2.0}',
            '{"completion_tokens":"7"}',
            '{"completion_tokens":123456789012345678901234567890}',
        )
    ),
    # not JSON, or not the shape: lone surrogate, truncated, arrays, no choices, bad UTF-8 (read or skipped), raw tab
    _json_body([_entry()], extra=',"x":"\\ud800"'),
    _json_body([_entry()])[:-5],
    b"[1,2]",
    b'{"choices":5}',
    b'{"usage":{}}',
    b'{"choices":null}',
    b'{"choices":[]}',
    b"not json",
    b"  " + _json_body([_entry()]),
    _json_body([_entry()]).replace(b'"hi"', b'"h\xff"'),
    _json_body([_entry()], extra=',"x":"\xff"'),
    _json_body([_entry()]).replace(b'"hi"', b'"h\xc3\xa9"'),
    _json_body([_entry()]).replace(b'"hi"', b'"h\ti"'),
    _json_body([_entry()]).replace(b',"usage"', b',\n"usage"'),
    _json_body([_entry()], extra=',"choices":null'),
    # SSE: line endings, [DONE] variants, truncation, comments, events, empty data lines, two objects on a line
    _sse_body([_entry(), _entry()]),
    _sse_body([_entry(lp="NaN")]),
    _sse_body([_entry(tok='"w1"')]),
    _sse_body([_entry()], sep="\n"),
    _sse_body([_entry()], sep="\r\n\r\n"),
    _sse_body([_entry()], tail="data:[DONE]\n"),
    _sse_body([_entry()], tail="data: [DONE]"),
    _sse_body([_entry()], tail=""),
    _sse_body([_entry()])[:-20],
    _sse_body([_entry()], tail="data: [DONE]\n\ndata: {}\n\n"),
    _sse_body([_entry()], tail="data: [DONE]\n\ndata: [DONE]\n\n"),
    _sse_body([_entry()], pre=": comment\n\n"),
    _sse_body([_entry()], pre="event: x\n"),
    _sse_body([_entry()], pre="data:\n\n"),
    _sse_body([_entry()], pre="data: \n\n"),
    _sse_body([_entry()], pre='data: {"choices":[]} {"choices":[]}\n\n'),
    _sse_body([_entry()], pre="data: 5\n\n"),
    _sse_body([_entry()], pre=" "),
    _sse_body([]),
    _sse_body([_entry()], usage="{}"),
    _sse_body([_entry()], usage='{"total_tokens":5}'),
    _sse_body([_entry()], usage="null"),
    _sse_body([_entry()], pre='data: {"choices":[],"usage":{"prompt_tokens":9}}\n\nid: 3\n'),
    _sse_body([_entry()]).replace(b'"w"', b'"a\nb"', 1),
    _sse_body([_entry()]).replace(b'"w"', b'"x [DONE]"', 1),
    _sse_body([_entry()], pre='data: {"choices":{}}\n\n'),
    _sse_body([_entry()], pre='data: {"choices":[{"delta":[]}]}\n\n'),
    b"data: [DONE]\n\n",
    b"data: [DONE]",
    # SSE layouts: a chunk continued on the next line (the reference rejects its first line), a string cut
    # across lines, separators mixed or doubled, a comment between chunks, CR-only line ends, tabs
    b'data: {"choices":\n[]}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[],\n"usage":{}}\ndata: [DONE]\n',
    b'data: {"choices":[{"delta":{"content":"a\n\ndata: b"}}]}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[],"x":"a\r\n\r\ndata: b"}\r\n\r\ndata: [DONE]\r\n\r\n',
    _sse_body([_entry(), _entry()]).replace(b"\n\ndata:", b"\ndata:", 1),
    _sse_body([_entry()], sep="\n\n\n"),
    _sse_body([_entry(), _entry()], sep="\n\n: keep-alive\n\n"),
    _sse_body([_entry()], sep="\r\n\r\n").replace(b"\r", b""),
    _sse_body([_entry(), _entry()], sep="\r\n"),
    _sse_body([_entry()], sep="\r\r"),
    _sse_body([_entry()], sep="\t\n\n"),
    _sse_body([_entry()], sep="\n\n", tail="data:\t[DONE]\n\n"),
    _sse_body([_entry()], sep="\n\n", tail="\ndata: [DONE]\n"),
    # duplicates: first and last top token, a duplicate in a later position only, duplicates in several positions
    _json_body([_entry(tops='[{"token":"7"},{"token":"8"},{"token":"9"},{"token":"7"}]')]),
    _json_body([_entry(), _entry(tops='[{"token":"5"},{"token":"6"},{"token":"6"}]')]),
    _sse_body(
        [_entry(tops='[{"token":"1"},{"token":"1"}]'), _entry(), _entry(tops='[{"token":"2"},{"token":"\\u0032"}]')]
    ),
    _json_body([_entry(tops='[{"token":null},{}]'), _entry(tops='[{"token":true},{"token":1}]'), _entry(tops="[]")]),
    _json_body([_entry(lp="1e308"), _entry(lp="1e308")]),
    _json_body([_entry(lp="true"), _entry(lp="-1")]),
    _json_body([_entry(lp='"-1"')]),
    _json_body([_entry(lp="[]")]),
    _json_body([_entry(tok='"1"'), _entry(tok='""')]),
]


# Traps: duplicate and escaped keys, escapes and invalid UTF-8, number forms and sizes, nesting, value types,
# SSE layouts around the chunks and [DONE]
TRAPS = [
    # duplicate keys (orjson keeps the last), escaped keys that equal plain ones
    _json_body([_entry()], extra=',"usage":{"completion_tokens":9}'),
    _json_body(['{"token":"1","token":"w","logprob":-1}']),
    _json_body(['{"token":"1","tok\\u0065n":"w","logprob":-1}']),
    _json_body(['{"token":"1","logprob":-1,"logprob":null}']),
    _json_body([], content='"a","content":""'),
    _json_body([_entry(tops='[{"token":"1","token":"2"},{"token":"2"}]')]),
    _json_body([_entry()], usage='{"prompt_tokens":1,"prompt_tokens":2}'),
    _json_body([_entry()], usage='{"prompt\\u005ftokens":1}'),
    _json_body([_entry()], extra=',"x":{"a":1,"a":2}'),
    _json_body([_entry()], extra=',"x":{"a":1,"b":{"a":2},"c":3}'),  # the same key in nested objects is fine
    # escapes in tokens, content, unknown strings; surrogates
    _json_body([_entry(tops='[{"token":"1"},{"token":"\\u0031"}]')]),
    _json_body([_entry(tok='"\\u0031\\u0032"')]),
    _json_body([], content='"\\n"'),
    _json_body([], content='"\\u0000"'),
    _json_body([], content='"\\ud83d\\ude00"'),
    _json_body([], content='"\\ud83d"'),
    _json_body([], content='"\\ude00"'),
    _json_body([], content='"\\x41"'),
    _json_body([], content='"\\u00e"'),
    _json_body([_entry()], extra=',"x":"\\/\\b\\f\\r\\t\\"\\\\"'),
    _json_body([_entry()], extra=',"x":"\xed\xa0\x80"'),
    _json_body([_entry()], extra=',"x":"\xc0\xaf"'),
    _json_body([_entry()], extra=',"x":"\xf4\x90\x80\x80"'),
    _json_body([_entry()], extra=',"x":"\xe2\x82"'),
    _json_body([_entry(tok='"\xd9\xa3"')]),
    _json_body([_entry(tops='[{"token":"\xc3\xa9"},{"token":"\xc3\xa9"}]')]),
    _json_body([_entry()], extra=',"x":"\x7f"'),
    _json_body([_entry()], extra=',"x":"a\x00b"'),
    # numbers: strictness, length, integer limits
    *(
        _json_body([_entry(lp=lp)])
        for lp in (
            "-0",
            "-0.0",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "1e+",
            "+1",
            "0x1",
            "1E5",
            "-1.5e-300",
            "1" * 70,
            "1" * 5000,
            "2e308",
            "-",
        )
    ),
    *(
        _json_body([_entry()], usage=f'{{"prompt_tokens":{v},"completion_tokens":1}}')
        for v in (
            "0",
            "-0",
            "-5",
            "999999999999999999",
            "9999999999999999999",
            "9223372036854775807",
            "18446744073709551616",
            "1" * 4400,
            "1e2",
            "1.0",
            "true",
            "[]",
            '"5"',
            "01",
        )
    ),
    _json_body([_entry()], usage="[]"),
    _json_body([_entry()], usage="0"),
    _json_body([_entry()], usage='"x"'),
    # nesting depth, literals, trailing commas, trailing bytes
    _json_body([_entry()], extra=',"x":' + "[" * 70 + "]" * 70),
    _json_body([_entry()], extra=',"x":' + "[" * 20 + "]" * 20),
    _json_body([_entry()], extra=',"x":' + "[" * 1100 + "]" * 1100),
    _json_body([_entry()], extra=',"x":[true,false,null,{},[],""]'),
    _json_body([_entry()], extra=',"x":tru'),
    _json_body([_entry()], extra=',"x":[1,]'),
    _json_body([_entry()], extra=',"x":{"a":1,}'),
    _json_body([_entry()]) + b" \r\n\t",
    _json_body([_entry()]) + b"x",
    _json_body([_entry()]) + b"\x0b",
    _json_body([_entry()]) + b"{}",
    b"\r\n \t" + _json_body([_entry()]),
    b"\x0c" + _json_body([_entry()]),
    b"\xef\xbb\xbf" + _json_body([_entry()]),
    _json_body([_entry()]).replace(b":", b" : "),
    _json_body([_entry()]).replace(b",", b"\n,\n"),
    # value types the facts read
    *(
        _json_body([_entry(tops=t)])
        for t in (
            '[{"token":"1"},null]',
            "[null]",
            "[1]",
            '"ab"',
            "true",
            '{"token":"1"}',
            '[{"token":"1"},{"token":["1"]}]',
            '[{"token":"1"},{"token":{}}]',
            '[{"token":"1","x":[1,{"token":"1"}]},{"token":"2"}]',
        )
    ),
    *(_json_body([_entry(tok=t)]) for t in ("true", "[]", "{}", '"0"', '"007"', '" 1"', '"1 "', '"-1"', '"1.0"')),
    *(_json_body([_entry(lp=lp)]) for lp in ("false", "{}", '"NaN"', '"-1e3"')),
    *(_json_body([_entry()], content=c) for c in ("true", "0", "1", '""', '" "', '"\\u0020"')),
    _json_body(["null"]),
    _json_body(["1"]),
    _json_body(['"x"']),
    _json_body(["[]"]),
    _json_body(["{}"]),
    b'{"choices":[{"message":null,"logprobs":null}]}',
    b'{"choices":[{"message":{},"logprobs":{}}]}',
    b'{"choices":[{"message":[],"logprobs":[]}]}',
    b'{"choices":[{"message":"x"}]}',
    b'{"choices":[{"logprobs":"x"}]}',
    b'{"choices":[{"logprobs":{"content":{}}}]}',
    b'{"choices":[{"logprobs":{"content":"x"}}]}',
    b'{"choices":[{"logprobs":{"content":""}}]}',
    b'{"choices":[null]}',
    b'{"choices":[[]]}',
    b'{"choices":[1]}',
    b'{"choices":[{"delta":{"content":"x"}}]}',
    b'{"choices":[{"message":{"content":"x"},"delta":5}]}',
    b'{"choices":[],"usage":{"prompt_tokens":1}}',
    b'{"choices":[],"usage":{}}',
    b'{"choices":[],"usage":null}',
    b'{"choices":{}}',
    b'{"choices":"x"}',
    b"{}",
    b"{",
    b" ",
    b"[]",
    b'"x"',
    b"null",
    # SSE: layouts around the chunks and [DONE], usage in several chunks, odd chunk shapes
    _sse_body([_entry()], sep="\n\r\n"),
    _sse_body([_entry()], sep=" \n \n"),
    _sse_body([_entry()], sep="\r\n"),
    _sse_body([_entry()], sep="\n\n\n\n"),
    _sse_body([_entry()], sep="\n\t\r\n"),
    _sse_body([_entry()], sep="\n\x0b\n"),
    _sse_body([_entry()], tail="data: [DONE] \r\n \n"),
    _sse_body([_entry()], tail="data: [DONE]x"),
    _sse_body([_entry()], tail="data: [DONE]\n\nfoo"),
    _sse_body([_entry()], tail="data: [DONE]\n\n: c\n"),
    _sse_body([_entry()], tail="data: [DON]\n\n"),
    _sse_body([_entry()], tail="data:  \t[DONE]"),
    _sse_body([_entry()], tail="data: [DONE]\x00"),
    _sse_body([_entry()], tail="DATA: [DONE]\n\n"),
    _sse_body([_entry()]).replace(b"data: ", b"data:\t"),
    _sse_body([_entry()]).replace(b"data: ", b"data:\x0b"),
    _sse_body([_entry()]).replace(b"data: ", b"data:  "),
    _sse_body([_entry()]).replace(b"data: ", b"data : ", 1),
    _sse_body([_entry()]).replace(b'{"id"', b'{ "id"'),
    _sse_body([_entry()]).replace(b'"choices":', b'"choices":\r'),
    _sse_body([_entry()]).replace(b'"choices":', b'"choices":\t'),
    _sse_body([_entry()]).replace(b"}\n\n", b"} \t\r\n\n", 1),
    _sse_body([_entry()], pre='data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":8}}\n\n'),
    _sse_body([_entry()], pre='data: {"choices":null}\n\n'),
    _sse_body([_entry()], pre="data: {}\n\n"),
    _sse_body([_entry()], pre='data: {"usage":{}}\n\n'),
    _sse_body([_entry()], pre='data: {"usage":[]}\n\n'),
    _sse_body([_entry()], pre='data: {"usage":false}\n\n'),
    _sse_body([_entry()], pre="data: []\n\n"),
    _sse_body([_entry()], pre='data: {"choices":[{"delta":null,"message":5}]}\n\n'),
    _sse_body([_entry()], usage='{"prompt_tokens":1.5}'),
    _sse_body([_entry()], usage='{"completion_tokens":null}'),
    _sse_body([_entry(), _entry()]).replace(b'"usage":', b'"usage":{"prompt_tokens":4},"x":', 1),
    _sse_body([_entry()]).replace(b"data: {", b'data: {"usage":{"completion_tokens":"x"},', 1),
    # a separator inside a chunk: lines the reference rejects that still join into a valid array (also cancelled
    # out by a line with two chunks)
    b'data: {"choices":[],"a":1\n\ndata: "b":2}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[],"a":[{"x":1}\n\ndata: {"y":2}]}\n\ndata: {"choices":[]},{"choices":[]}\n\ndata: [DONE]\n\n',
    _sse_body([_entry()]) + b"\n",
    _sse_body([_entry()])[:-1],
    _sse_body([_entry()])[:-8],
    b"data:",
    b"data: ",
    b"data: {}",
    b"data: {}\n",
    b"data: {}\n\ndata: [DONE]",
    b"data: [DONE]\n\ndata: {}\n\ndata: [DONE]\n\n",
    _sse_body([_entry()]).replace(b"\n\n", b"\n\n\n", 1).replace(b"\n\n\n", b"\n \n\n", 1),
    _sse_body([_entry()]).replace(b'"w"', b'"\xc3"', 1),
    _sse_body([_entry()]).replace(b'"w"', b'"\\u00e9"', 1),
    _sse_body([_entry()]).replace(b'"w"', b'"\\n"', 1),
]


def _generated(rng: random.Random, n: int, sizes=(0, 1, 2, 5, 40, 300, 1000)) -> list[bytes]:
    return [response_body(rng, "m", k, 0, rng.randrange(1, 900), rng.choice(sizes), k % 2 == 0) for k in range(n)]


def _plant(rng: random.Random, body: bytes, kind: int) -> bytes:
    """The faults bench/payloads_bench.py and test_answers plant, and a few more."""
    if kind == 1:
        return re.sub(rb'"logprob":-?[0-9.]+', b'"logprob":NaN', body, count=1)
    if kind == 2:
        return re.sub(rb'"token":"(\d+)"', rb'"token":"w\1"', body)
    if kind == 3:
        return body[: len(body) // 2]
    if kind == 4:
        return b"upstream error: " + body[:200]
    if kind == 5:
        return re.sub(rb'"logprob":-?[0-9.]+', b'"logprob":null', body, count=3)
    if kind == 6:  # one position with a repeated alternative
        return re.sub(rb'("top_logprobs":\[\{"token":"(\d+)".*?\{"token":")\d+', rb"\g<1>\2", body, count=1)
    if kind == 7:
        return body.replace(b'"content":"', b'"content":"', 1).replace(
            b'"usage":{', b'"usage":{"completion_tokens":1.5,', 1
        )
    return body


_INTERESTING = [
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\",
    b" ",
    b"\n",
    b"\r",
    b"\t",
    b"0",
    b"9",
    b"-",
    b".",
    b"e",
    b"a",
    b"N",
    b"\x00",
    b"\x1f",
    b"\x7f",
    b"\xc3",
    b"\xa9",
    b"\xff",
    b"\xed\xa0\x80",
    b"\xc3\xa9",
    b"\\u0031",
    b"\\ud800",
    b'\\"',
    b"NaN",
    b"Infinity",
    b"null",
    b"true",
    b"1e999",
    b"\n\n",
    b"\r\n",
    b"data: ",
    b"data: [DONE]\n\n",
    b"\n\ndata: ",
    b'"token":',
    b'"logprob":',
    b'"usage":',
]
_SWAPS = [
    (
        rb'"logprob":-?[0-9.]+',
        [
            b'"logprob":"-1"',
            b'"logprob":true',
            b'"logprob":NaN',
            b'"logprob":-Infinity',
            b'"logprob":null',
            b'"logprob":[]',
            b'"logprob":1e999',
            b'"logprob":-0',
        ],
    ),
    (
        rb'"token":"\d+"',
        [
            b'"token":5',
            b'"token":null',
            b'"token":"\\u0035"',
            b'"token":""',
            b'"token":"\xd9\xa3"',
            b'"token":"12","token":"13"',
            b'"tok\\u0065n":"1"',
            b'"token":"1\\n"',
            b'"token":[]',
        ],
    ),
    (
        rb'"content":"[^"]*"',
        [
            b'"content":null',
            b'"content":""',
            b'"content":5',
            b'"content":[]',
            b'"content":"\\u00e9"',
            b'"content":"a\tb"',
            b'"content":{}',
        ],
    ),
    (
        rb'"completion_tokens":\d+',
        [
            b'"completion_tokens":1.0',
            b'"completion_tokens":"3"',
            b'"completion_tokens":null',
            b'"completion_tokens":99999999999999999999',
            b'"completion_tokens":-0',
            b'"completion_tokens":true',
        ],
    ),
    (
        rb'"top_logprobs":\[',
        [
            b'"top_logprobs":[null,',
            b'"top_logprobs":[{},',
            b'"top_logprobs":[{"token":null},',
            b'"x":1,"top_logprobs":[',
        ],
    ),
    (rb"\n\n", [b"\n", b"\r\n\r\n", b"\r\r", b" \n\n", b"\n \n", b"\n\n\n", b"\n: ping\n\n", b"\nid: 1\n"]),
    (rb'"usage":\{', [b'"usage":{},"x":{', b'"usage":null,"y":{', b'"usage":{"prompt_tokens":7},"z":{']),
]


def _mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1) if b else 0
        if op == 0 and b:  # delete bytes
            del b[i : i + rng.choice((1, 1, 2, 5))]
        elif op == 1 and b:  # duplicate a span
            j = min(len(b), i + rng.randrange(1, 30))
            b[i:i] = b[i:j]
        elif op == 2:  # insert or replace with an interesting piece
            piece = rng.choice(_INTERESTING)
            if rng.random() < 0.5 and i < len(b):
                b[i : i + len(piece)] = piece
            else:
                b[i:i] = piece
        elif op == 3:  # truncate
            del b[i:]
        elif op in (4, 5):  # swap a value for one of another type / form
            pattern, options = rng.choice(_SWAPS)
            matches = list(re.finditer(pattern, bytes(b)))
            if matches:
                m = rng.choice(matches)
                b[m.start() : m.end()] = rng.choice(options)
        else:  # a random byte
            if i < len(b):
                b[i] = rng.randrange(256)
    return bytes(b)


@pytest.mark.parametrize("body", [*EDGE_BODIES, *TRAPS], ids=range(len(EDGE_BODIES) + len(TRAPS)))
def test_scanner_gives_the_oracle_facts_on_edge_bodies(body):
    _same_as_oracle(body)


def test_unreadable_bodies_say_why():
    reasons = {}
    for name, body in {
        "empty": b"",
        "not_json": b"not json",
        "utf8": _json_body([_entry()]).replace(b'"hi"', b'"h\xff"'),
        "cut": _sse_body([_entry()])[:-20],
        "no_done": _sse_body([_entry()], tail=""),
        "shape": b'{"choices":5}',
        "usage": _json_body([_entry()], usage='{"completion_tokens":%s}' % ("9" * 30)),
        "deep": _json_body([_entry()], extra=',"x":' + "[" * 5000 + "]" * 5000),
    }.items():
        with pytest.raises(BodyError) as caught:
            scan_response(body)
        reasons[name] = str(caught.value)
    assert reasons["empty"] == "empty response body"
    assert reasons["not_json"].startswith("not JSON (Expecting value")
    assert reasons["utf8"].startswith("not UTF-8 (byte ")
    assert reasons["cut"] == "SSE stream truncated or corrupt (a chunk is not JSON)"
    assert reasons["no_done"] == "SSE stream truncated (no data: [DONE])"
    assert (
        reasons["shape"]
        == "response is not a chat.completion object (Expected `array | null`, got `int` - at `$.choices`)"
    )
    assert reasons["usage"] == "usage.completion_tokens is beyond 64 bits"
    assert reasons["deep"] == "not JSON (nested too deeply)"


def test_nan_literals_count_as_nan():
    """Not strict JSON, but engines write them: the json module reads what msgspec refuses."""
    got = scan_response(_json_body([_entry(lp="NaN"), _entry(lp="-Infinity"), _entry(lp='"nan"')]))
    assert got["nan_logprobs"] == 2 and got["logprob_tokens"] == 3 and got["complete"]
    got = scan_response(_sse_body([_entry(lp="NaN"), _entry()]))
    assert got["nan_logprobs"] == 1 and got["logprob_tokens"] == 2


def test_usage_integers_beyond_64_bits():
    assert (
        scan_response(_json_body([_entry()], usage=f'{{"completion_tokens":{2**63 - 1}}}'))["completion_tokens"]
        == 2**63 - 1
    )
    for value in (2**63, -(2**63) - 1, 2**64, 10**30, "1" * 5000, "1e999"):
        body = _json_body([_entry()], usage=f'{{"completion_tokens":{value}}}')
        with pytest.raises(BodyError, match="usage.completion_tokens is beyond 64 bits"):
            scan_response(body)
        assert _same_as_oracle(body) == "range"


def test_sse_chunks_split_over_lines():
    """The stream is read line by line: a chunk continued on the next line, or two on one, is corrupt."""
    for body in (
        b'data: {"choices":\n[]}\n\ndata: [DONE]\n\n',
        b'data: {"choices":[],"a":1\n\ndata: "b":2}\n\ndata: [DONE]\n\n',
        b'data: {"choices":[]},{"choices":[]}\n\ndata: [DONE]\n\n',
        b'data: {"choices":[],"a":[{"x":1}\n\ndata: {"y":2}]}\n\n'
        b'data: {"choices":[]},{"choices":[]}\n\ndata: [DONE]\n\n',
    ):
        with pytest.raises(BodyError, match="a chunk is not JSON"):
            scan_response(body)
    # a comment, an event name and an id line between chunks are not chunks
    assert (
        scan_response(_sse_body([_entry(), _entry()], sep="\n\n: keep-alive\nevent: x\nid: 3\n\n"))["logprob_tokens"]
        == 2
    )


def test_ordinary_bodies_need_msgspec_alone(monkeypatch):
    """Generated answers of every size and layout are decoded by msgspec, never by the json module."""
    rng = random.Random(3)
    bodies = [response_body(rng, "m", k, 0, 50, n, k % 2 == 0) for k, n in enumerate((1, 7, 300, 1000, 1400, 2))]
    bodies += [
        bodies[0].replace(b"data: ", b"data:"),
        bodies[0].replace(b"\n\n", b"\r\n\r\n"),
        _sse_body([_entry()], sep="\n"),
    ]
    want = [oracle(b) for b in bodies]
    monkeypatch.setattr(answer_scan, "_lenient", lambda *a: pytest.fail("the json module was needed"))
    assert [scan_response(b) for b in bodies] == want


def test_generated_bodies_with_planted_faults():
    rng = random.Random(11)
    plain = _generated(rng, 60)
    assert all(isinstance(_same_as_oracle(b), dict) for b in plain)
    kinds = [_same_as_oracle(_plant(rng, body, k % 8)) for k, body in enumerate(plain * 2)]
    assert {k for k in kinds if isinstance(k, str)} == {"not JSON"}  # the cut and the error text are JSON bodies
    streams = [b for b in plain if b.startswith(b"data:")]
    assert {_same_as_oracle(b[: len(b) // 2]) for b in streams} == {"SSE corrupt"}
    assert sum(k["nan_logprobs"] for k in kinds if isinstance(k, dict)) > 0
    assert sum(k["duplicate_top_logprob_positions"] for k in kinds if isinstance(k, dict)) > 0


# 6000 mutations in the heavy tier; stands in the default tier: 2000 mutations of the same seeds,
# tests/transforms/test_answer_scan.py::test_random_mutations
@pytest.mark.parametrize("mutations", [2000, pytest.param(6000, marks=pytest.mark.heavy)])
def test_random_mutations(mutations):
    rng = random.Random(2026)
    seeds = _generated(rng, 40, sizes=(0, 1, 2, 5, 40, 120)) + [
        # a mutation is local: short bodies suffice
        _json_body([_entry(), _entry(tops='[{"token":"1"},{"token":"1"}]')]),
        _sse_body([_entry(), _entry(lp="null")], sep="\r\n\r\n"),
    ]
    readable = sum(isinstance(_same_as_oracle(_mutate(rng, seeds[k % len(seeds)])), dict) for k in range(mutations))
    # many mutations leave a readable body, many do not: both sides are exercised
    assert mutations // 10 < readable < mutations * 9 // 10
