"""pyspark's Python code as Spark's Python processes import it, compiled once.

Spark puts the `pyspark.zip` (and py4j's zip) of its home first on the path of
every Python process it starts. pip's PySpark ships those zips without
compiled code, and zipimport writes no cache, so each process Spark starts
rather than forks compiles every pyspark module it imports: the planner of
each query's `transformWithState`, the readers and planners of Python data
sources, each worker daemon. That is about half a CPU-second a process
(0.68 against 0.19 CPU-s to import what a `transformWithState` planner
imports), hundreds of times over the suite. `make install`
(scripts/bootstrap.sh) adds each module's compiled code to the zips of the
virtual environment's pyspark (`shipping.compiled`: checked against the
source's hash, so a changed source, or another Python version, compiles the
source as before); what the zips run is unchanged. A pyspark installed anew
brings its plain zips back, and the next `make install` compiles them again.

    .venv/bin/python -m tests.compiled_pyspark    # compile them (again)
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import zipfile
from pathlib import Path

from sparkbeam.runners.spark.session.shipping import compiled


def spark_zips() -> list[Path]:
    """The zips Spark puts on its Python processes' path, from the pyspark this Python runs."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "no pyspark installed"
    return sorted((Path(spec.origin).parent / "python" / "lib").glob("*.zip"))


def is_compiled(path: Path) -> bool:
    """Whether the zip holds code compiled by this Python (its first `.pyc` of this Python's
    magic number)."""
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith(".pyc"):
                with archive.open(name) as pyc:
                    return pyc.read(4) == importlib.util.MAGIC_NUMBER
    return False


def compile_zip(path: Path) -> int:
    """Rewrite the zip at `path` with a `.pyc` beside each module (not its tests): a new zip,
    renamed into place. The number of modules compiled."""
    handle, partial = tempfile.mkstemp(dir=path.parent, suffix=".zip.partial")
    os.close(handle)
    count = 0
    try:
        with zipfile.ZipFile(path) as plain, zipfile.ZipFile(partial, "w") as rich:
            for info in plain.infolist():
                if info.filename.endswith(".pyc"):
                    continue  # compiled before by another Python: compiled again below
                source = plain.read(info)
                rich.writestr(info, source)
                if not info.filename.endswith(".py") or "/tests/" in info.filename:
                    continue
                # the file name zipimport gives the code it compiles from the zip itself
                code = compiled(source, f"{path}/{info.filename}")
                pyc = zipfile.ZipInfo(info.filename + "c", info.date_time)
                rich.writestr(pyc, code, zipfile.ZIP_DEFLATED)
                count += 1
        os.chmod(partial, path.stat().st_mode)  # mkstemp's file is its owner's only
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return count


def main() -> None:
    for path in spark_zips():
        if is_compiled(path):
            continue
        count = compile_zip(path)
        print(f"compiled pyspark: {path.name}, {count} modules compiled")


if __name__ == "__main__":
    main()
