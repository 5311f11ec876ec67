"""Making sparkbeam importable in Spark's Python workers, which may not have it installed.

Spark unpickles a pipeline's functions and `transformWithState` processors in
its Python workers, and they name sparkbeam's modules. A cluster whose Python
has pyspark, pandas and pyarrow but not sparkbeam (a plain standalone cluster,
EMR, Dataproc) cannot import them. So the runner adds a zip of the sparkbeam
package the driver runs to the session once, before it builds any DataFrame,
as `spark-submit --py-files` would (on Spark Connect, as a Python artifact).
The user's own functions travel by cloudpickle as before; a module of theirs
that the workers cannot import is named in the error
(`engine_errors`). `SparkRunner(ship_package=False)` leaves the workers' own
sparkbeam alone, where the cluster has it installed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import weakref
import zipfile
from pathlib import Path
from typing import Any

import sparkbeam

_SHIPPED: weakref.WeakSet[Any] = weakref.WeakSet()
_ZIP: str | None = None


def package_zip() -> str:
    """A zip of the sparkbeam package this process runs, built once per process.

    Its name carries a hash of its contents: Spark refuses a second file of
    the same name with other contents, and a changed package is a new file.
    """
    global _ZIP
    if _ZIP is not None and os.path.exists(_ZIP):
        return _ZIP
    root = Path(sparkbeam.__file__).parent
    files = sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed")
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    directory = tempfile.mkdtemp(prefix="sparkbeam-package-")
    target = os.path.join(directory, f"sparkbeam-{digest.hexdigest()[:12]}.zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, os.path.join("sparkbeam", str(path.relative_to(root))))
    _ZIP = target
    return target


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM, no `sparkContext`, in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def ship_package(spark: Any) -> None:
    """Add sparkbeam to `spark`'s Python workers, once per session."""
    if spark in _SHIPPED:
        return
    path = package_zip()
    if is_connect(spark):
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    _SHIPPED.add(spark)
