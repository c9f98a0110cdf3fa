"""The import graph of `pipeline` is the architecture diagram: no cycles, each stage imports only
from itself and earlier stages, and no module is loaded from a list of names.

Read from the source (AST), not by importing it: every import counts, including those inside
functions (imported lazily is still a dependency); only imports under ``if TYPE_CHECKING:`` are
skipped, as they never run.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# core < sources < transforms < warehouse < ingest < evidence < output < jobs < network < api < cli
LAYERS = (
    "core",
    "sources",
    "transforms",
    "warehouse",
    "ingest",
    "evidence",
    "output",
    "jobs",
    "network",
    "api",
    "cli",
)
# Dask is an optional extra (`network`): one module imports it, so the single-host tool never does.
DASK_IMPORTERS = {"pipeline.network.cluster"}
SAMPLES_MAY_IMPORT = ("core", "sources")
TOP_MAY_IMPORT = ("api", "core")  # `pipeline/__init__.py`: lazy look-ups of the facade and the version

# Modules that import modules by computed name, and why. Everything else imports by `import`.
DYNAMIC_IMPORTS = {
    "pipeline.evidence.registry": "package discovery: every module of pipeline.evidence.tables",
    "pipeline.cli.commands": "package discovery: every module of pipeline.cli.commands",
    "pipeline.sources.store.adbc": "third-party driver modules, imported without pyarrow.dataset",
    # Each kind names its functions as "module:function", resolved on use, so reading a config loads no
    # engine; test_the_source_kind_registry_respects_the_layers checks every such reference.
    "pipeline.ingest.kinds": "lazy references of the source-kind registry",
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name → file, for every .py file of the package at `package_dir`."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def _parsed(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def parse(path: Path) -> ast.Module:
    """The syntax tree of `path`'s current text; each text is parsed once per process, as most checks below
    read every module of the package. Nothing changes a tree."""
    return _parsed(path.read_text(), str(path))


@functools.cache
def _runtime_node_list(tree: ast.AST) -> tuple[ast.AST, ...]:
    found = []
    pending = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return tuple(found)


def _runtime_nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of `tree` except those under ``if TYPE_CHECKING:`` (its ``else`` branch runs); listed once
    per tree."""
    return _runtime_node_list(tree)


@functools.cache
def _all_nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(tree))


def walk(path: Path) -> tuple[ast.AST, ...]:
    """Every node of `path`'s tree (`ast.walk`'s order), listed once per text."""
    return _all_nodes(parse(path))


def imports(name: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """The runtime imports of module `name` that name a module of `known` (the nearest known module:
    ``from pipeline.a import b`` is ``pipeline.a.b`` when that is a module, else ``pipeline.a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges = []
    for node in _runtime_nodes(parse(path)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.append(Edge(name, target, node.lineno))
    return edges


def import_graph(package_dir: Path) -> dict[str, list[Edge]]:
    known = modules(package_dir)
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, list[Edge]]) -> list[Edge] | None:
    """One import cycle of `graph` as its edges, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Edge] = []

    def visit(module: str) -> list[Edge] | None:
        state[module] = 1
        for edge in graph.get(module, []):
            if state.get(edge.target) == 1:
                start = next((i for i, e in enumerate(path) if e.source == edge.target), len(path))
                return [*path[start:], edge]
            if edge.target not in state:
                path.append(edge)
                if (cycle := visit(edge.target)) is not None:
                    return cycle
                path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def stage(module: str) -> str:
    """The stage of a module: ``pipeline.ingest.store`` → ``ingest``; ``pipeline`` itself → ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, list[Edge]]) -> list[str]:
    bad = []
    for edges in graph.values():
        for edge in edges:
            src, dst = stage(edge.source), stage(edge.target)
            if dst == "samples" and src != "samples":
                bad.append(f"{edge}: the runtime never imports the sample generator")
            elif src == "samples":
                if dst not in (*SAMPLES_MAY_IMPORT, "samples"):
                    bad.append(f"{edge}: samples may import only {', '.join(SAMPLES_MAY_IMPORT)}")
            elif src == "":
                if dst not in TOP_MAY_IMPORT:
                    bad.append(f"{edge}: pipeline/__init__.py may import only {', '.join(TOP_MAY_IMPORT)}")
            elif dst == "":
                bad.append(f"{edge}: import the module itself, not the top-level package")
            elif src not in LAYERS or dst not in LAYERS:
                bad.append(f"{edge}: a stage outside {LAYERS}")
            elif LAYERS.index(dst) > LAYERS.index(src):
                bad.append(f"{edge}: {src} may not import from the later stage {dst}")
    return bad


def dynamic_imports(name: str, path: Path) -> list[str]:
    """`__import__(...)` and `import_module(...)` calls of a module (loading modules by name)."""
    found = []
    for node in _runtime_nodes(parse(path)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in ("__import__", "import_module"):
                found.append(f"{name}: {called}(...) at line {node.lineno}")
    return found


PIPELINE = ROOT / "pipeline"


def test_the_stages_are_the_packages():
    """Every module lives in a stage package (or is `pipeline.api`, the facade)."""
    stray = [name for name in modules(PIPELINE) if stage(name) not in (*LAYERS, "samples", "")]
    assert stray == []
    assert {stage(name) for name in modules(PIPELINE)} == {*LAYERS, "samples", ""}


def test_no_import_cycle():
    cycle = find_cycle(import_graph(PIPELINE))
    assert cycle is None, "import cycle: " + "; ".join(map(str, cycle or []))


def test_each_stage_imports_only_itself_and_earlier_stages():
    assert layer_violations(import_graph(PIPELINE)) == []


def test_no_module_is_loaded_by_name_outside_package_discovery():
    found = [
        call
        for name, path in modules(PIPELINE).items()
        if name not in DYNAMIC_IMPORTS
        for call in dynamic_imports(name, path)
    ]
    assert found == []
    # The allowed ones still exist (a stale entry would hide a new loader of the same name).
    for name in DYNAMIC_IMPORTS:
        assert dynamic_imports(name, modules(PIPELINE)[name]), name


def test_the_source_kind_registry_respects_the_layers():
    """The registry's "module:function" references are imports too: each resolves, and names a module
    of the ingest stage or an earlier one."""
    from pipeline.ingest.kinds import SOURCE_KINDS, resolve

    references = set()
    for kind in SOURCE_KINDS.values():
        references.add(kind.ingester)
        if kind.log is not None:
            references.update(r for r in (kind.log.detects, kind.log.reader, kind.log.ingests) if r)
    assert len(references) >= 8
    for reference in sorted(references):
        assert callable(resolve(reference)), reference
        module_stage = stage(reference.partition(":")[0])
        assert LAYERS.index(module_stage) <= LAYERS.index("ingest"), reference


def test_the_command_line_calls_only_the_facade():
    """A command reaches the library through `pipeline.api` only (core's primitives aside)."""
    graph = import_graph(PIPELINE)
    bad = [
        str(edge)
        for name, edges in graph.items()
        if stage(name) == "cli"
        for edge in edges
        if stage(edge.target) not in ("cli", "api", "core")
    ]
    assert bad == []


def test_only_the_command_line_uses_typer_or_progress_bars():
    """The library renders text (the table renderers use Rich to lay out a string) but never owns the
    terminal: the command line, its options and its progress bars are the CLI's."""
    found = []
    for name, path in modules(PIPELINE).items():
        if stage(name) == "cli":
            continue
        for node in _runtime_nodes(parse(path)):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{name} -> {n} (line {node.lineno})"
                for n in names
                if n.split(".")[0] == "typer" or n == "rich.progress"
            ]
    assert found == []


# --- the checks themselves, on planted packages -------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / "pipeline" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "pipeline"


def test_a_planted_cycle_is_found_and_named(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "ingest/__init__.py": "",
            "ingest/a.py": "from pipeline.ingest import b\n",
            # a function-level import counts; a relative one resolves
            "ingest/b.py": "def f():\n    from .c import g\n",
            "ingest/c.py": "import pipeline.ingest.a\n",
        },
    )
    cycle = find_cycle(import_graph(package))
    assert [str(e) for e in cycle or []] == [
        "pipeline.ingest.a -> pipeline.ingest.b (line 1)",
        "pipeline.ingest.b -> pipeline.ingest.c (line 2)",
        "pipeline.ingest.c -> pipeline.ingest.a (line 1)",
    ]


def test_type_checking_imports_are_not_edges(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline.cli import b\n",
            "cli/__init__.py": "",
            "cli/b.py": "from pipeline.core import a\n",
        },
    )
    graph = import_graph(package)
    assert find_cycle(graph) is None
    assert layer_violations(graph) == []


def test_a_planted_layer_violation_is_named(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "evidence/__init__.py": "",
            "evidence/a.py": "def f():\n    from pipeline.output.render import text\n",
            "output/__init__.py": "",
            "output/render/__init__.py": "",
            "output/render/text.py": "",
            "samples/__init__.py": "",
            "samples/s.py": "from pipeline.ingest import x\n",
            "ingest/__init__.py": "",
            "ingest/x.py": "import pipeline.samples.s\n",
        },
    )
    assert sorted(layer_violations(import_graph(package))) == [
        "pipeline.evidence.a -> pipeline.output.render.text (line 2): "
        "evidence may not import from the later stage output",
        "pipeline.ingest.x -> pipeline.samples.s (line 1): the runtime never imports the sample generator",
        "pipeline.samples.s -> pipeline.ingest.x (line 1): samples may import only core, sources",
    ]


def test_a_planted_dynamic_import_is_named(tmp_path):
    loader = "for m in ('a', 'b'):\n    __import__(m)\n"
    package = _package(tmp_path, {"__init__.py": "", "cli/__init__.py": loader})
    assert dynamic_imports("pipeline.cli", package / "cli" / "__init__.py") == [
        "pipeline.cli: __import__(...) at line 2"
    ]


@pytest.mark.parametrize("stage_name", LAYERS)
def test_every_stage_is_a_package(stage_name):
    assert (PIPELINE / stage_name / "__init__.py").exists() or (PIPELINE / f"{stage_name}.py").exists()


def test_only_the_network_cluster_imports_dask():
    """`pip install gonka-evidence` without the `network` extra runs every single-host command: no module but
    pipeline/network/cluster.py imports dask or distributed, at any depth (function-level imports included)."""
    found = []
    for name, path in modules(PIPELINE).items():
        for node in _runtime_nodes(parse(path)):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [(name, n) for n in names if n.split(".")[0] in ("dask", "distributed")]
    assert found and {name for name, _ in found} == DASK_IMPORTERS, found


# `output` split by what it is: each part and the parts it may import. Rendering (render/, report/, bundle,
# evidence, summaries) sits on query/ and guards/; doctor/ on query/ and render/; guards/ on nothing of output
# but one lazy look-up; query/ on guards/ (its --output is written whole).
OUTPUT_PARTS: dict[str, set[str]] = {
    "guards": {"bundle"},  # roles: an unchanged bundle directory is the tool's own output (is_own_bundle)
    "query": {"guards"},
    "doctor": {"query", "render"},
    "render": set(),
    "report": {"guards", "query", "render"},
    "bundle": {"guards", "render", "report"},
    "evidence": {"render"},
    "summaries": set(),
}


def output_part(module: str) -> str | None:
    """The part of `output` a module belongs to: ``pipeline.output.query.execute`` → ``query``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "output" else None


def output_part_violations(graph: dict[str, list[Edge]]) -> list[str]:
    bad = []
    for name, edges in graph.items():
        if (src := output_part(name)) is None:
            continue
        if src not in OUTPUT_PARTS:
            bad.append(f"{name}: a part of output not in OUTPUT_PARTS")
            continue
        for edge in edges:
            dst = output_part(edge.target)
            if dst is not None and dst != src and dst not in OUTPUT_PARTS[src]:
                bad.append(f"{edge}: output's {src} may not import its {dst}")
    return bad


def test_the_parts_of_output_import_only_what_they_may():
    """query/, guards/, doctor/ and the rendering modules of `output` each import only the parts named for it."""
    assert output_part_violations(import_graph(PIPELINE)) == []
    assert {output_part(name) for name in modules(PIPELINE)} - {None} == set(OUTPUT_PARTS)


def test_a_planted_import_between_output_parts_is_named(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "output/__init__.py": "",
            "output/guards/__init__.py": "",
            "output/guards/safety.py": "from pipeline.output.query import execute\n",
            "output/query/__init__.py": "",
            "output/query/execute.py": "from pipeline.output.guards import safety\n",
        },
    )
    assert output_part_violations(import_graph(package)) == [
        "pipeline.output.guards.safety -> pipeline.output.query.execute (line 1): "
        "output's guards may not import its query"
    ]


# A connection's relations are made in the warehouse layer only (`database.relation`, which completes what an
# earlier `execute()` left), or on a cursor of their own that nothing else ran on.
RELATION_MAKERS = {"pipeline.warehouse.database", "pipeline.network.partition"}


def test_no_duckdb_result_is_left_unfinished_by_construction():
    """DuckDB 2 refuses a connection's next relation or registration while an `execute()` result is unread
    (`run` of a config without builds ended in `ResourceInUseException`): no module reads a result in part
    (`fetchone`), and relations go through the warehouse layer."""
    found = []
    for name, path in modules(PIPELINE).items():
        if stage(name) == "samples":  # the sample writers' sqlite3 cursors
            continue
        for node in walk(path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "fetchone" or (node.func.attr == "sql" and name not in RELATION_MAKERS):
                    found.append(f"{name}: .{node.func.attr}() (line {node.lineno})")
    assert found == []


# Exceptions that are no user error: each is caught inside the library and becomes a counted quarantine, a
# user error with the file's name, or (samples) a bug in a scenario; never a one-line refusal of its own.
INTERNAL_EXCEPTIONS = {
    "BodyError": "an answer body that is not its format: the scan's verdict",
    "CounterKeyError": "a counter key of a ledger row: quarantined",
    "OutOfRange": "a JSON number past its column: quarantined",
    "Unreadable": "a JSON file that cannot be read: quarantined",
    "DuplicateKey": "a JSON key given twice: quarantined",
    "BadResult": "a PoC result out of range: quarantined",
    "PastLimit": "an input past a limit: quarantined or turned into the reader's SourceError",
    "ChainParamError": "a chain parameter: the config loader names the entry",
    "FileReadError": "a file that cannot be used: the caller names it in its own user error",
    "PlanError": "the sample generator's scenario is wrong (a bug of the samples)",
    "StandardStreamError": "stdout failed: the CLI says it in one line, or exits 141 (pipeline/cli/conventions.py)",
}
BUILTIN_EXCEPTIONS = {"Exception", "ValueError", "RuntimeError", "OSError", "LookupError", "TypeError", "KeyError"}


def exception_classes(package_dir: Path) -> dict[str, tuple[str, list[str]]]:
    """Every class of the package with a base: name → (module file, base names)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for name, path in modules(package_dir).items():
        for node in walk(path):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, ast.Name | ast.Attribute)
                ]
                found[node.name] = (name, bases)
    return found


def non_user_errors(package_dir: Path, allowed: dict[str, str]) -> list[str]:
    """The exception classes that derive from neither UserError nor an allowed internal exception."""
    classes = exception_classes(package_dir)

    def roots(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name in BUILTIN_EXCEPTIONS or name not in classes or name in seen:
            return {name}
        return set().union(*(roots(b, seen | {name}) for b in classes[name][1])) | {name}

    wrong = []
    for name, (module, _bases) in classes.items():
        reached = roots(name)
        # An exception: it reaches a built-in one, or is named *Error (a third-party base, `duckdb.Error`, counts).
        exception = reached & BUILTIN_EXCEPTIONS or name.endswith("Error")
        if exception and "UserError" not in reached and not reached & set(allowed):
            wrong.append(f"{module}.{name}")
    return sorted(wrong)


def test_every_one_line_refusal_derives_from_user_error():
    """One root for user errors (pipeline/core/errors.py): the CLI maps `UserError` to exit code 1 in one
    place, so an error class outside it would end a command with a traceback."""
    assert non_user_errors(ROOT / "pipeline", INTERNAL_EXCEPTIONS) == []


def test_a_planted_user_error_outside_the_root_is_named(tmp_path):
    pkg = tmp_path / "pipeline"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "errors.py").write_text("class UserError(Exception):\n    pass\n")
    (pkg / "core" / "bad.py").write_text(
        "from pipeline.core.errors import UserError\n\n"
        "class GoodError(UserError):\n    pass\n\n"
        "class StrayError(ValueError):\n    pass\n\n"
        "class DatabaseError(duckdb.Error):\n    pass\n"
    )
    assert non_user_errors(pkg, {}) == ["pipeline.core.bad.DatabaseError", "pipeline.core.bad.StrayError"]


# Modules that may write to the standard streams themselves, and why. Everything else says what it has to
# say through pipeline/cli/console.py (the terminal) or the job's listener (pipeline/core/events.py).
PRINTERS = {
    "pipeline.cli.console": "the console: every line the command line prints",
    "pipeline.cli.process": "the Ctrl-C line, written by a signal handler without Rich",
    "pipeline.cli.docs": "the developer's generator of the docs pages",
    "pipeline.samples": "the developer's sample generator (`python -m pipeline.samples`)",
}


def _renders_to_a_buffer(call: ast.Call) -> bool:
    """A rich Console given a file that is not a standard stream renders text (a table into a string)."""
    for kw in call.keywords:
        if kw.arg == "file":
            v = kw.value
            return not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "sys")
    return False


CONSOLE_MODULE = "pipeline.cli.console"


def _console_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names a module binds to the console module's Rich consoles (``from pipeline.cli.console import out as
    console``) or to Rich's own print (``from rich import print``), and those it binds to the console module."""
    consoles, module = set(), set()
    for node in _all_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module in (CONSOLE_MODULE, "rich"):
            wanted = ("out", "err", "_console") if node.module == CONSOLE_MODULE else ("print",)
            consoles |= {alias.asname or alias.name for alias in node.names if alias.name in wanted}
        elif isinstance(node, ast.ImportFrom) and node.module == "pipeline.cli":
            module |= {alias.asname or alias.name for alias in node.names if alias.name == "console"}
        elif isinstance(node, ast.Import):
            module |= {alias.asname for alias in node.names if alias.name == CONSOLE_MODULE and alias.asname}
    return consoles, module


def printing_calls(package_dir: Path, allowed: dict[str, str]) -> list[str]:
    """Each print(), typer/click echo or secho, rich print, sys.stdout/stderr write (its buffer's too), print on
    the console module's Rich consoles, and rich Console made outside `allowed`."""
    found = []
    for name, path in modules(package_dir).items():
        if any(name == m or name.startswith(m + ".") for m in allowed):
            continue
        tree = parse(path)
        consoles, console_module = _console_names(tree)
        for node in _all_nodes(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            what = None
            if isinstance(f, ast.Name) and (f.id == "print" or f.id in consoles):
                what = f.id
            elif isinstance(f, ast.Attribute) and f.attr == "print" and isinstance(f.value, ast.Name):
                if f.value.id in consoles or f.value.id == "rich":
                    what = f"{f.value.id}.print"
            elif isinstance(f, ast.Attribute) and f.attr == "print" and isinstance(f.value, ast.Attribute):
                if (
                    f.value.attr in ("out", "err")
                    and isinstance(f.value.value, ast.Name)
                    and f.value.value.id in console_module
                ):
                    what = f"console.{f.value.attr}.print"
            elif isinstance(f, ast.Name) and f.id == "Console" and not _renders_to_a_buffer(node):
                what = f.id
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("echo", "secho"):
                what = f"{f.value.id}.{f.attr}" if f.value.id in ("typer", "click") else None
            elif isinstance(f, ast.Attribute) and f.attr == "write" and isinstance(f.value, ast.Attribute):
                inner = f.value
                if inner.attr == "buffer" and isinstance(inner.value, ast.Attribute):  # sys.stdout.buffer.write
                    inner = inner.value
                if isinstance(inner.value, ast.Name) and inner.value.id == "sys" and inner.attr in ("stdout", "stderr"):
                    what = f"sys.{inner.attr}.write"
            if what:
                found.append(f"{name}:{node.lineno} {what}")
    return sorted(found)


def test_nothing_prints_outside_the_console_module():
    """One console: the library never prints (a job's lines go to its listener), and the command line prints
    through pipeline/cli/console.py only."""
    assert printing_calls(ROOT / "pipeline", PRINTERS) == []


def test_a_planted_print_is_named(tmp_path):
    pkg = tmp_path / "pipeline"
    (pkg / "ingest").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ingest" / "__init__.py").write_text("")
    (pkg / "ingest" / "loud.py").write_text(
        "import sys\nimport typer\n\nprint(1)\ntyper.echo(2)\nsys.stderr.write('3')\n"
    )
    # A command printing on the console module's consoles itself, not through its functions.
    (pkg / "ingest" / "louder.py").write_text(
        "import sys\nfrom pipeline.cli.console import out as console, info\nfrom rich import print as rprint\n"
        "from pipeline.cli import console as c\n\n"
        "console.print(1)\nrprint(2)\nsys.stdout.buffer.write(b'3')\nc.err.print(4)\ninfo('5')\ntyper.secho(6)\n"
    )
    assert printing_calls(pkg, {}) == [
        "pipeline.ingest.loud:4 print",
        "pipeline.ingest.loud:5 typer.echo",
        "pipeline.ingest.loud:6 sys.stderr.write",
        "pipeline.ingest.louder:11 typer.secho",
        "pipeline.ingest.louder:6 console.print",
        "pipeline.ingest.louder:7 rprint",
        "pipeline.ingest.louder:8 sys.stdout.write",
        "pipeline.ingest.louder:9 console.err.print",
    ]


def test_one_builder_of_reproducing_commands():
    """Every reproducing command (footers, reports, bundles, the command line's own) is quoted by
    pipeline/core/command.py: no other module quotes a command line itself."""
    quoting = [
        name
        for name, path in modules(PIPELINE).items()
        if name != "pipeline.core.command"
        for node in walk(path)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(a.name == "shlex" for a in node.names) | (isinstance(node, ast.ImportFrom) and node.module == "shlex")
    ]
    assert quoting == []
