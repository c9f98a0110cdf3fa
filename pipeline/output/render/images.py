"""A Vega-Lite chart drawn as images: the one place vl-convert is called for SVG and PNG."""

from __future__ import annotations

import json
from collections import OrderedDict

# The images of the charts drawn last in this process, by their drawn spec (as JSON): a bundle draws each
# table's chart twice (its report's charts/ and its tables/), and `verify` draws the bundle's charts again.
# The renderer is a pure function of the spec (the font is the shipped one, registered before the first draw),
# so a spec drawn before gives the bytes drawing it again would. A few dozen charts at most: tens of KiB each.
_DRAWN: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
_DRAWN_MAX = 32


def svg_and_png(spec: dict) -> tuple[str, bytes]:
    """The chart's SVG, and its PNG at scale 2 rasterised from that SVG: the same bytes as vl-convert's
    own `vegalite_to_png`, without laying the chart out a second time (bench/BENCHMARKS.md, test tier).
    A spec drawn before in this process gives the same images without drawing them again."""
    from pipeline.output.render.fonts import drawn_spec

    drawn = drawn_spec(spec)
    try:
        key = json.dumps(drawn, allow_nan=True)  # key order kept: a spec of other order is drawn on its own
    except (TypeError, ValueError):  # a value JSON cannot hold: drawn every time
        return _draw(drawn)
    if key in _DRAWN:
        _DRAWN.move_to_end(key)
        return _DRAWN[key]
    images = _draw(drawn)
    _DRAWN[key] = images
    if len(_DRAWN) > _DRAWN_MAX:
        _DRAWN.popitem(last=False)
    return images


def _draw(drawn: dict) -> tuple[str, bytes]:
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(drawn)
    return svg, vlc.svg_to_png(svg, scale=2)
