"""The evidence tables described from their specs: the reference page docs/evidence.md
(written by ``python -m pipeline.cli.docs``)."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.evidence.spec import Column, EvidenceSpec

INTRO = """\
# Evidence tables

`gonka-evidence evidence NAME --host ADDR [--epoch N | --since T --until T]` computes one table from the
warehouse views ([schema](schema.md)) and prints it with its statistics, notes and a provenance footer. This
page says what every column counts; [evidence-rules](evidence-rules.md) holds the rules every table shares
(host, window, answer, verdicts, builds, the provenance footer) and the statistics. A table's code is its
module in `pipeline/evidence/tables/` and its SQL the files listed under it.

This page is generated from the tables' specs (`python -m pipeline.cli.docs`): edit the spec, not the page.
"""


def options(spec: EvidenceSpec) -> str:
    described = (f"`{o.usage}`: {o.help[0].lower()}{o.help[1:].rstrip('.')}" for o in spec.options)
    return f"*Options:* {'; '.join(described)}."


def column_rows(columns: tuple[Column, ...]) -> list[str]:
    """One table row per column, consecutive columns with one meaning in one row."""
    groups: list[tuple[list[str], str]] = []
    for column in columns:
        if groups and groups[-1][1] == column.meaning:
            groups[-1][0].append(column)
        else:
            groups.append(([column], column.meaning))
    return [f"| {', '.join(f'`{name}`' for name in names)} | {meaning} |" for names, meaning in groups]


def section(spec: EvidenceSpec) -> str:
    """One table: summary, description, options, columns, notes and the SQL it reads."""
    blocks = [f"## {spec.name}", spec.summary]
    if spec.description:
        blocks.append(spec.description)
    if spec.options:
        blocks.append(options(spec))
    blocks.append("\n".join(["| column | meaning |", "|---|---|", *column_rows(spec.columns)]))
    if spec.notes:
        blocks.append(spec.notes)
    sql = ", ".join(f"`sql/{path}`" for path in spec.sql) or "none"
    blocks.append(f"*SQL:* {sql}.")
    return "\n\n".join(blocks)


def reference(specs: Mapping[str, EvidenceSpec]) -> str:
    """The page: an index of the tables, then every table in report order."""
    index = " ·\n".join(f"[{name}](#{name})" for name in specs)
    return "\n\n".join([INTRO.rstrip("\n"), f"Tables: {index}", *(section(s) for s in specs.values())]) + "\n"
