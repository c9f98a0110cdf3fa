"""The public contract of gonka-evidence, read from the code: the warehouse's public views and commented
tables with their columns (docs/schema.md), the evidence tables' columns (docs/evidence.md), the names of
`pipeline.api` (its `__all__`, the facade's methods, and the parameters of each), and every command of
the command line with its options (docs/commands.md). Public contracts: extend, never break.

    python -m tests.contract.public          # print the current contract (JSON)
    python -m tests.contract.public --write  # add what is new to tests/contract/public.json

`--write` refuses when something of the snapshot is gone: a removal or a rename is a breaking change,
never a snapshot update (docs/contributing.md).
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("public.json")
FACADE_CLASSES = ("Context", "Warehouse", "Evidence")


def views() -> dict[str, list[str]]:
    """Each public view and commented table of a new warehouse: its columns."""
    from pipeline import api

    relations, columns = api.schema()
    out: dict[str, list[str]] = {name: [] for name in relations["name"].to_list()}
    for name, column in columns.select("name", "column_name").iter_rows():
        out.setdefault(name, []).append(column)
    return {name: sorted(cols) for name, cols in sorted(out.items())}


def evidence_tables() -> dict[str, list[str]]:
    """Each evidence table: its columns."""
    from pipeline import api

    return {name: sorted(spec.columns) for name, spec in sorted(api.evidence_tables().items())}


def _parameters(obj: Any) -> list[str]:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return sorted(p for p in signature.parameters if p not in ("self", "cls"))


def api_names() -> dict[str, list[str]]:
    """Each name of `pipeline.api.__all__`, and each public method of the facade's classes: its parameters."""
    from pipeline import api

    out = {}
    for name in sorted(api.__all__):
        obj = getattr(api, name)
        out[name] = _parameters(obj) if callable(obj) else []
    for cls_name in FACADE_CLASSES:
        cls = getattr(api, cls_name)
        for name, member in sorted(vars(cls).items()):
            if not name.startswith("_"):
                target = member.__func__ if isinstance(member, staticmethod | classmethod) else member
                target = target.fget if isinstance(target, property) else target
                out[f"{cls_name}.{name}"] = _parameters(target) if callable(target) else []
    return out


def commands() -> dict[str, list[str]]:
    """Each command of `gonka-evidence` (subcommands as "report epoch"): its options and arguments."""
    import typer

    from pipeline.cli.app import app

    out: dict[str, list[str]] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        names = []
        for param in command.params:
            names += [d for d in param.opts + param.secondary_opts if d.startswith("-")] or [f"<{param.name}>"]
        out[" ".join(path) or "gonka-evidence"] = sorted(names)
        for name, sub in getattr(command, "commands", {}).items():  # a group (typer's own click)
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return dict(sorted(out.items()))


def contract() -> dict[str, dict[str, list[str]]]:
    return {"views": views(), "evidence": evidence_tables(), "api": api_names(), "cli": commands()}


def missing(snapshot: dict, current: dict) -> list[str]:
    """What the snapshot holds that the current contract does not: "section: name" or "section: name: item"."""
    gone = []
    for section, entries in snapshot.items():
        now = current.get(section, {})
        for name, items in entries.items():
            if name not in now:
                gone.append(f"{section}: {name}")
                continue
            gone += [f"{section}: {name}: {item}" for item in items if item not in now[name]]
    return gone


def main(argv: list[str]) -> int:
    current = contract()
    if "--write" not in argv:
        print(json.dumps(current, indent=1))
        return 0
    old = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    if gone := missing(old, current):
        print("removed or renamed (a breaking change; the snapshot keeps them):", *gone, sep="\n  ", file=sys.stderr)
        return 1
    SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
