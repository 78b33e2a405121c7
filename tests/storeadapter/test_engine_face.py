"""The engine's face: the console and the adapters outside the engine import it only as
``storeadapter.engine``, and only names its ``__all__`` lists (the README's boundary).
The Spark reader is the exception the design names: it reads the store's files itself,
through the modules that define their bytes."""

from __future__ import annotations

import ast
from pathlib import Path

import storeadapter.engine as engine

ROOT = Path(__file__).resolve().parents[2]
FILE_READERS = (ROOT / "storeadapter" / "engine", ROOT / "storeadapter" / "spark")


def modules_outside_the_engine() -> list[Path]:
    found = [*(ROOT / "console").rglob("*.py"), *(ROOT / "storeadapter").rglob("*.py")]
    return [p for p in found if not any(p.is_relative_to(r) for r in FILE_READERS)]


def engine_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each engine import in ``path``; name None for `import x`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "storeadapter.engine"
        ):
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(
                (alias.name, None)
                for alias in node.names
                if alias.name.startswith("storeadapter.engine")
            )
    return found


def test_the_console_and_the_adapters_import_only_the_engines_face():
    inside = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in modules_outside_the_engine()
        for module, _ in engine_imports(path)
        if module != "storeadapter.engine"
    }

    assert inside == set()


def test_every_name_taken_from_the_face_is_one_it_lists():
    public = set(engine.__all__)
    unlisted = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules_outside_the_engine()
        for module, name in engine_imports(path)
        if module == "storeadapter.engine" and name not in public
    }

    assert unlisted == set()


def test_the_face_lists_only_names_it_has():
    assert [name for name in engine.__all__ if not hasattr(engine, name)] == []
