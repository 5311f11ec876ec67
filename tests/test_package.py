"""`import sparkbeam` imports each public name's module on first use: a Spark worker that
unpickles one of the runner's functions imports that function's modules, not the package."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import sparkbeam as sb

INIT = Path(sb.__file__)


def test_importing_the_package_imports_none_of_its_modules() -> None:
    code = "import sys, sparkbeam; print([m for m in sys.modules if m.startswith('sparkbeam')])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['sparkbeam']"]


def test_each_public_name_is_the_object_of_the_module_the_type_checkers_read() -> None:
    """The lazy names, the imports type checkers and editors read, and `__all__` agree."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    [checking] = [node for node in tree.body if isinstance(node, ast.If)]
    imported = {
        alias.name: node.module
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    lazy = {name: module for module, names in sb._HOMES.items() for name in names}
    assert imported == lazy
    assert sorted(sb.__all__) == sorted(lazy)
    for name, module in lazy.items():
        assert getattr(sb, name) is getattr(importlib.import_module(module), name), name
    assert set(sb.__all__) <= set(dir(sb))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Tumbel'"):
        sb.Tumbel  # type: ignore[attr-defined]  # noqa: B018
