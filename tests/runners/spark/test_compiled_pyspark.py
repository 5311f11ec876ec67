"""The Python processes Spark starts import pyspark's code compiled, from the zips `make install`
compiled (`tests/compiled_pyspark.py`), and run what the plain zips ran."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.compiled_pyspark import compile_zip, is_compiled, spark_zips

STARTED = """
import pyspark.sql.streaming.transform_with_state_driver_worker
import pyspark.worker, py4j
print(pyspark.worker.__file__)
print(py4j.__file__)
try:
    pyspark.worker.report_times(None, 0, 0, 0, 0)
except Exception as exc:
    print(exc.__traceback__.tb_next.tb_frame.f_code.co_filename)
"""


def test_a_process_spark_starts_imports_pyspark_compiled() -> None:
    zips = spark_zips()
    assert {path.name.split("-")[0] for path in zips} == {"pyspark.zip", "py4j"}, zips
    assert all(is_compiled(path) for path in zips), "make install compiles them"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(path) for path in zips)}
    worker, py4j, failed_in = subprocess.run(
        [sys.executable, "-c", STARTED], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    pyspark_zip = next(str(path) for path in zips if path.name == "pyspark.zip")
    assert worker == f"{pyspark_zip}/pyspark/worker.pyc"
    assert py4j.endswith(".zip/py4j/__init__.pyc")
    assert failed_in == f"{pyspark_zip}/pyspark/worker.py"  # tracebacks name the source


def test_compiling_adds_code_beside_each_module_and_changes_nothing_else(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lib.zip"
    with zipfile.ZipFile(path, "w") as plain:
        plain.writestr("lib/__init__.py", "")
        plain.writestr("lib/twice.py", "def twice(x):\n    return 2 * x\n")
        plain.writestr("lib/tests/test_twice.py", "assert True\n")
        plain.writestr("lib/data.json", "{}")
    path.chmod(0o644)
    with zipfile.ZipFile(path) as plain:
        before = {name: plain.read(name) for name in plain.namelist()}

    assert not is_compiled(path)
    assert compile_zip(path) == 2
    assert is_compiled(path)
    assert path.stat().st_mode & 0o777 == 0o644
    with zipfile.ZipFile(path) as rich:
        names = set(rich.namelist())
        assert names == {*before, "lib/__init__.pyc", "lib/twice.pyc"}
        assert all(rich.read(name) == data for name, data in before.items())

    script = "import lib.twice as t; print(t.__file__, t.twice(21))"
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [f"{path}/lib/twice.pyc", "42"]
