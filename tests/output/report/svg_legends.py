"""Read a chart's legends and marks back from the SVG that vl-convert drew: each legend entry's colour must
be the colour of the marks of that series (Vega writes each mark's encoded fields, by their titles, into
its aria-label: ``build: V2 + DSpark, raw_logprobs; tokens per step: 2.787``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

SVG = "{http://www.w3.org/2000/svg}"


@dataclass(frozen=True)
class Legend:
    title: str | None
    entries: dict[str, str]  # label -> colour (#rrggbb, lower case)


@dataclass(frozen=True)
class Mark:
    role: str  # aria-roledescription: bar, line mark, point, rect, rule …
    fields: dict[str, str]
    colours: frozenset[str]  # its fill and stroke, where set
    transform: str  # where it is drawn (a point's translate(x,y))


def _colour(value: str | None) -> str | None:
    if not value or value in ("none", "transparent"):
        return None
    return value.lower()


def _classes(el: ET.Element) -> set[str]:
    return set((el.get("class") or "").split())


def legends(svg: str) -> list[Legend]:
    out = []
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        if "role-legend" not in _classes(group):
            continue
        symbols, labels, title = [], [], None
        for el in group.iter(f"{SVG}g"):
            classes = _classes(el)
            if "role-legend-symbol" in classes:
                path = next(el.iter(f"{SVG}path"))
                symbols.append(_colour(path.get("fill")) or _colour(path.get("stroke")))
            elif "role-legend-label" in classes:
                labels.append("".join(next(el.iter(f"{SVG}text")).itertext()))
            elif "role-legend-title" in classes:
                title = "".join(next(el.iter(f"{SVG}text")).itertext())
        assert len(symbols) == len(labels), f"legend {title}: {len(symbols)} symbols, {len(labels)} labels"
        out.append(Legend(title, dict(zip(labels, symbols, strict=True))))
    return out


def marks(svg: str) -> list[Mark]:
    out = []
    for el in ET.fromstring(svg).iter():
        label = el.get("aria-label")
        if el.get("role") != "graphics-symbol" or not label or ": " not in label:
            continue
        if (el.get("aria-roledescription") or "") in ("legend", "axis", "title"):
            continue
        fields = dict(part.split(": ", 1) for part in label.split("; ") if ": " in part)
        colours = frozenset(c for c in (_colour(el.get("fill")), _colour(el.get("stroke"))) if c)
        out.append(Mark(el.get("aria-roledescription") or "", fields, colours, el.get("transform") or ""))
    return out


def colour_mismatches(svg: str) -> list[str]:
    """Every legend entry whose series has no mark in its colour, or has a mark in the colour of another
    entry of the same legend: empty when the chart's colours match its legends."""
    problems = []
    drawn = marks(svg)
    for legend in legends(svg):
        for label, colour in legend.entries.items():
            others = set(legend.entries.values()) - {colour}

            series = [
                m
                for m in drawn
                if (label in m.fields.values() if legend.title is None else m.fields.get(legend.title) == label)
            ]
            if not any(colour in m.colours for m in series):
                problems.append(f"legend {legend.title!r}: no mark of {label!r} in its colour {colour}")
            for m in series:
                if m.colours & others and colour not in m.colours:
                    problems.append(
                        f"legend {legend.title!r}: a {m.role} of {label!r} is {sorted(m.colours)}, "
                        f"the legend says {colour}"
                    )
    return problems
