"""The crate's one door (issue 35 item 3): dataplane.py checks the module it loads, and
``_native.pyi`` says everything the module offers."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from storeadapter.engine import _native, dataplane

# Not run again in the shared-layout pass: the native interface's surface, no topic.
pytestmark = pytest.mark.one_layout

STUB = Path(dataplane.__file__).with_name("_native.pyi")
ROOT = Path(__file__).resolve().parents[2]


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(), str(STUB))


def _stub_names() -> set[str]:
    names = set()
    for node in _stub_tree().body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _stub_methods(name: str) -> set[str]:
    for node in _stub_tree().body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name != "__new__"
            }
    raise AssertionError(f"{name} is not in the stub")


def test_the_stub_names_everything_the_module_offers_and_nothing_else():
    offered = {name for name in dir(_native) if not name.startswith("__")}

    assert _stub_names() == offered


def test_the_stub_names_every_method_of_each_class():
    for name in ("AppendCore", "Filter", "Pen", "Run", "StoreCore"):
        cls = getattr(_native, name)
        offered = {a for a in vars(cls) if not a.startswith("__")}

        assert _stub_methods(name) == offered, name


def test_a_module_built_from_another_native_is_refused_at_import_saying_what_to_do():
    stale = types.ModuleType("_native")
    stale.__file__ = "/somewhere/_native.cpython-311-x86_64-linux-gnu.so"
    stale.INTERFACE = dataplane.NATIVE_INTERFACE - 1

    with pytest.raises(ImportError, match="make install"):
        dataplane._check_native(stale)


def test_the_module_loaded_is_the_interface_this_engine_needs():
    assert _native.INTERFACE == dataplane.NATIVE_INTERFACE


def test_only_the_door_imports_the_module():
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "storeadapter").rglob("*.py")
        if path.name != "dataplane.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ImportFrom)
        and (
            (node.module or "").endswith("_native")
            or any(alias.name == "_native" for alias in node.names)
        )
    )

    assert importers == []
