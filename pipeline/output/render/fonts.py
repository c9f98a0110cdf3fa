"""The one font of every chart: shipped with the package, registered with vl-convert, named by every spec.

vl-convert lays text out and draws it with the fonts it finds; a spec that says `sans-serif` gets whatever the
machine has installed, so a chart's SVG and PNG (and a bundle's MANIFEST) would differ between machines. The
package ships Gonka Evidence Sans (a renamed subset of DejaVu Sans, font_files/LICENSE), registers its
directory before the first conversion, and every spec names that family for all its text.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pipeline.core.text import escape, visible, visible_strings

FONT_FAMILY = "Gonka Evidence Sans"
FONT_STACK = "Gonka Evidence Sans, sans-serif"
FONT_DIR = Path(__file__).resolve().parent / "font_files"
_registered = False


def register_shipped_font() -> None:
    """Give vl-convert the shipped font (once per process)."""
    global _registered
    if not _registered:
        import vl_convert as vlc

        vlc.register_font_directory(str(FONT_DIR))
        _registered = True


def with_shipped_font(spec: Any) -> Any:
    """``spec`` (a Vega-Lite dict) with every text in the shipped font: config.font (axes, legends, titles,
    text marks), unless the spec names one of its own. The renderer always finds the shipped font; the generic
    fallback after it is for a browser showing the SVG without it."""
    if isinstance(spec, dict):
        spec.setdefault("config", {}).setdefault("font", FONT_STACK)
    return spec


@cache
def drawable_characters() -> frozenset[int]:
    """The code points every shipped face draws (their cmaps): any other character would be drawn from a font
    of the machine's, and the chart's bytes would depend on which fonts it has."""
    from fontTools.ttLib import TTFont

    faces = [frozenset(TTFont(path, lazy=True).getBestCmap()) for path in sorted(FONT_DIR.glob("*.ttf"))]
    return frozenset.intersection(*faces)


def drawable(text: str) -> str:
    """`text` as a chart shows it: `visible`, and each character the shipped font lacks (Cyrillic, CJK, emoji)
    as its escape, so that no glyph comes from the machine's fonts."""
    text = visible(text)
    covered = drawable_characters()
    if all(ord(c) in covered for c in text):
        return text
    return "".join(c if ord(c) in covered else escape(c) for c in text)


def drawn_spec(spec: dict) -> dict:
    """`spec` ready for the renderer, whose font is registered: every text `drawable` (a label's control
    character, which XML refuses and on which vl-convert aborts, or a glyph the shipped font lacks, as an
    escape) and in the shipped font."""
    register_shipped_font()
    return with_shipped_font(visible_strings(spec, drawable))
