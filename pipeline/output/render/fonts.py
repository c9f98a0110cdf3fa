"""The one font of every chart: shipped with the package, registered with vl-convert, named by every spec.

vl-convert lays text out and draws it with the fonts it finds; a spec that says `sans-serif` gets whatever the
machine has installed, so a chart's SVG and PNG (and a bundle's MANIFEST) would differ between machines. The
package ships Gonka Evidence Sans (a renamed subset of DejaVu Sans, font_files/LICENSE), registers its
directory before the first conversion, and every spec names that family for all its text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
