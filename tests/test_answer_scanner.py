"""The C scanner of response bodies (pipeline/native/answerscan.c) against the reference scanner.

Wherever the C scanner returns facts they must be the reference's (`_scan_reference`, orjson then the
standard library); where it is not certain it returns None and the Python paths decide. Checked on the
edge bodies of test_answers, on generated bodies with the faults the benchmark plants, on C-specific
traps (duplicate and escaped keys, deep nesting, long numbers, surrogates, SSE layouts) and on seeded
random mutations of real bodies. It must also take the plain generated bodies itself.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.samples.payloads import response_body
from pipeline.transforms import answer_scan
from pipeline.transforms.answer_scan import _scan_fast, _scan_reference, scan_response
from tests.test_answers import EDGE_BODIES, _entry, _json_body, _sse_body

native = answer_scan._native


def test_scanner_is_built():
    """The extension is optional at install time; on this project's machines it must have been built."""
    if os.environ.get("GONKA_EVIDENCE_NATIVE_ANSWERS") == "0":
        pytest.skip("C scanner switched off")
    assert native is not None, "pipeline._answerscan did not build (is a C compiler installed?)"


def test_switch_turns_the_scanner_off():
    code = "from pipeline.transforms import answer_scan; print(answer_scan._native is None)"
    env = {**os.environ, "GONKA_EVIDENCE_NATIVE_ANSWERS": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


needs_native = pytest.mark.skipif(native is None, reason="C scanner not built")


def _reference(body: bytes):
    try:
        return _scan_reference(body)
    except Exception as exc:  # noqa: BLE001 - BodyError, or a crash of the reference on an odd shape
        return exc


def _check(body: bytes) -> bool:
    """C facts, when given, are the reference's; the msgspec path too. True when C decided."""
    got = native.scan(body)
    ref = _reference(body)
    if got is not None:
        assert not isinstance(ref, Exception), (body[:300], ref)
        assert got == ref, body[:300]
    fast = _facts_of(_scan_fast, body) if body else None
    if fast is not None:  # the msgspec path: the reference's facts, or the same crash on a shape both cannot take
        assert fast == _facts_of(_scan_reference, body), body[:300]
    return got is not None


# C-specific traps: what a one-pass scanner that reads raw bytes could get wrong
TRAPS = [
    # duplicate keys (orjson keeps the last), escaped keys that equal plain ones
    _json_body([_entry()], extra=',"usage":{"completion_tokens":9}'),
    _json_body(['{"token":"1","token":"w","logprob":-1}']), _json_body(['{"token":"1","tok\\u0065n":"w","logprob":-1}']),
    _json_body(['{"token":"1","logprob":-1,"logprob":null}']), _json_body([], content='"a","content":""'),
    _json_body([_entry(tops='[{"token":"1","token":"2"},{"token":"2"}]')]),
    _json_body([_entry()], usage='{"prompt_tokens":1,"prompt_tokens":2}'),
    _json_body([_entry()], usage='{"prompt\\u005ftokens":1}'), _json_body([_entry()], extra=',"x":{"a":1,"a":2}'),
    _json_body([_entry()], extra=',"x":{"a":1,"b":{"a":2},"c":3}'),  # the same key in nested objects is fine
    # escapes in tokens, content, unknown strings; surrogates
    _json_body([_entry(tops='[{"token":"1"},{"token":"\\u0031"}]')]), _json_body([_entry(tok='"\\u0031\\u0032"')]),
    _json_body([], content='"\\n"'), _json_body([], content='"\\u0000"'), _json_body([], content='"\\ud83d\\ude00"'),
    _json_body([], content='"\\ud83d"'), _json_body([], content='"\\ude00"'), _json_body([], content='"\\x41"'),
    _json_body([], content='"\\u00e"'), _json_body([_entry()], extra=',"x":"\\/\\b\\f\\r\\t\\"\\\\"'),
    _json_body([_entry()], extra=',"x":"\xed\xa0\x80"'), _json_body([_entry()], extra=',"x":"\xc0\xaf"'),
    _json_body([_entry()], extra=',"x":"\xf4\x90\x80\x80"'), _json_body([_entry()], extra=',"x":"\xe2\x82"'),
    _json_body([_entry(tok='"\xd9\xa3"')]), _json_body([_entry(tops='[{"token":"\xc3\xa9"},{"token":"\xc3\xa9"}]')]),
    _json_body([_entry()], extra=',"x":"\x7f"'), _json_body([_entry()], extra=',"x":"a\x00b"'),
    # numbers: strictness, length, integer limits
    *(_json_body([_entry(lp=lp)]) for lp in ("-0", "-0.0", "01", "1.", ".5", "-", "1e", "1e+", "+1", "0x1", "1E5",
                                             "-1.5e-300", "1" * 70, "1" * 5000, "2e308", "-")),
    *(_json_body([_entry()], usage='{"prompt_tokens":%s,"completion_tokens":1}' % v)
      for v in ("0", "-0", "-5", "999999999999999999", "9999999999999999999", "9223372036854775807",
                "18446744073709551616", "1" * 4400, "1e2", "1.0", "true", "[]", '"5"', "01")),
    _json_body([_entry()], usage="[]"), _json_body([_entry()], usage="0"), _json_body([_entry()], usage='"x"'),
    # nesting depth, literals, trailing commas, trailing bytes
    _json_body([_entry()], extra=',"x":' + "[" * 70 + "]" * 70), _json_body([_entry()], extra=',"x":' + "[" * 20 + "]" * 20),
    _json_body([_entry()], extra=',"x":' + "[" * 1100 + "]" * 1100),
    _json_body([_entry()], extra=',"x":[true,false,null,{},[],""]'), _json_body([_entry()], extra=',"x":tru'),
    _json_body([_entry()], extra=',"x":[1,]'), _json_body([_entry()], extra=',"x":{"a":1,}'),
    _json_body([_entry()]) + b" \r\n\t", _json_body([_entry()]) + b"x", _json_body([_entry()]) + b"\x0b",
    _json_body([_entry()]) + b"{}", b"\r\n \t" + _json_body([_entry()]), b"\x0c" + _json_body([_entry()]),
    b"\xef\xbb\xbf" + _json_body([_entry()]), _json_body([_entry()]).replace(b":", b" : "),
    _json_body([_entry()]).replace(b",", b"\n,\n"),
    # value types the facts read
    *(_json_body([_entry(tops=t)]) for t in ('[{"token":"1"},null]', '[null]', '[1]', '"ab"', "true", '{"token":"1"}',
                                             '[{"token":"1"},{"token":["1"]}]', '[{"token":"1"},{"token":{}}]',
                                             '[{"token":"1","x":[1,{"token":"1"}]},{"token":"2"}]')),
    *(_json_body([_entry(tok=t)]) for t in ("true", "[]", "{}", '"0"', '"007"', '" 1"', '"1 "', '"-1"', '"1.0"')),
    *(_json_body([_entry(lp=lp)]) for lp in ("false", "{}", '"NaN"', '"-1e3"')),
    *(_json_body([_entry()], content=c) for c in ("true", "0", "1", '""', '" "', '"\\u0020"')),
    _json_body(["null"]), _json_body(["1"]), _json_body(['"x"']), _json_body(["[]"]), _json_body(["{}"]),
    b'{"choices":[{"message":null,"logprobs":null}]}', b'{"choices":[{"message":{},"logprobs":{}}]}',
    b'{"choices":[{"message":[],"logprobs":[]}]}', b'{"choices":[{"message":"x"}]}', b'{"choices":[{"logprobs":"x"}]}',
    b'{"choices":[{"logprobs":{"content":{}}}]}', b'{"choices":[{"logprobs":{"content":"x"}}]}',
    b'{"choices":[{"logprobs":{"content":""}}]}', b'{"choices":[null]}', b'{"choices":[[]]}', b'{"choices":[1]}',
    b'{"choices":[{"delta":{"content":"x"}}]}', b'{"choices":[{"message":{"content":"x"},"delta":5}]}',
    b'{"choices":[],"usage":{"prompt_tokens":1}}', b'{"choices":[],"usage":{}}', b'{"choices":[],"usage":null}',
    b'{"choices":{}}', b'{"choices":"x"}', b'{}', b"{", b" ", b"[]", b'"x"', b"null",
    # SSE: layouts around the chunks and [DONE], usage in several chunks, odd chunk shapes
    _sse_body([_entry()], sep="\n\r\n"), _sse_body([_entry()], sep=" \n \n"), _sse_body([_entry()], sep="\r\n"),
    _sse_body([_entry()], sep="\n\n\n\n"), _sse_body([_entry()], sep="\n\t\r\n"), _sse_body([_entry()], sep="\n\x0b\n"),
    _sse_body([_entry()], tail="data: [DONE] \r\n \n"), _sse_body([_entry()], tail="data: [DONE]x"),
    _sse_body([_entry()], tail="data: [DONE]\n\nfoo"), _sse_body([_entry()], tail="data: [DONE]\n\n: c\n"),
    _sse_body([_entry()], tail="data: [DON]\n\n"), _sse_body([_entry()], tail="data:  \t[DONE]"),
    _sse_body([_entry()], tail="data: [DONE]\x00"), _sse_body([_entry()], tail="DATA: [DONE]\n\n"),
    _sse_body([_entry()]).replace(b"data: ", b"data:\t"), _sse_body([_entry()]).replace(b"data: ", b"data:\x0b"),
    _sse_body([_entry()]).replace(b"data: ", b"data:  "), _sse_body([_entry()]).replace(b"data: ", b"data : ", 1),
    _sse_body([_entry()]).replace(b'{"id"', b'{ "id"'), _sse_body([_entry()]).replace(b'"choices":', b'"choices":\r'),
    _sse_body([_entry()]).replace(b'"choices":', b'"choices":\t'), _sse_body([_entry()]).replace(b"}\n\n", b"} \t\r\n\n", 1),
    _sse_body([_entry()], pre='data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":8}}\n\n'),
    _sse_body([_entry()], pre='data: {"choices":null}\n\n'), _sse_body([_entry()], pre='data: {}\n\n'),
    _sse_body([_entry()], pre='data: {"usage":{}}\n\n'), _sse_body([_entry()], pre='data: {"usage":[]}\n\n'),
    _sse_body([_entry()], pre='data: {"usage":false}\n\n'), _sse_body([_entry()], pre='data: []\n\n'),
    _sse_body([_entry()], pre='data: {"choices":[{"delta":null,"message":5}]}\n\n'),
    _sse_body([_entry()], usage='{"prompt_tokens":1.5}'), _sse_body([_entry()], usage='{"completion_tokens":null}'),
    _sse_body([_entry(), _entry()]) .replace(b'"usage":', b'"usage":{"prompt_tokens":4},"x":', 1),
    _sse_body([_entry()]).replace(b'data: {', b'data: {"usage":{"completion_tokens":"x"},', 1),
    # a separator inside a chunk: lines the reference rejects that still join into a valid array (also cancelled
    # out by a line with two chunks)
    b'data: {"choices":[],"a":1\n\ndata: "b":2}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[],"a":[{"x":1}\n\ndata: {"y":2}]}\n\ndata: {"choices":[]},{"choices":[]}\n\ndata: [DONE]\n\n',
    _sse_body([_entry()]) + b"\n", _sse_body([_entry()])[:-1], _sse_body([_entry()])[:-8], b"data:", b"data: ",
    b"data: {}", b"data: {}\n", b"data: {}\n\ndata: [DONE]", b"data: [DONE]\n\ndata: {}\n\ndata: [DONE]\n\n",
    _sse_body([_entry()]).replace(b"\n\n", b"\n\n\n", 1).replace(b"\n\n\n", b"\n \n\n", 1),
    _sse_body([_entry()]).replace(b'"w"', b'"\xc3"', 1), _sse_body([_entry()]).replace(b'"w"', b'"\\u00e9"', 1),
    _sse_body([_entry()]).replace(b'"w"', b'"\\n"', 1),
]


@needs_native
@pytest.mark.parametrize("body", [*EDGE_BODIES, *TRAPS], ids=range(len(EDGE_BODIES) + len(TRAPS)))
def test_c_gives_the_reference_facts_on_edge_bodies(body):
    _check(body)
    assert _facts_of(scan_response, body) == _facts_of(_scan_reference, body)


def _facts_of(scan, body):
    try:
        return scan(body)
    except Exception as exc:  # noqa: BLE001 - the same BodyError, or the same crash
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else ""


@needs_native
def test_c_takes_the_ordinary_edge_bodies():
    """The plain shapes among the edge bodies are decided in C, not passed on."""
    plain = [_json_body([_entry()]), _json_body([_entry(lp="null")]), _json_body([_entry(tok='"12a"')]),
             _json_body([], content='""'), _json_body([_entry()], usage="{}"), _sse_body([_entry(), _entry()]),
             _sse_body([_entry()], sep="\n"), _sse_body([_entry()], sep="\r\n\r\n"), _sse_body([]),
             _sse_body([_entry()], tail="data:[DONE]\n"), _sse_body([_entry()], tail="data: [DONE]"),
             _sse_body([_entry(tops='[{"token":"1"},{"token":"1"}]'), _entry()]), b'{"choices":[]}',
             _json_body([_entry()], extra=',"x":"\\ud800\\udc00 \\u00e9 \xc3\xa9"'), _sse_body([_entry()], usage="null")]
    for body in plain:
        assert _check(body), body


def _generated(rng: random.Random, n: int) -> list[bytes]:
    return [response_body(rng, "m", k, 0, rng.randrange(1, 900), rng.choice((0, 1, 2, 5, 40, 300, 1000)), k % 2 == 0)
            for k in range(n)]


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
        return re.sub(rb'("top_logprobs":\[\{"token":"(\d+)".*?\{"token":")\d+', rb'\g<1>\2', body, count=1)
    if kind == 7:
        return body.replace(b'"content":"', b'"content":"', 1).replace(b'"usage":{', b'"usage":{"completion_tokens":1.5,', 1)
    return body


@needs_native
def test_c_on_generated_bodies_with_planted_faults():
    rng = random.Random(11)
    plain = _generated(rng, 60)
    decided = sum(_check(b) for b in plain)
    assert decided == len(plain)  # every plain generated body is read in C
    for k, body in enumerate(plain * 2):
        _check(_plant(rng, body, k % 8))
    # the planted duplicates are counted in C exactly as in the reference
    body = _plant(rng, plain[7] if b'"top_logprobs"' in plain[7] else _generated(rng, 1)[0], 6)
    assert native.scan(body) is None or native.scan(body) == _scan_reference(body)


@needs_native
def test_c_decides_the_bench_like_bodies():
    """Bodies as the benchmark generates them (~1,000 tokens, top-5, JSON and SSE): ≥ 99 % taken in C."""
    rng = random.Random(3)
    bodies = [response_body(rng, "m", k, 0, 50, rng.randrange(600, 1400), k % 2 == 0) for k in range(30)]
    decided = [_check(b) for b in bodies]
    assert sum(decided) >= 0.99 * len(bodies)


_INTERESTING = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\", b" ", b"\n", b"\r", b"\t", b"0", b"9", b"-", b".",
                b"e", b"a", b"N", b"\x00", b"\x1f", b"\x7f", b"\xc3", b"\xa9", b"\xff", b"\xed\xa0\x80", b"\xc3\xa9",
                b"\\u0031", b"\\ud800", b"\\\"", b"NaN", b"Infinity", b"null", b"true", b"1e999", b"\n\n", b"\r\n",
                b"data: ", b"data: [DONE]\n\n", b"\n\ndata: ", b'"token":', b'"logprob":', b'"usage":']
_SWAPS = [(rb'"logprob":-?[0-9.]+', [b'"logprob":"-1"', b'"logprob":true', b'"logprob":NaN', b'"logprob":-Infinity',
                                     b'"logprob":null', b'"logprob":[]', b'"logprob":1e999', b'"logprob":-0']),
          (rb'"token":"\d+"', [b'"token":5', b'"token":null', b'"token":"\\u0035"', b'"token":""', b'"token":"\xd9\xa3"',
                               b'"token":"12","token":"13"', b'"tok\\u0065n":"1"', b'"token":"1\\n"', b'"token":[]']),
          (rb'"content":"[^"]*"', [b'"content":null', b'"content":""', b'"content":5', b'"content":[]',
                                   b'"content":"\\u00e9"', b'"content":"a\tb"', b'"content":{}']),
          (rb'"completion_tokens":\d+', [b'"completion_tokens":1.0', b'"completion_tokens":"3"', b'"completion_tokens":null',
                                         b'"completion_tokens":99999999999999999999', b'"completion_tokens":-0',
                                         b'"completion_tokens":true']),
          (rb'"top_logprobs":\[', [b'"top_logprobs":[null,', b'"top_logprobs":[{},', b'"top_logprobs":[{"token":null},',
                                   b'"x":1,"top_logprobs":[']),
          (rb'\n\n', [b"\n", b"\r\n\r\n", b"\r\r", b" \n\n", b"\n \n", b"\n\n\n", b"\n: ping\n\n", b"\nid: 1\n"]),
          (rb'"usage":\{', [b'"usage":{},"x":{', b'"usage":null,"y":{', b'"usage":{"prompt_tokens":7},"z":{'])]


def _mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1) if b else 0
        if op == 0 and b:  # delete bytes
            del b[i: i + rng.choice((1, 1, 2, 5))]
        elif op == 1 and b:  # duplicate a span
            j = min(len(b), i + rng.randrange(1, 30))
            b[i:i] = b[i:j]
        elif op == 2:  # insert or replace with an interesting piece
            piece = rng.choice(_INTERESTING)
            if rng.random() < 0.5 and i < len(b):
                b[i: i + len(piece)] = piece
            else:
                b[i:i] = piece
        elif op == 3:  # truncate
            del b[i:]
        elif op in (4, 5):  # swap a value for one of another type / form
            pattern, options = rng.choice(_SWAPS)
            matches = list(re.finditer(pattern, bytes(b)))
            if matches:
                m = rng.choice(matches)
                b[m.start(): m.end()] = rng.choice(options)
        else:  # a random byte
            if i < len(b):
                b[i] = rng.randrange(256)
    return bytes(b)


@needs_native
def test_c_on_random_mutations():
    rng = random.Random(2026)
    seeds = _generated(rng, 40) + [_json_body([_entry(), _entry(tops='[{"token":"1"},{"token":"1"}]')]),
                                   _sse_body([_entry(), _entry(lp="null")], sep="\r\n\r\n")]
    decided = 0
    n = 6000
    for k in range(n):
        body = _mutate(rng, seeds[k % len(seeds)])
        decided += _check(body)
    assert decided > n // 10  # many mutations leave a body C still reads (checked above against the reference)


@needs_native
def test_scans_in_threads_give_the_same_facts():
    """The GIL is released while a body is scanned: threads scanning at once get the sequential facts."""
    bodies = _generated(random.Random(5), 16)
    alone = [native.scan(b) for b in bodies]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(native.scan, bodies * 4)) == alone * 4
    assert all(a is not None for a in alone)


@needs_native
def test_scan_response_uses_c_first(monkeypatch):
    body = _json_body([_entry()])
    monkeypatch.setattr(answer_scan, "_scan_fast", lambda b: pytest.fail("the Python path was used"))
    assert scan_response(body) == _scan_reference(body)
    monkeypatch.setattr(answer_scan, "_native", None)
    with pytest.raises(pytest.fail.Exception):
        scan_response(body)
