"""A Vega-Lite chart drawn as images: the one place vl-convert is called for SVG and PNG."""

from __future__ import annotations


def svg_and_png(spec: dict) -> tuple[str, bytes]:
    """The chart's SVG, and its PNG at scale 2 rasterised from that SVG: the same bytes as vl-convert's
    own `vegalite_to_png`, without laying the chart out a second time (bench/BENCHMARKS.md, test tier)."""
    import vl_convert as vlc

    from pipeline.core.text import visible_strings
    from pipeline.output.render.fonts import drawable, register_shipped_font, with_shipped_font

    register_shipped_font()
    # A control character of a label (an ANSI sequence) is shown as an escape: in an SVG text, XML refuses it
    # and vl-convert aborts the process; so is a character the shipped font cannot draw (the machine's would).
    svg = vlc.vegalite_to_svg(with_shipped_font(visible_strings(spec, drawable)))
    return svg, vlc.svg_to_png(svg, scale=2)
