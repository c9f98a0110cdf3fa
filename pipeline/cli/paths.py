"""The role of every path parameter, declared where the parameter is, and checked once before a command runs.

A path option says its role with ``path_option(Role.OUTPUT_FILE, "--out", help=…)`` (an argument with
``parser=role(…)``); `check_paths` (called by
`user_errors` before the command body) runs each value through `pipeline.core.roles.check_path`, then
refuses an output onto an input of the same command, the warehouse or one of its sources. A path
parameter without a role fails tests/cli/test_path_roles.py, which runs every role against every kind
of path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

from pipeline.core.roles import Role, is_url


class RoleParser:
    """The typer `parser` of a path parameter: converts the text, and carries the parameter's role."""

    def __init__(self, role: Role, keywords: tuple[str, ...] = (), as_text: bool = False, noun: str | None = None):
        self.role, self.keywords, self.as_text, self.noun = role, keywords, as_text, noun

    def __call__(self, value: Any) -> Any:
        if value is None or self.as_text or str(value) in self.keywords:
            return None if value is None else str(value)
        return Path(value)

    def paths(self, value: Any) -> list[Path]:
        """The paths a value names (a keyword, a URL and None name none)."""
        values = value if isinstance(value, list | tuple) else [value]
        return [
            Path(v)
            for v in values
            if v is not None and str(v) not in self.keywords and not (self.role is Role.SOURCE and is_url(str(v)))
        ]


def role(kind: Role, *, keywords: tuple[str, ...] = (), as_text: bool = False, noun: str | None = None) -> RoleParser:
    """The `parser=` of a path parameter of this role; `keywords` are words it also takes (`builds infer`),
    `as_text` keeps the value a string (a source that may be a URL), `noun` names it when missing."""
    return RoleParser(kind, keywords, as_text or kind is Role.SOURCE, noun)


PATH_METAVAR = "<path>"  # how --help shows a path option (typer's own for a Path without a parser)


def path_option(
    kind: Role,
    *decls: str,
    keywords: tuple[str, ...] = (),
    as_text: bool = False,
    noun: str | None = None,
    **options: Any,
) -> Any:
    """`typer.Option(*decls, **options)` of a path in this role, shown as <path> in --help."""
    import typer

    return typer.Option(
        *decls, parser=role(kind, keywords=keywords, as_text=as_text, noun=noun), metavar=PATH_METAVAR, **options
    )


def declared_roles(func: Callable[..., Any]) -> dict[str, tuple[RoleParser, str]]:
    """Each parameter of a command that declares a role: its parser and how messages name it (an option's
    flag; nothing for an argument, whose value says which it is)."""
    found = {}
    for name, param in inspect.signature(func, eval_str=True).parameters.items():
        for info in getattr(param.annotation, "__metadata__", ()):
            parser = getattr(info, "parser", None)
            if isinstance(parser, RoleParser):
                decls = getattr(info, "param_decls", None) or ()
                option = next((d for d in decls if d.startswith("--")), None)
                if _is_option(info):
                    found[name] = (parser, option or f"--{name.replace('_', '-')}")
                else:
                    found[name] = (parser, "")  # an argument: messages name its value alone
    return found


def _is_option(info: Any) -> bool:
    return type(info).__name__ == "OptionInfo"


def is_path_annotation(annotation: Any) -> bool:
    """Whether a parameter's type is a path, a list of them, or an optional one."""
    if annotation is Path:
        return True
    if get_origin(annotation) is not None or type(annotation).__name__ == "UnionType":
        return any(is_path_annotation(a) for a in get_args(annotation))
    return False


def check_paths(func: Callable[..., Any], values: dict[str, Any], context: Any = None) -> None:
    """The outputs of the call against its inputs, the warehouse and its sources, then every path in its
    role: PathError naming the first that cannot play it. Neither blocks (nothing is read). `context`: the
    command's, which tells an option read from its variable."""
    roles = declared_roles(func)
    named = [
        (path, parser, (what and variable_of(context, name)) or what)
        for name, (parser, what) in roles.items()
        for path in parser.paths(values.get(name))
    ]
    inputs: list[Path] = []
    outputs: dict[str, Path] = {}
    warehouse: Path | None = None
    warehouse_option: str | None = None
    for path, parser, what in named:
        kind = parser.role
        if kind in (Role.WAREHOUSE_READ, Role.WAREHOUSE_WRITE):
            warehouse = path
            if kind is Role.WAREHOUSE_WRITE:
                outputs[what], warehouse_option = path, what
        elif kind.is_output:
            outputs[what] = path
        else:
            inputs.append(path)
    declared = {p.role for p, _ in roles.values()} & {Role.WAREHOUSE_READ, Role.WAREHOUSE_WRITE}
    if warehouse is None and declared and (outputs or Role.WAREHOUSE_WRITE in declared) and "config" in values:
        kind = Role.WAREHOUSE_WRITE if Role.WAREHOUSE_WRITE in declared else Role.WAREHOUSE_READ
        warehouse = _configured_warehouse(values, kind)
        if kind is Role.WAREHOUSE_WRITE:
            outputs["warehouse"], warehouse_option = warehouse, "warehouse"
            if warehouse.parent.is_dir():  # a configured warehouse's new directory is made by the job (`run`)
                named.append((warehouse, RoleParser(kind), "warehouse"))
    from pipeline.api import check_outputs, check_path

    check_outputs(outputs, inputs=inputs, warehouse=warehouse, warehouse_option=warehouse_option)
    for path, parser, what in named:
        check_path(path, parser.role, what, parser.noun)


def variable_of(context: Any, name: str) -> str | None:
    """The variable (GONKA_EVIDENCE_WAREHOUSE) that the option `name` was read from when the command line
    did not give it; None otherwise. `context`: the command's."""
    source = context.get_parameter_source(name) if context is not None else None
    if source is None or source.name != "ENVIRONMENT":
        return None
    envvar = next((p.envvar for p in context.command.params if p.name == name), None)
    return envvar if isinstance(envvar, str) else None


def _configured_warehouse(values: dict[str, Any], kind: Role) -> Path:
    """The warehouse a command without -w uses (GONKA_EVIDENCE_WAREHOUSE, else the config's, else the
    default; `pipeline.jobs.settings`), checked in its role: a path of the config file is checked like one
    of the command line."""
    from pipeline.api import check_path, resolve_warehouse

    config = values.get("config")
    path = resolve_warehouse(None, Path(config) if config is not None else None)
    if kind is Role.WAREHOUSE_READ:
        check_path(path, kind, "warehouse")
    return path
