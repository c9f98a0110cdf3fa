"""A Vega-Lite chart drawn as images: the one place vl-convert is called for SVG and PNG."""

from __future__ import annotations


def svg_and_png(spec: dict) -> tuple[str, bytes]:
    """The chart's SVG, and its PNG at scale 2 rasterised from that SVG: the same bytes as vl-convert's
    own `vegalite_to_png`, without laying the chart out a second time (bench/BENCHMARKS.md, test tier)."""
    import vl_convert as vlc

    from pipeline.output.render.fonts import drawn_spec

    svg = vlc.vegalite_to_svg(drawn_spec(spec))
    return svg, vlc.svg_to_png(svg, scale=2)
