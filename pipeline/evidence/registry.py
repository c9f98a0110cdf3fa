"""The registry of evidence tables: every module of `pipeline.evidence.tables` registers an `EvidenceSpec`.

Importing the package's modules is what registers them, so a new table is found by being a
module there; the order is the report order (`ReportSection.order`), then tables outside the
report by name.
"""

from __future__ import annotations

import importlib
import pkgutil

from pipeline.evidence.spec import EvidenceSpec, Option, registered


def load_specs() -> dict[str, EvidenceSpec]:
    """Every registered table, name → spec, in report order."""
    package = importlib.import_module("pipeline.evidence.tables")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    ordered = sorted(registered().values(), key=lambda s: (s.report is None, s.report.order if s.report else 0, s.name))
    return {spec.name: spec for spec in ordered}


def shared_options(specs: dict[str, EvidenceSpec]) -> dict[str, tuple[Option, list[str]]]:
    """Each option once, with the tables that accept it; two tables may share an option only if they
    declare it identically (one flag means one thing on the command line)."""
    options: dict[str, tuple[Option, list[str]]] = {}
    for spec in specs.values():
        for option in spec.options:
            known = options.get(option.name)
            if known is None:
                options[option.name] = (option, [spec.name])
            elif known[0] != option:
                raise ValueError(f"option {option.name!r} of {spec.name} differs from the one of {known[1][0]}")
            else:
                known[1].append(spec.name)
    return options
