"""tfxd.patches: every mend of a library is in its table, names the version it was written against and
fails here when another is installed; its targets are still in the installed libraries; nothing in the
package replaces a library's attribute outside the table; a patch is put back as it was, however its
block ends."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tfxd import patches
from tfxd.patches import PATCHES, Patch, owner_of
from tools.typing_tree import package_dirs

ANSWER = 1


class Base:
    @classmethod
    def made(cls) -> str:
        return f"made by {cls.__name__}"

    def inherited(self) -> str:
        return "base"


class Child(Base):
    pass


def _patch(*targets: str) -> Patch:
    """A patch of this module's own attributes, to show how any patch is made and undone."""
    return Patch("test.own", "pytest", pytest.__version__, tuple(f"{__name__}:{t}" for t in targets), "a test")


def test_a_module_attribute_is_replaced_in_the_block_and_back_after_an_error():
    with pytest.raises(RuntimeError), _patch("ANSWER").applied(2) as before:
        assert sys.modules[__name__].ANSWER == 2 and before == 1
        raise RuntimeError("the block failed")
    assert ANSWER == 1


def test_a_classmethod_is_put_back_a_classmethod():
    with _patch("Base.made").applied(classmethod(lambda cls: "replaced")):
        assert Child.made() == "replaced"
    assert isinstance(vars(Base)["made"], classmethod)
    assert Child.made() == "made by Child"  # bound to the class asked, as before


def test_an_inherited_attribute_is_removed_from_the_subclass_again():
    with _patch("Child.inherited").applied(lambda self: "child") as before:
        assert Child().inherited() == "child"
        assert before(Child()) == "base"
    assert "inherited" not in vars(Child)
    assert Child().inherited() == "base"


def test_a_patch_of_several_targets_is_applied_by_name():
    several = _patch("ANSWER", "Base.made")
    with several.applied(3, "ANSWER"):
        assert sys.modules[__name__].ANSWER == 3 and Base.made() == "made by Base"
    with pytest.raises(LookupError, match="patch test.own has no single target named None"):
        several.applied(3).__enter__()
    assert ANSWER == 1


# ------------------------------------------------------------------ the version fence


def stale() -> list[str]:
    """Every patch written against another version of its library than the one installed."""
    found = []
    for patch in PATCHES:
        installed = importlib.metadata.version(patch.library)
        if installed != patch.version:
            found.append(f"patch {patch.id} was written against {patch.library} {patch.version}, and {installed} "
                         f"is installed: check that {', '.join(patch.targets)} is still there and still needed "
                         f"({patch.without}), then name {installed} in tfxd/patches.py")
    return found


def test_every_patch_names_the_installed_version_of_its_library():
    assert not stale(), "\n".join(stale())


def test_the_fence_fails_on_another_version(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.75.0" if name == "apache-beam" else real(name))
    found = stale()
    assert [line.split()[1] for line in found] == ["beam.cloud_io_deferred", "beam.gcs_filesystem_deferred",
                                                   "beam.direct_workers_forked",
                                                   "beam.worker_loss_fails_bundles", "beam.signatures_remembered",
                                                   "beam.dofn_specs_remembered", "beam.compressions_remembered",
                                                   "beam.option_views_remembered",
                                                   "beam.state_cache_off",
                                                   "beam.sampler_wakes_often"]
    assert found[8].startswith("patch beam.state_cache_off was written against apache-beam 2.74.0, and 2.75.0 is "
                               "installed: check that apache_beam.runners.portability.fn_api_runner.worker_handlers:"
                               "STATE_CACHE_SIZE_MB is still there")


def test_patch_ids_are_unique_and_each_names_an_installed_library():
    assert len({patch.id for patch in PATCHES}) == len(PATCHES)
    providers = importlib.metadata.packages_distributions()
    for patch in PATCHES:
        for target in patch.targets:  # the library holds the target, but for the process's own (sys.argv)
            top = target.split(".")[0].split(":")[0]
            assert (top in sys.stdlib_module_names or patch.library in providers.get(top, [])
                    or _holds(patch.library, top)), (patch.id, target)


def _holds(library: str, package: str) -> bool:
    """Whether ``library``'s installed files hold ``package`` (Python 3.10's packages_distributions reads only
    top_level.txt, which a wheel built with meson, SciPy's, does not have)."""
    return any(str(path) == f"{package}/__init__.py" for path in importlib.metadata.files(library) or [])


# ------------------------------------------------------------------ the targets are still there


@pytest.mark.parametrize("target", [target for patch in PATCHES for target in patch.targets])
def test_every_target_is_in_the_installed_library(target):
    module, _, attribute = target.partition(":")
    if attribute in MODULE_HOOKS:  # a hook the patch adds: hasattr would depend on who imported it first
        assert _own_hook(module, attribute) is False, f"{target}: the module is gone, or has a hook of its own"
        return
    owner, attribute = owner_of(target)
    assert hasattr(owner, attribute), f"{target} is gone from the installed library"


MODULE_HOOKS = ("__getattr__", "__dir__")  # PEP 562: a module's own name lookup and listing


def _own_hook(module: str, hook: str) -> bool | None:
    """Whether ``module``'s source defines ``hook`` at its top level (in an if or try block too), which a
    patch assigning one would hide; None when the module is not installed. Read from the file, since a
    deferred import assigns the hook when it makes the module (tfxd/deferred_imports.py)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return None
    statements, names = list(ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body), set()
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            statements.extend([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                               *(line for handler in getattr(node, "handlers", []) for line in handler.body)])
    return hook in names


def test_a_module_with_a_hook_of_its_own_is_seen():
    assert _own_hook("numpy", "__getattr__") is True  # numpy/__init__.py defines one in its else: block
    assert _own_hook("IPython", "__getattr__") is False
    assert _own_hook("no_such_module_here", "__getattr__") is None


def test_a_target_that_is_gone_is_seen():
    owner, attribute = owner_of("apache_beam.transforms.core:get_function_args_default")  # one letter short
    assert not hasattr(owner, attribute)
    with pytest.raises(AttributeError):
        owner_of("apache_beam.transforms.core:NoSuchClass.attribute")


# ------------------------------------------------------------------ no patch outside the table

OWN_OBJECTS = ("self", "cls")


def _imported_libraries(tree: ast.Module) -> set[str]:
    """The names a module binds to another library's modules or objects (neither tfxd's nor Python's own)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [(alias.name, alias.asname or alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [(node.module, alias.asname or alias.name) for alias in node.names]
        else:
            continue
        names.update(bound for module, bound in modules
                     if module.split(".")[0] not in ("tfxd", *sys.stdlib_module_names))
    return names


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (None from a call's result: an object of its own)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def library_changes(source: str) -> list[str]:
    """Where a module changes another library's attribute itself: a setattr or delattr on an object not its
    own, an assignment to (or del of) an attribute reached from another library's import, or to a private
    attribute of an object not its own."""
    tree = ast.parse(source)
    libraries = _imported_libraries(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("setattr", "delattr", "object.__setattr__") \
                and node.args and _root(node.args[0]) not in OWN_OBJECTS:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            if isinstance(target, ast.Attribute) and _root(target) not in OWN_OBJECTS and \
                    (_root(target) in libraries or target.attr.startswith("_")):
                found.append(f"line {node.lineno}: {ast.unparse(target)}")
    return sorted(found, key=lambda line: int(line.split()[1].rstrip(":")))


PACKAGE_FILES = sorted({path for folder in package_dirs().values() for path in (REPO / folder).rglob("*.py")
                        if path != REPO / "tfxd" / "patches.py"})


def test_no_module_changes_a_library_outside_the_table():
    found = [f"{path.relative_to(REPO)} {change}" for path in PACKAGE_FILES
             for change in library_changes(path.read_text(encoding="utf-8"))]
    assert not found, "a library's attribute is changed outside tfxd/patches.py:\n" + "\n".join(found)


def test_a_change_outside_the_table_is_seen():
    source = ("from apache_beam.runners.portability.fn_api_runner import worker_handlers\n"
              "import apache_beam.transforms.core\n"
              "worker_handlers.STATE_CACHE_SIZE_MB = 0\n"
              "setattr(apache_beam.transforms.core, 'get_function_args_defaults', len)\n"
              "config = object()\n"
              "config._api_endpoint = None\n"
              "self.fine = setattr(self, 'also_fine', 1)\n")
    assert library_changes(source) == [
        "line 3: worker_handlers.STATE_CACHE_SIZE_MB",
        "line 4: setattr(apache_beam.transforms.core, 'get_function_args_defaults', len)",
        "line 6: config._api_endpoint"]


def _applied_ids(path: Path) -> list[str]:
    """The patch ids a module applies or assigns (patches.applied("id", ...), applied_to_each, assigned,
    assigned_each)."""
    return [node.args[0].value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("patches.applied", "patches.applied_to_each", "patches.assigned",
                                                 "patches.assigned_each")
            and node.args and isinstance(node.args[0], ast.Constant)]


def test_every_patch_is_applied_somewhere_and_every_one_applied_is_in_the_table():
    applied = {patch_id for path in PACKAGE_FILES for patch_id in _applied_ids(path)}
    assert applied == {patch.id for patch in PATCHES}
    with pytest.raises(KeyError, match="transform.deep_copy"):
        patches.applied("transform.deep_copy", None)
