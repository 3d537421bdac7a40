"""The house's arrows point one way: parser -> planner -> executor -> statements and api, and
the CLI on the public package. Every import counts, including lazy ones inside functions and those under
TYPE_CHECKING: a circle hidden in a function is still a circle for the reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "recsql"

# Lower ranks never import higher ones; the CLI, the server and the notebook magic reach the
# engine only through the public `recsql` package (and the parser's statement splitting, which
# the shell and the magic need, and `report`, how iterations look to a person, which the CLI and
# the magic share).
RANKS = {"errors": 0, "settings": 0, "parser": 1, "planner": 2, "executor": 3, "statements": 4,
         "api": 4, "report": 4, "__init__": 5, "cli": 6, "server": 6, "notebook": 6}
ON_THE_PUBLIC_API = ("cli", "server", "notebook")
CLI_MAY_IMPORT = {"recsql", "recsql.errors", "recsql.settings", "recsql.parser", "recsql.report"}
# The package re-exports `recsql.serve` from the server's light `__init__`, which loads the server
# (itself on the public package, like the CLI) only when one starts, and `load_ipython_extension`
# from the notebook package, which loads the magic only when IPython loads the extension: not
# edges of the house.
REEXPORTS = {("recsql", "recsql.server"), ("recsql", "recsql.notebook")}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The recsql modules `name` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
    return {t for t in targets if t in known and t != name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) - {t for s, t in REEXPORTS if s == name}
            for name, path in found.items()}


def room(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_no_import_circles():
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                cycle = stack[stack.index(target):] + [target]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_imports_point_down():
    wrong = []
    for module, targets in graph().items():
        for target in targets:
            if room(module) in ON_THE_PUBLIC_API and room(target) not in ON_THE_PUBLIC_API:
                if target not in CLI_MAY_IMPORT:
                    wrong.append(f"{module} -> {target} (not the public API)")
            elif RANKS[room(target)] > RANKS[room(module)]:
                wrong.append(f"{module} -> {target} (upward)")
    assert not wrong, "\n".join(sorted(wrong))


def test_sqlalchemy_dialect_imports_only_pyhive_and_sqlalchemy():
    """`recsql.sqlalchemy` is installed into BI tools' environments without recsql's dependencies
    (`pip install --no-deps`): it may import the standard library, PyHive and SQLAlchemy only,
    and loading it must not load the rest of recsql (the package's names load lazily)."""
    import subprocess
    import sys

    allowed = {"__future__", "pyhive", "sqlalchemy"}
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / "sqlalchemy.py").read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else (node.module or "").split(".")[0])
    assert found - set(sys.stdlib_module_names) <= allowed, found
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, recsql.sqlalchemy; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('recsql', 'pyspark', 'sqlglot')))"],
        capture_output=True, text=True, check=True, cwd=PACKAGE.parent).stdout
    assert loaded.strip() == "['recsql', 'recsql.sqlalchemy']"


# The executor receives an analysed plan: of the planner it reads the plan's data model only.
# Binding and planning a statement are the statement layer's (`recsql.statements`); what the
# planner decides once (a branch is seeded, the delta rules of the round that switches to
# doubling) the plan carries; where a node is written in the SQL text is the parser's
# (`recsql.parser.locate`).
EXECUTOR_READS_OF_THE_PLANNER = {
    "recsql.planner.model", "recsql.planner.names",
    "recsql.planner.aggregates",  # what each head aggregate means: part of the plan's data model
}


def test_the_executor_reads_the_plan_not_the_planner():
    wrong = sorted(f"{module} -> {target}" for module, targets in graph().items()
                   if room(module) == "executor" for target in targets
                   if room(target) == "planner" and target not in EXECUTOR_READS_OF_THE_PLANNER)
    assert not wrong, "\n".join(wrong)
    stages = {"plan_query", "expand_views", "render_plan", "table_not_found"}
    calls = sorted(f"{path.name}: {node.id}" for name, path in modules().items() if room(name) == "executor"
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Name) and node.id in stages)
    assert not calls, calls
