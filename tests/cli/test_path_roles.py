"""Every path parameter of every command, in its role, against every kind of path.

The matrix is generated from the command tree: a new command or option is covered without a new test,
and a path parameter that declares no role fails here. A cell that must be refused runs the command
in-process and asserts exit 1, one line naming the option, and that no input changed (hash before and
after); a cell that must be let through runs the boundary check (`check_paths`) on the parsed command
line, and asserts it does not refuse.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.cli.paths import RoleParser, check_paths, declared_roles, is_path_annotation
from pipeline.core.roles import PathError, Role
from pipeline.output.guards import roles

ROOT = os.geteuid() == 0  # root reads a file of mode 000
# Text whose help names a file or a directory ("write to a file", "the store directory") is a path.
PATH_WORDS = re.compile(r"\b(a|an|the|this|that|one) ([\w.-]+ )?(file|directory|path)\b")


def _leaves(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    groups = getattr(command, "commands", None)
    if groups is None:
        return [(prefix, command)]
    return [leaf for name, sub in sorted(groups.items()) for leaf in _leaves(sub, (*prefix, name))]


CLI = typer.main.get_command(app)  # built once: typer's CliRunner rebuilds it on every invoke (half a cell's time)
COMMANDS = dict(_leaves(CLI))


def _parameters(callback: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(callback, eval_str=True).parameters)


def _info(param: inspect.Parameter) -> Any:
    return next((m for m in getattr(param.annotation, "__metadata__", ()) if hasattr(m, "param_decls")), None)


def _type(param: inspect.Parameter) -> Any:
    return getattr(param.annotation, "__origin__", param.annotation)


def _is_path_parameter(param: inspect.Parameter) -> bool:
    """A Path (or list of them), or text whose help speaks of a file or directory."""
    info = _info(param)
    if is_path_annotation(_type(param)) or isinstance(getattr(info, "parser", None), RoleParser):
        return True
    text = (getattr(info, "help", "") or "").lower()
    return _type(param) in (str, str | None, list[str]) and PATH_WORDS.search(text) is not None


CELLS = [
    (path, name)
    for path, command in COMMANDS.items()
    for name, param in _parameters(command.callback).items()
    if _is_path_parameter(param)
]


def test_every_path_parameter_declares_its_role():
    assert len(CELLS) >= 20  # the walk found the commands' path parameters
    undeclared = [
        f"{' '.join(path)} {name}" for path, name in CELLS if name not in declared_roles(COMMANDS[path].callback)
    ]
    assert not undeclared, f"path parameters without a role (parser=role(Role.…)): {undeclared}"


@pytest.fixture(scope="module")
def warehouse_template(tmp_path_factory) -> Path:
    from pipeline.warehouse.database import open_for_write

    path = tmp_path_factory.mktemp("wh") / "warehouse.duckdb"
    open_for_write(path).close()
    return path


def _option(name: str, param: inspect.Parameter) -> str | None:
    """The flag of an option, None for an argument."""
    info = _info(param)
    if type(info).__name__ != "OptionInfo":
        return None
    decls = [d for d in (info.param_decls or ()) if d.startswith("--")]
    return decls[0] if decls else f"--{name.replace('_', '-')}"


class World:
    """A command's base command line in a fresh directory: each path parameter a value of its role."""

    def __init__(self, root: Path, path: tuple[str, ...], warehouse: Path):
        self.root, self.path = root, path
        self.callback = COMMANDS[path].callback
        self.params = _parameters(self.callback)
        self.roles = declared_roles(self.callback)
        self.values: dict[str, Path | str] = {}
        for d in ("in", "out", "kinds"):
            (root / d).mkdir()
        for name, (parser, _) in self.roles.items():
            self.values[name] = self._base(name, parser.role, warehouse)

    def _base(self, name: str, role: Role, warehouse: Path) -> Path:
        root = self.root
        if role is Role.INPUT_FILE:
            (root / "in" / f"{name}.txt").write_text("[x]\n")
            return root / "in" / f"{name}.txt"
        if role is Role.INPUT:
            (root / "in" / f"{name}.log").write_text("a line\n")
            return root / "in" / f"{name}.log"
        if role in (Role.INPUT_DIR, Role.SOURCE):
            (root / "in" / name).mkdir()
            (root / "in" / name / "a").write_text("a\n")
            return root / "in" / name
        if role in (Role.WAREHOUSE_READ, Role.WAREHOUSE_WRITE):
            shutil.copy(warehouse, root / "warehouse.duckdb")
            return root / "warehouse.duckdb"
        if role is Role.LAKE_READ:
            from pipeline.network.lake import Lake

            Lake(root / "lake", create=True)
            return root / "lake"
        return root / "out" / name  # an output, a new lake: not there yet

    def inputs(self) -> dict[str, Path]:
        """The paths of the command that are read (a warehouse included): they must not change."""
        return {
            n: Path(v)
            for n, v in self.values.items()
            if not self.roles[n][0].role.is_output or self.roles[n][0].role is Role.WAREHOUSE_WRITE
        }

    def argv(self, override: dict[str, Path]) -> list[str]:
        args: list[str] = [*self.path]
        for name, param in self.params.items():
            value = override.get(name, self.values.get(name))
            flag = _option(name, param)
            if value is None:
                if param.default is not inspect.Parameter.empty or param.annotation is typer.Context:
                    continue
                value = "1" if _type(param) is int else "x"
            args += [str(value)] if flag is None else [flag, str(value)]
        return args


def _digest(path: Path) -> str:
    """What is at `path`, files' bytes included (a FIFO or a device by its kind only)."""
    h = hashlib.sha256()
    if not os.path.lexists(path):
        return "missing"
    for p in [path, *sorted(path.rglob("*"))] if path.is_dir() and not path.is_symlink() else [path]:
        h.update(str(p).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
        else:
            h.update(oct(os.lstat(p).st_mode).encode())
    return h.hexdigest()


def _kinds(world: World, name: str) -> dict[str, Path]:
    """Every kind of path for the parameter `name`, made in the world's directory."""
    k = world.root / "kinds"
    (k / "empty").write_bytes(b"")
    (k / "regular").write_text("not what it wants\n")
    (k / "directory").mkdir()
    (k / "foreign").mkdir()
    (k / "foreign" / "theirs.txt").write_text("theirs\n")
    os.mkfifo(k / "fifo")
    (k / "zero").symlink_to("/dev/zero")
    (k / "loop").symlink_to(k / "loop")
    (k / "unreadable").write_text("secret\n")
    (k / "unreadable").chmod(0)
    kinds = {n: k / n for n in ("empty", "regular", "directory", "foreign", "fifo", "zero", "loop", "unreadable")}
    kinds["missing"] = k / "missing"
    for other, value in world.values.items():
        if other == name:
            continue
        kinds[f"={other}"] = Path(value)
        kinds[f"inside {other}"] = Path(value) / "inner"
        if Path(value).is_file():
            os.link(value, k / f"link-{other}")
            kinds[f"hard link of {other}"] = k / f"link-{other}"
    return kinds


WAREHOUSES = (Role.WAREHOUSE_READ, Role.WAREHOUSE_WRITE)


def _conflict(a: Role, b: Role) -> bool:
    """Whether two paths of these roles may not be the same, nor one inside the other: an output and an
    input or the warehouse; a warehouse written and an input."""

    def output(r: Role) -> bool:
        return r.is_output and r not in WAREHOUSES

    def read(r: Role) -> bool:
        return not r.is_output and r not in WAREHOUSES

    return any(
        (output(x) and (read(y) or y in WAREHOUSES)) or (x is Role.WAREHOUSE_WRITE and read(y))
        for x, y in ((a, b), (b, a))
    )


def _expected_refusal(world: World, name: str, kind: str, path: Path) -> bool:
    """Whether the boundary must refuse `path` as the value of `name`."""
    role = world.roles[name][0].role
    exists = os.path.lexists(path)
    is_dir = path.is_dir() and exists
    is_file = path.is_file() and not (kind == "unreadable" and not ROOT)
    special = kind in ("fifo", "zero")
    if kind == "loop" or (kind.startswith("inside ") and os.path.isfile(path.parent)):
        return True
    other = kind.lstrip("=").removeprefix("inside ").removeprefix("hard link of ")
    if other in world.values and _conflict(role, world.roles[other][0].role):
        return True  # an output onto, inside or holding an input of the same command, or the warehouse
    if role in (*WAREHOUSES, Role.OUTPUT_FILE) and not path.parent.is_dir():
        return True  # a file in a directory that is not there
    if role is Role.INPUT_FILE:
        return not is_file
    if role is Role.INPUT:
        return not (is_file or is_dir)
    if role in (Role.INPUT_DIR, Role.SOURCE):
        return not is_dir
    if role in WAREHOUSES:
        return is_dir or special
    if role is Role.OUTPUT_FILE:
        return is_dir
    if role is Role.LAKE_READ:
        return exists and not is_dir
    return (exists and not is_dir) or kind == "foreign"  # an output directory, a new lake


def _sources_once(read: Any) -> Any:
    """`warehouse_sources`, read once per warehouse state (path and stat): each cell opened the same unchanged
    warehouse in DuckDB again, a third of the matrix's time."""
    seen: dict[tuple, list[Path]] = {}

    def sources(warehouse: Path) -> list[Path]:
        try:
            info = os.stat(warehouse)
        except OSError:
            return read(warehouse)
        key = (os.path.realpath(warehouse), info.st_ino, info.st_size, info.st_mtime_ns)
        if key not in seen:
            seen[key] = read(warehouse)
        return seen[key]

    return sources


@pytest.mark.parametrize(("path", "name"), CELLS, ids=[f"{' '.join(p)}:{n}" for p, n in CELLS])
def test_every_kind_of_path(path, name, tmp_path, warehouse_template, monkeypatch):
    import typer.testing

    monkeypatch.setattr(typer.testing, "_get_command", lambda _: CLI)
    monkeypatch.setattr(roles, "warehouse_sources", _sources_once(roles.warehouse_sources))
    if name not in declared_roles(COMMANDS[path].callback):
        pytest.fail(f"{' '.join(path)} {name}: a path parameter without a role")
    world = World(tmp_path, path, warehouse_template)
    runner = CliRunner()
    command = COMMANDS[path]
    failures = []
    for kind, target in _kinds(world, name).items():
        refuse = _expected_refusal(world, name, kind, target)
        argv = world.argv({name: target})
        if refuse:
            before = {n: _digest(p) for n, p in world.inputs().items()}
            result = runner.invoke(app, argv)
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            names = [f"{w} " if w else "" for _, w in world.roles.values()]
            named = bool(lines) and any(lines[0].startswith(f"error: {w}") for w in names)
            ok = result.exit_code == 1 and len(lines) == 1 and named and "Traceback" not in result.output
            changed = [n for n, p in world.inputs().items() if _digest(p) != before[n]]
            if not ok or changed:
                failures.append(f"{kind}: exit {result.exit_code}, {result.stderr!r}, changed {changed}")
        else:
            ctx = command.make_context(" ".join(path), argv[len(path) :])
            try:
                check_paths(command.callback, dict(ctx.params))
            except PathError as exc:
                failures.append(f"{kind}: refused at the boundary but should pass ({exc})")
    assert not failures, "\n".join(failures)
