"""`svg_and_png`: a chart drawn before in the process gives the bytes a fresh draw gives, without drawing it again."""

from __future__ import annotations

import copy
from functools import lru_cache

import vl_convert as vlc

from pipeline.output.render import images
from pipeline.output.render.fonts import drawn_spec


def _spec(n: int, label: str = "V2 + DSpark") -> dict:
    return {
        "mark": "bar",
        "data": {"values": [{"build": label, "n": n}]},
        "encoding": {"x": {"field": "n", "type": "quantitative"}, "y": {"field": "build", "type": "nominal"}},
    }


def _counting(monkeypatch, kept: int = 32) -> list[int]:
    drawn: list[int] = []
    draw = vlc.vegalite_to_svg
    monkeypatch.setattr(vlc, "vegalite_to_svg", lambda spec: drawn.append(1) or draw(spec))
    monkeypatch.setattr(images, "_memo", lru_cache(maxsize=kept)(images._memo.__wrapped__))  # this test's own
    return drawn


def test_a_chart_drawn_again_is_the_same_bytes_without_a_second_draw(monkeypatch):
    drawn = _counting(monkeypatch)
    spec = _spec(3)
    fresh_svg = vlc.vegalite_to_svg(drawn_spec(copy.deepcopy(spec)))
    fresh = (fresh_svg, vlc.svg_to_png(fresh_svg, scale=2))
    drawn.clear()
    first = images.svg_and_png(copy.deepcopy(spec))
    again = images.svg_and_png(copy.deepcopy(spec))
    assert first == again == fresh and drawn == [1]
    # Another value, another label, the same values in another key order: each drawn on its own.
    other = images.svg_and_png(_spec(4))
    relabelled = images.svg_and_png(_spec(3, "V1, no DSpark"))
    reordered = images.svg_and_png({k: spec[k] for k in reversed(spec)})
    assert drawn == [1, 1, 1, 1]
    assert other != first and relabelled != first and "V1, no DSpark" in relabelled[0]
    assert reordered[0].count("<path") == first[0].count("<path")


def test_the_memo_keeps_the_charts_drawn_last(monkeypatch):
    drawn = _counting(monkeypatch, kept=2)
    for n in (1, 2, 3):
        images.svg_and_png(_spec(n))
    assert images._memo.cache_info().currsize == 2 and len(drawn) == 3
    images.svg_and_png(_spec(3))  # kept
    assert len(drawn) == 3
    images.svg_and_png(_spec(1))  # the oldest, let go
    assert len(drawn) == 4 and images._memo.cache_info().currsize == 2
