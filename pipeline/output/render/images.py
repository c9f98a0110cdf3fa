"""A Vega-Lite chart drawn as images: the one place vl-convert is called for SVG and PNG."""

from __future__ import annotations

import json
from functools import lru_cache


def svg_and_png(spec: dict) -> tuple[str, bytes]:
    """The chart's SVG, and its PNG at scale 2 rasterised from that SVG: the same bytes as vl-convert's
    own `vegalite_to_png`, without laying the chart out a second time (bench/BENCHMARKS.md, test tier).
    A spec drawn before in this process gives the same images without drawing them again (`_memo`)."""
    from pipeline.output.render.fonts import drawn_spec

    drawn = drawn_spec(spec)
    try:
        key = json.dumps(drawn)  # key order kept: a spec of other order is drawn on its own
    except (TypeError, ValueError):  # a value JSON cannot hold: drawn every time
        return _draw(drawn)
    return _memo(key)


# A bundle draws each table's chart twice (its report's charts/ and its tables/), and `verify` draws the
# bundle's charts again. The renderer is a pure function of the spec (the font is the shipped one, registered
# before the first draw) and the JSON text gives back the spec it was made of, so a spec drawn before gives the
# bytes drawing it again would. The charts drawn last: tens of KiB each.
@lru_cache(maxsize=32)
def _memo(key: str) -> tuple[str, bytes]:
    return _draw(json.loads(key))


def _draw(drawn: dict) -> tuple[str, bytes]:
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(drawn)
    return svg, vlc.svg_to_png(svg, scale=2)
