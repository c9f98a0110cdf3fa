"""The commands of `gonka-evidence`: one module per command or command group.

A module here defines its command(s) and `register(app)`, which adds them to the Typer app, and
`ORDER`, its place in ``--help``. Adding a command is adding a module (and its test): nothing
lists the modules, `register_all` finds them.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register_all(app: typer.Typer) -> None:
    """Register every command module of this package on `app`, in their `ORDER`."""
    modules = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)]
    for module in sorted(modules, key=lambda m: (m.ORDER, m.__name__)):
        module.register(app)
