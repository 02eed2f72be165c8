"""The house: every module's imports, read from the source, run only downward through the floors below,
never in a circle; the component packages stay apart; an import inside a function says why; no module
grows past MAX_LINES, no function (in bench/, tools/ and tests/ too) past MAX_FUNCTION_LINES. The floors
are written once, here (docs/design.md draws the same map)."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO
from tfxd.beam_engines import RUNNERS
from tfxd.formats import FORMATS
from tfxd.pipeline.spec.targets import TARGETS
from tools.typing_tree import package_dirs

# Top floor first. A module may import modules of its own floor and of the floors below, never above.
# Names are import names under tfxd; "tfxd" alone is the ground (tfxd/*.py and the example specs).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("tfxd.cli",),  # the command line and `tfxd init`'s scaffolding
    ("tfxd.kubeflow",),  # Kubeflow Pipelines and Vertex AI: compile, submit, schedules, replay
    ("tfxd.pipeline.run",),  # local runs and what they did
    ("tfxd.pipeline.report",),  # what people read: the summary table, report.html, the graph
    ("tfxd.pipeline.assembly",),  # spec -> the TFX pipeline
    ("tfxd.pipeline.spec",),  # the spec: models, YAML with positions, errors, overrides, placement
    ("tfxd.components",),  # the TFX components
    ("tfxd.trainer_module",),  # what runs inside the Trainer
    ("tfxd",),  # the ground: TF environment, console, files, expressions, the tables of names
)
# Rooms on one floor that do not import each other: each component stands on its own.
APART = tuple(f"tfxd.components.{path.parent.name}" for path in sorted((REPO / "components").glob("*/__init__.py")))
# The folders of the repository that are tfxd's subpackages, as pyproject.toml maps them (folder -> package).
FOLDERS = {folder: package for package, folder in package_dirs().items()}
KEYS = "tfxd.keys"  # where a name that crosses rooms lives
# where the targets are told apart by name: the spec's models, and kubeflow/'s classes
TARGET_TABLES = ("tfxd.pipeline.spec.targets", "tfxd.kubeflow.targets")
MAX_LINES = 450
MAX_FUNCTION_LINES = 60  # from `def` to the last line, decorators left out
# besides the package's folders, the code read as often: the benchmarks, the tools, the tests
OTHER_FOLDERS = ("bench", "tools", "tests")
LAZY = re.compile(r"#.*\bstart-up\b")  # how an import inside a function says why it is there


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported tfxd module
    line: int
    end_line: int
    in_function: bool


def _modules() -> dict[str, Path]:
    """Import name -> file, for every module of the package."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every check that reads it."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(name: str, path: Path) -> list[Import]:
    tree = _tree(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend(Import(name, alias.name, child.lineno, child.end_lineno or child.lineno, in_function)
                             for alias in child.names if _ours(alias.name))
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child, package)
                for alias in child.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                    if _ours(target):
                        found.append(Import(name, target, child.lineno, child.end_lineno or child.lineno,
                                            in_function))
            visit(child, inside)

    visit(tree, False)
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _ours(module: str) -> bool:
    return module == "tfxd" or module.startswith("tfxd.")


IMPORTS = [found for name, path in MODULES.items() for found in _imports(name, path)]


def _floor(module: str) -> int:
    """The floor of a module: its longest matching prefix; 0 is the top."""
    best = None
    for index, names in enumerate(FLOORS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} stands on no floor: add it to FLOORS"
    return best[0]


def _room(module: str) -> str:
    """The room of a module: its component, or else its floor."""
    apart = next((prefix for prefix in APART if module == prefix or module.startswith(prefix + ".")), None)
    return apart or FLOORS[_floor(module)][0]


def _string_constants(path: Path) -> set[str]:
    """The module's UPPER_CASE names bound to a string literal at its top level (A = "a"; A, B = "a", "b")."""
    found = set()
    for node in _tree(path).body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts, strict=True) if isinstance(target, ast.Tuple)
                     and isinstance(node.value, ast.Tuple) else [(target, node.value)])
            found.update(name.id for name, value in pairs if isinstance(name, ast.Name) and name.id.isupper()
                         and isinstance(value, ast.Constant) and isinstance(value.value, str))
    return found


def _crossing_names(name: str, path: Path, constants: dict[str, set[str]]) -> list[str]:
    """A string constant this module takes from another room's module, by name or as module.NAME."""
    tree = _tree(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    bound: dict[str, str] = {}  # a local name -> the tfxd module it is
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif alias.name in constants.get(base, ()):
                    found.append((base, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            bound.update({alias.asname: alias.name for alias in node.names if alias.asname and alias.name in MODULES})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr in constants.get(module, ()):
                found.append((module, node.attr, node.lineno))
    return [f"{name} (line {line}) takes {constant} from {module}: a name that crosses rooms lives in {KEYS}"
            for module, constant, line in found
            if _room(module) != _room(name) and _floor(module) != len(FLOORS) - 1]


def test_every_module_stands_on_a_floor():
    assert {name for name in MODULES if _floor(name) == len(FLOORS) - 1} >= {"tfxd", "tfxd.console", "tfxd.keys"}
    assert _floor("tfxd.cli.main") == 0 and _floor("tfxd.pipeline.spec.load") == 5


def test_no_import_runs_back_up():
    upward = [f"{found.source} (line {found.line}) imports {found.target}, which is on a higher floor"
              for found in IMPORTS if _floor(found.target) < _floor(found.source)]
    assert not upward, "\n".join(upward)


def test_components_stay_apart():
    def room(module: str) -> str | None:
        return next((prefix for prefix in APART if module == prefix or module.startswith(prefix + ".")), None)

    assert {"tfxd.components.example_gen", "tfxd.components.trainer", "tfxd.components.baseline"} <= set(APART)
    crossing = [f"{found.source} (line {found.line}) imports {found.target}" for found in IMPORTS
                if room(found.source) and room(found.target) and room(found.source) != room(found.target)]
    assert not crossing, "\n".join(crossing)


def test_a_name_that_crosses_rooms_lives_in_keys():
    """A string one room writes and another reads (a property, a key, a file, a variable's name) is written
    once, in tfxd/keys.py, not in the module of whichever room happened to need it first. The ground's other
    tables (engines, metrics, transforms) are shared by design and stay where they are."""
    constants = {name: _string_constants(path) for name, path in MODULES.items()}
    crossing = [line for name, path in MODULES.items() for line in _crossing_names(name, path, constants)]
    assert not crossing, "\n".join(crossing)


def _target_branches(name: str, path: Path) -> list[str]:
    """Where a module decides by a target's name: a comparison or a `match` case with a target's name (a
    string, or a target class's NAME), rather than asking the target (pipeline.spec.targets' models below
    kubeflow/, kubeflow.targets' classes on it)."""

    def names_a_target(node: ast.AST) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_target(element) for element in node.elts)
        if isinstance(node, ast.Constant):
            return node.value in TARGETS
        return (isinstance(node, ast.Attribute) and node.attr == "NAME") or (isinstance(node, ast.Name)
                                                                             and node.id == "NAME")

    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Compare) and any(names_a_target(side) for side in (node.left, *node.comparators)):
            found.append(f"{name} (line {node.lineno}) branches on a target's name: {ast.unparse(node)}")
        elif isinstance(node, ast.MatchValue) and names_a_target(node.value):
            found.append(f"{name} (line {node.lineno}) matches a target's name: {ast.unparse(node.value)}")
    return found


def test_a_target_is_asked_not_named():
    """What differs between targets lives with the target (its spec model, its kubeflow/ module); elsewhere
    the code asks it. The two tables of targets are the only places that tell them apart by name."""
    branches = [line for name, path in MODULES.items() if name not in TARGET_TABLES
                for line in _target_branches(name, path)]
    assert not branches, "\n".join(branches)


def test_the_target_check_sees_a_branch_on_a_name(tmp_path):
    module = tmp_path / "placement.py"
    module.write_text('def f(target, kind, place):\n'
                      '    if target == "vertex": pass\n'
                      '    if kind in ("kubeflow", "other"): pass\n'
                      '    if place.target != VertexPipelines.NAME: pass\n'
                      '    match target:\n'
                      '        case "local": pass\n'
                      '    if kind == "INT": pass\n'  # not a target's name
                      '    return {"local": True}\n')  # a key, not a branch
    assert [line.split(" (line ")[1].split(")")[0] for line in _target_branches("x", module)] == ["2", "3", "4", "6"]


# where a Beam runner or a data format is told apart by name: their tables; and ExampleGen's readers, by
# format, whose keys tests/tfxd/test_runners_and_formats.py holds to the formats table's
RUNNER_AND_FORMAT_TABLES = ("tfxd.beam_engines", "tfxd.formats")
FORMAT_READERS = {"tfxd.components.example_gen.records": "READERS",
                  "tfxd.components.example_gen.column_sources": "SOURCES"}


def _runner_and_format_names(name: str, path: Path) -> list[str]:
    """Where a module writes a runner's or a format's name as a string of its own (a comparison, a Literal's
    choices, a key, a default) rather than reading its row (tfxd.beam_engines.RUNNERS, tfxd.formats.FORMATS).
    A name inside a sentence is a message's, and the keys of the module's table of readers are allowed."""
    tree = _tree(path)
    readers = [node.value.keys for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
               and isinstance(node.value, ast.Dict) and FORMAT_READERS.get(name) in
               [target.id for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)]]
    allowed = {id(key) for keys in readers for key in keys}
    return [f"{name} (line {node.lineno}) names {node.value!r} where it could read tfxd.beam_engines' or "
            "tfxd.formats' row" for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and (node.value in RUNNERS or node.value in FORMATS)
            and id(node) not in allowed]


def test_a_runner_or_a_format_is_read_from_its_row_not_named():
    """What differs between Beam runners (in process, a cloud's, a job server's engine) and between data
    formats (files or a query, columns told cheaply) is a row's; a new runner or format is one new row
    (and its pom, its reader), not a name checked in the spec, the assembly and the run."""
    named = [line for name, path in MODULES.items() if name not in RUNNER_AND_FORMAT_TABLES
             for line in _runner_and_format_names(name, path)]
    assert not named, "\n".join(named)


def test_the_runner_and_format_check_sees_a_name(tmp_path):
    module = tmp_path / "records.py"
    module.write_text('READERS = {"csv": read_csv}\n'  # the readers' own table: allowed
                      'def f(beam, data, message):\n'
                      '    if beam.runner == "spark": pass\n'
                      '    runner: Literal["direct", "dataflow"] = "direct"\n'
                      '    other = {"csv": 1}\n'
                      '    return f"spark\'s master {message}", "the csv header"\n')  # messages
    found = _runner_and_format_names("tfxd.components.example_gen.records", module)
    assert sorted(int(line.split(" (line ")[1].split(")")[0]) for line in found) == [3, 4, 4, 4, 5]
    assert len(_runner_and_format_names("tfxd.cli.records", module)) == 6  # elsewhere, the key is a name too


def test_no_circle():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for found in IMPORTS:
        if found.target in graph and found.target != found.source:
            graph[found.source].add(found.target)
    circles = [sorted(component) for component in _strongly_connected(graph) if len(component) > 1]
    assert not circles, f"modules that import each other in a circle: {circles}"


def test_an_import_inside_a_function_says_why():
    silent = []
    for found in IMPORTS:
        if not found.in_function:
            continue
        lines = MODULES[found.source].read_text(encoding="utf-8").splitlines()
        start = found.line - 1
        while start > 0 and _in_import_block(lines[start - 1]):  # the block of imports it belongs to
            start -= 1
        said = any(LAZY.search(line) for line in lines[start:found.end_line])
        if not said:
            silent.append(f"{found.source} (line {found.line}) imports {found.target} inside a function "
                          "without a `# start-up: ...` comment saying why")
    assert not silent, "\n".join(silent)


def _in_import_block(line: str) -> bool:
    """An import, a blank line between import groups, or the comment that says why."""
    return not line.strip() or line.strip().startswith(("import ", "from ", "#"))


def test_no_module_is_over_the_size_of_a_room():
    big = {name: lines for name, path in MODULES.items()
           if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def _long_functions(source: str, where: str) -> list[str]:
    """Each function of ``source`` (methods and nested functions included) longer than MAX_FUNCTION_LINES,
    as ``where:line name: N lines``: past a screen, a function does several things and its reader loses
    which of them a line serves."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    return sorted(found, key=lambda line: int(line.split(":")[1].split(" ")[0]))


def test_no_function_is_over_a_screen():
    paths = [*MODULES.values(), *(path for folder in OTHER_FOLDERS for path in sorted((REPO / folder).rglob("*.py")))]
    assert {path.relative_to(REPO).parts[0] for path in paths} >= {*FOLDERS, *OTHER_FOLDERS}
    long = [line for path in paths
            for line in _long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(long)


def test_the_function_check_sees_a_long_function():
    """61 lines is one too many; 60 pass, decorators not counted; a method and a nested function count."""
    def body(lines: int, indent: str = "    ") -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    source = ("@decorator\n@another\ndef fits():\n" + body(59)  # 60 lines with its def
              + "def too_long():\n" + body(60)  # line 63
              + "class Room:\n    async def method(self):\n" + body(60, " " * 8)  # line 125
              + "def outer():\n    def inner():\n" + body(60, " " * 8))  # lines 186 and 187
    assert _long_functions(source, "bad.py") == ["bad.py:63 too_long: 61 lines", "bad.py:125 method: 61 lines",
                                                 "bad.py:186 outer: 62 lines", "bad.py:187 inner: 61 lines"]


def test_the_checks_see_a_bad_house(tmp_path):
    """The readers above find what they are for: an upward import, a circle, a silent lazy import."""
    module = tmp_path / "bad.py"
    module.write_text("from tfxd.cli import main\n\n\ndef f():\n    from tfxd.pipeline.spec import load\n")
    found = _imports("tfxd.trainer_module.bad", module)
    assert [(i.target, i.in_function) for i in found] == [("tfxd.cli.main", False), ("tfxd.pipeline.spec.load", True)]
    assert not LAZY.search(module.read_text())
    assert _floor(found[0].target) < _floor(found[0].source)
    circles = sorted(sorted(c) for c in _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}))
    assert circles == [["a", "b", "c"], ["d"]]


def test_the_keys_check_sees_a_name_taken_across_rooms(tmp_path):
    """Both ways of taking another room's string: by name, and through its module."""
    module = tmp_path / "compile.py"
    module.write_text("from tfxd.components.example_gen import span_decision\n"
                      "from tfxd.pipeline.assembly.dag import BEAM_STEP\n"
                      "from tfxd.trainer_module.planner import ONE_PROCESS\n"  # a set, not a string: not a key
                      "from tfxd.beam_engines import ENGINES\n"
                      "x = span_decision.FILES_KEY\n")
    constants = {"tfxd.components.example_gen.span_decision": {"FILES_KEY"},
                 "tfxd.pipeline.assembly.dag": {"BEAM_STEP"}, "tfxd.beam_engines": {"ENGINES"}}
    found = _crossing_names("tfxd.kubeflow.compile", module, constants)
    assert [line.split(" takes ")[1].split(":")[0] for line in found] == [
        "BEAM_STEP from tfxd.pipeline.assembly.dag", "FILES_KEY from tfxd.components.example_gen.span_decision"]
    assert not _crossing_names("tfxd.components.example_gen.executor", module,
                               {"tfxd.components.example_gen.span_decision": {"FILES_KEY"}})  # its own room
    assert "package-dir" not in FOLDERS and FOLDERS["cli"] == "tfxd.cli"  # pyproject's map, read
    pair = tmp_path / "pair.py"
    pair.write_text('GROUP, PORT = "kubeflow.org", 2222\nNAME = "x"\nnames = "y"\n')
    assert _string_constants(pair) == {"GROUP", "NAME"}


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the sets of nodes that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components
