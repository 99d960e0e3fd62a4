"""beamtrove's modules import one another without a cycle, and an import made inside a function says why.

The import graph is read from the source with ``ast``. Every ``import`` statement of every module, at the top
or inside a function, is an edge: an import inside a function still ties the two modules together, it only
moves the cycle to the first call. Statements under ``if TYPE_CHECKING:`` are left out: they never run. A
module imported by name through ``importlib`` is an edge too, from the module that names it: the pipeline
registry and ``exported_from`` name modules in full, and the file format and command registries name their
package's submodules, which they join to ``__name__``. A lookup by name hides an import from a reader, not
from the order modules run in.

How packages count. Importing ``a.b.c`` runs ``a/__init__`` and then ``a/b/__init__`` first, so an import of
``a.b.c`` is an edge to ``a.b.c`` and to each package above it, except the packages above the importing module
itself: Python began running those before the module, so importing a sibling cannot run them again, nor find
them any less initialised than the module's own import did. That is why a module of a package that imports a
sibling is no cycle with the package's ``__init__``, even when the ``__init__`` imports both. Naming the
package itself (``import a.b``, or ``from a.b import name`` where ``name`` is no submodule) is an edge to its
``__init__`` from wherever it is written: when that ``__init__`` imports the module back, the module asks a
half-run ``__init__`` for a name, which is a cycle a reader sees and Python trips on.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "beamtrove"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Every module of beamtrove (a package by its own name) -> its file.
MODULES = {_module_name(path): path for path in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _packages_above(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{line}"


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement of a module, and whether it runs inside a function."""

    module: str
    node: ast.Import | ast.ImportFrom
    in_function: bool

    @property
    def where(self) -> str:
        return _where(self.module, self.node.lineno)

    def targets(self) -> list[str]:
        """The modules the statement names: ``from pkg import name`` names ``pkg.name`` if that is a module."""
        node = self.node
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            # A relative import starts from the package of the module: its own, for a package's __init__.
            parts = self.module.split(".") if _is_package(self.module) else self.module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str) -> list[Import]:
    """The import statements of ``module`` that run, at the top or in a function (not under TYPE_CHECKING)."""

    def walk(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield Import(module, child, in_function)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.orelse:  # what runs when not type checking
                    yield from walk(ast.Module([statement], []), in_function)
            else:
                yield from walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    return list(walk(ast.parse(MODULES[module].read_text("utf-8")), False))


def named_modules(module: str) -> list[tuple[str, int]]:
    """The beamtrove modules ``module`` names in a string to import by name, each with its line."""
    tree = ast.parse(MODULES[module].read_text("utf-8"))
    # A package that imports f"{__name__}.{name}" names its submodules by their last part.
    joins_its_name = _is_package(module) and any(
        isinstance(node, ast.JoinedStr)
        and isinstance(node.values[0], ast.FormattedValue)
        and ast.unparse(node.values[0].value) == "__name__"
        for node in ast.walk(tree)
    )
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in MODULES and node.value != PACKAGE:  # "beamtrove" is also a word splitter's name
                named.append((node.value, node.lineno))
            elif joins_its_name and f"{module}.{node.value}" in MODULES:
                named.append((f"{module}.{node.value}", node.lineno))
    return named


@dataclasses.dataclass(frozen=True)
class Edge:
    """Importing ``named`` from ``source`` runs ``target``: ``named`` itself, or a package above it."""

    source: str
    target: str
    named: str
    where: str
    how: str  # "at the top", "in a function" or "by name"

    def __str__(self) -> str:
        via = "" if self.named == self.target else f" (importing {self.named} runs its package)"
        return f"{self.source} -> {self.target}{via}  [{self.where}, {self.how}]"


def import_edges() -> list[Edge]:
    """Every edge between two beamtrove modules, as the module docstring counts them."""
    edges = []
    for module in MODULES:
        named_at = [
            (named, imported.where, "in a function" if imported.in_function else "at the top")
            for imported in imports(module)
            for named in imported.targets()
        ]
        named_at += [(named, _where(module, line), "by name") for named, line in named_modules(module)]
        already_running = {module, *_packages_above(module)}
        for named, where, how in named_at:
            if named not in MODULES:
                continue  # not beamtrove's
            for target in [*_packages_above(named), named]:
                if target not in already_running:
                    edges.append(Edge(module, target, named, where, how))
    return edges


def strongly_connected(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm), each sorted."""
    successors: dict[str, list[str]] = {node: [] for node in nodes}
    for edge in edges:
        successors[edge.source].append(edge.target)
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = lowest[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in successors[node]:
            if successor not in index:
                visit(successor)
                lowest[node] = min(lowest[node], lowest[successor])
            elif successor in on_stack:
                lowest[node] = min(lowest[node], index[successor])
        if lowest[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                components.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return sorted(components)


def test_strongly_connected_finds_the_cycles_and_only_them():
    def edge(source: str, target: str) -> Edge:
        return Edge(source, target, target, "here", "at the top")

    edges = [edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d"), edge("d", "e"), edge("e", "d")]
    assert strongly_connected(list("abcdef"), edges) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected(list("ab"), [edge("a", "b")]) == []


def test_edges_count_imports_and_packages_as_the_module_docstring_says():
    edges = import_edges()

    def targets(source: str, how: str | None = None) -> set[str]:
        return {edge.target for edge in edges if edge.source == source and how in (None, edge.how)}

    # A module of beamtrove.transforms.dedup importing its siblings runs neither package again.
    assert not {"beamtrove", "beamtrove.transforms", "beamtrove.transforms.dedup"} & targets(
        "beamtrove.transforms.dedup.index_build"
    )
    # A package's __init__ importing its own modules, relatively or not.
    assert "beamtrove.transforms.dedup.index" in targets("beamtrove.transforms.dedup")
    # Another package's module runs that package first.
    assert "beamtrove.transforms" in targets("beamtrove.pipelines.common")
    # The registries: by full name, and by the last part joined to the package's name.
    assert "beamtrove.pipelines.fineweb" in targets("beamtrove.pipelines", "by name")
    assert "beamtrove.formats.parquet" in targets("beamtrove.formats", "by name")
    assert "beamtrove.cli.report" in targets("beamtrove.cli", "by name")
    # What is imported only for type checking is no edge.
    assert "beamtrove.pipelines.spec" not in targets("beamtrove.pipelines")


def test_no_import_cycle_between_beamtrove_modules():
    edges = import_edges()
    cycles = strongly_connected(list(MODULES), edges)
    described = []
    for members in cycles:
        inside = sorted({str(edge) for edge in edges if edge.source in members and edge.target in members})
        described.append(f"a cycle of {len(members)} modules: {', '.join(members)}\n    " + "\n    ".join(inside))
    assert not cycles, f"{len(cycles)} import cycle(s) in beamtrove/, each with its edges:\n" + "\n".join(described)


# An import is made inside a function for an optional dependency, or for the start-up time of what does not
# need it. A comment saying that the module is imported back ("X imports this module") excuses a cycle, which the
# test above finds whatever the comment says; these words are refused so that no comment excuses one.
_CYCLE_WORDS = re.compile(
    r"\bcycl|\bcircular|\bimports? (?:it )?back\b|\b(?:imports|on|with|through|into) this (?:module|package)\b",
    re.IGNORECASE,
)
_NOQA = re.compile(r"#\s*noqa:\s*PLC0415\b[\s\-:(),.]*(?P<reason>.*)")


def _reason(lines: list[str], imported: Import, first_of_run: int) -> str:
    """The comment after the statement's noqa, else the comment lines right above the run of imports it is in."""
    marked = _NOQA.search(lines[imported.node.lineno - 1])
    if marked and marked.group("reason").strip(" )"):
        return marked.group("reason")
    above, number = [], first_of_run - 1
    while number >= 1 and lines[number - 1].strip().startswith("#"):
        above.insert(0, lines[number - 1].strip().lstrip("# "))
        number -= 1
    return " ".join(above)


def test_every_import_inside_a_function_says_why_it_is_made_there():
    problems = []
    for module, path in MODULES.items():
        lines = path.read_text("utf-8").splitlines()
        inside = sorted((imp for imp in imports(module) if imp.in_function), key=lambda imp: imp.node.lineno)
        first_of_run: dict[Import, int] = {}
        for previous, imported in zip([None, *inside], inside, strict=False):
            # Imports on consecutive lines share the comment above the first of them.
            follows = previous is not None and previous.node.end_lineno == imported.node.lineno - 1
            first_of_run[imported] = first_of_run[previous] if follows else imported.node.lineno
        for imported in inside:
            reason = _reason(lines, imported, first_of_run[imported])
            if not reason:
                problems.append(f"{imported.where}: no comment says why it is imported inside a function")
            elif _CYCLE_WORDS.search(reason):
                problems.append(f"{imported.where}: excused by a cycle: {reason}")
    assert not problems, "imports inside a function:\n" + "\n".join(problems)


def test_a_comment_excusing_a_cycle_is_told_from_one_giving_a_reason():
    for excuse in (
        "Imported here: the command line imports this module.",
        "Imported here: staged jobs build on this package's job directory.",
        "Imported here: the summary statistics pipeline is itself declared with this module.",
        "imported late to avoid a circular import",
    ):
        assert _CYCLE_WORDS.search(excuse), excuse
    for reason in (
        "an optional dependency, loaded by the workers that use it",
        "Beam's import is paid only when the Flink version must come from it: the rest of this module needs no Beam.",
    ):
        assert not _CYCLE_WORDS.search(reason), reason
