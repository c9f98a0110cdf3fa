"""The evidence tables described from the registry: what the README's evidence sections open with,
and a full reference (``python -m pipeline.evidence.catalogue``) with every column defined."""

from __future__ import annotations

import inspect

from pipeline.evidence.spec import EvidenceSpec


def overview(spec: EvidenceSpec) -> str:
    """Summary, options and columns of one table, as its README section opens."""
    blocks = [spec.summary]
    if spec.options:
        described = (f"`{o.usage}`: {o.help[0].lower()}{o.help[1:].rstrip('.')}" for o in spec.options)
        blocks.append(f"*Options:* {'; '.join(described)}.")
    blocks.append(f"*Columns:* {', '.join(f'`{c}`' for c in spec.columns)}.")
    return "\n\n".join(blocks)


def reference(specs: dict[str, EvidenceSpec]) -> str:
    """Every table: its overview, the SQL files it reads and the definition of every column."""
    sections = []
    for spec in specs.values():
        sql = ", ".join(f"`sql/{path}`" for path in spec.sql) or "none"
        sections.append(
            f"## `{spec.name}`\n\n{overview(spec)}\n\n*SQL:* {sql}.\n\n{inspect.cleandoc(spec.definitions)}"
        )
    return "# Evidence tables\n\n" + "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    from pipeline.evidence import EVIDENCE

    print(reference(EVIDENCE), end="")
