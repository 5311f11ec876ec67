"""The zip of sparkbeam the Spark runner ships to its Python workers: each module with its
compiled code, which a worker of the driver's Python imports without compiling it again,
and which any other Python, or a source that changed, passes over for the source.

No SparkSession: each test imports from the zip in a fresh process of the workers' Python
(`.venv-workers`: pyspark, pandas and pyarrow, no sparkbeam).
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sparkbeam.errors import described
from sparkbeam.runners.spark.session import shipping
from tests.runners.spark.background_cluster import on_workers_python

HELD_ROWS = "sparkbeam.runners.spark.parts.keyed_state"
"""The module of the runner's `transformWithState` processors' base class."""


def imported_from(archive: str, module: str, cwd: Path) -> dict[str, Any]:
    """What a fresh worker Python imported for `module` from the zip `archive`: the module's
    `__file__` and every sparkbeam module it brought."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {archive!r})\n"
        f"import {module} as module\n"
        "names = sorted(m for m in sys.modules if m.startswith('sparkbeam'))\n"
        "print(json.dumps({'file': module.__file__, 'modules': names}))\n"
    )
    done = on_workers_python(code, cwd)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def rewritten(archive: str, target: Path, change: dict[str, Any]) -> str:
    """A copy of `archive` at `target` with each member `change` names given new contents by
    its function (of the old contents)."""
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(target, "w") as copy:
        for name in source.namelist():
            data = source.read(name)
            copy.writestr(name, change[name](data) if name in change else data)
    return str(target)


def test_the_workers_python_is_the_drivers_version(tmp_path: Path) -> None:
    """What the next tests take for granted: the suite's workers run the driver's Python."""
    done = on_workers_python("import sys; print(sys.version_info[:2])", tmp_path)
    assert done.stdout.strip() == str(sys.version_info[:2])


def test_a_worker_imports_the_compiled_code_and_only_the_modules_it_needs(
    tmp_path: Path,
) -> None:
    archive = shipping.package_zip()
    found = imported_from(archive, HELD_ROWS, tmp_path)
    assert found["file"] == f"{archive}/{HELD_ROWS.replace('.', '/')}.pyc"
    # neither the pipeline API nor the direct runner: what `import sparkbeam` took before
    assert "sparkbeam.pipeline" not in found["modules"]
    assert "sparkbeam.runners.direct" not in found["modules"]
    assert len(found["modules"]) < 15, found["modules"]


def test_compiled_code_of_another_python_is_passed_over_for_the_source(tmp_path: Path) -> None:
    """Every `.pyc` made by a Python of another version (another magic number): the worker
    compiles the `.py` beside it, as it did before the zip held compiled code."""
    archive = shipping.package_zip()
    with zipfile.ZipFile(archive) as package:
        compiled = [name for name in package.namelist() if name.endswith(".pyc")]
    assert f"{HELD_ROWS.replace('.', '/')}.pyc" in compiled

    def other_python(data: bytes) -> bytes:
        return bytes([data[0] ^ 0xFF]) + data[1:]

    copy = rewritten(archive, tmp_path / "other.zip", dict.fromkeys(compiled, other_python))
    found = imported_from(copy, HELD_ROWS, tmp_path)
    assert found["file"] == f"{copy}/{HELD_ROWS.replace('.', '/')}.py"


def test_a_source_that_no_longer_matches_its_compiled_code_is_imported_as_it_is(
    tmp_path: Path,
) -> None:
    """The compiled code is checked against the hash of the source beside it."""
    archive = shipping.package_zip()
    name = f"{HELD_ROWS.replace('.', '/')}.py"

    def changed(data: bytes) -> bytes:
        return data + b"\nCHANGED = True\n"

    copy = rewritten(archive, tmp_path / "changed.zip", {name: changed})
    code = f"import sys; sys.path.insert(0, {copy!r}); import {HELD_ROWS} as m; print(m.CHANGED)"
    done = on_workers_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_a_functions_error_names_its_own_line_past_frames_of_the_shipped_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped code names its files as the zip does (`sparkbeam/...`), wherever a worker
    keeps the zip and whatever its working directory: those frames are sparkbeam's, not the
    user's."""
    monkeypatch.chdir(tmp_path)  # a worker's: no sparkbeam below it
    shipped: dict[str, Any] = {}
    source = "def apply(fn, row):\n    return fn(row)\n\ndef check(value):\n    1 / value\n"
    exec(compile(source, "sparkbeam/runners/example.py", "exec"), shipped)

    def users(row: int) -> None:
        shipped["check"](row)  # the user's innermost line

    with pytest.raises(ZeroDivisionError) as caught:
        shipped["apply"](users, 0)
    line = users.__code__.co_firstlineno + 1
    assert described(caught.value) == f"{caught.value!r} at {__file__}:{line}"
