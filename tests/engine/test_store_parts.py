"""MessageStore says what it is made of: every attribute its methods set is declared in
the class body (typed) or set in `__init__`, where a reader and a type checker find it."""

from __future__ import annotations

import ast
import inspect

from storeadapter.engine import store as store_module

#: Methods bound per instance in `_open` (to the native core's calls), not parts.
REBOUND_METHODS = {"get", "read", "append"}


def assigned_attributes(function: ast.FunctionDef) -> set[str]:
    found = set()
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                found.add(target.attr)
    return found


def test_every_part_the_store_sets_is_declared_or_made_in_init():
    tree = ast.parse(inspect.getsource(store_module))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MessageStore"]
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef)]
    declared = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    made_in_init = next(assigned_attributes(m) for m in methods if m.name == "__init__")
    set_elsewhere = set().union(*(assigned_attributes(m) for m in methods if m.name != "__init__"))

    assert set_elsewhere - declared - made_in_init - REBOUND_METHODS == set()
