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

What sparkbeam imports on a worker is the standard library and what PySpark
itself needs there: pyspark, pandas, pyarrow, numpy. One more package is
PySpark's own but undeclared: its `transformWithState` (the runner's streaming
`Sort`, `Session`, user `CombineFn`s and some late-row filters) talks to the
JVM through `protobuf`, which `pip install pyspark pandas pyarrow` does not
bring. So the zip also carries protobuf's pure-Python sources, as the driver
has them, and `use_shipped_protobuf` puts them at the END of a worker's
`sys.path` only when the worker has no protobuf: a copy of the user's, of any
version, is always found first and used.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import marshal
import os
import shutil
import sys
import tempfile
import weakref
import zipfile
import zipimport
from pathlib import Path
from typing import Any

import sparkbeam
from sparkbeam.errors import SHIPPED_PREFIX

_SHIPPED: weakref.WeakSet[Any] = weakref.WeakSet()
_ZIP: str | None = None

SHIPPED_PROTOBUF = "sparkbeam/runners/spark/shipped_protobuf"
"""Where the zip holds protobuf's pure-Python sources: a directory that is no package, so
nothing imports it by name; `use_shipped_protobuf` extracts it on a worker that needs it."""


def protobuf_sources() -> list[tuple[Path, str]]:
    """protobuf's pure-Python sources where the driver has them, each with its name in the
    zip (`SHIPPED_PROTOBUF/google/protobuf/...`); none where the driver has no protobuf."""
    try:
        spec = importlib.util.find_spec("google.protobuf")
    except ModuleNotFoundError:
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    return [
        (path, f"{SHIPPED_PROTOBUF}/google/protobuf/{path.relative_to(root).as_posix()}")
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def compiled(source: bytes, name: str) -> bytes:
    """`source` compiled by this Python, as the `.pyc` beside it in the zip: a checked-hash
    pyc (PEP 552), which a worker's Python of this version imports without compiling the
    module again (zipimport writes no cache: each worker process compiled every module it
    imported). Another Python version, or a source that does not match, falls back to the
    `.py` beside it. Its code names its file as the zip does (`sparkbeam/...py`):
    `errors.described` knows those frames for sparkbeam's own."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    checked_hash = (0b11).to_bytes(4, "little")  # hash-based, checked against the source
    return (
        importlib.util.MAGIC_NUMBER
        + checked_hash
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def package_zip() -> str:
    """A zip of the sparkbeam package this process runs, each module with its compiled code
    (`compiled`): hashed once per process, written once per machine and Python version
    (`tempfile.gettempdir()`), shared by the driver processes there.

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
    members = [(path, f"{SHIPPED_PREFIX}{path.relative_to(root).as_posix()}") for path in files]
    own = {name for _, name in members if name.endswith(".py")}
    members += protobuf_sources()
    contents = [(name, path.read_bytes()) for path, name in members]  # read once
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)  # the compiled code's Python
    for name, source in contents:
        digest.update(name.encode())
        digest.update(source)
    # One file per content and machine, shared by every driver process (written whole, then
    # renamed into place): before, each process left a zip of its own in a directory of its own.
    target = os.path.join(tempfile.gettempdir(), f"sparkbeam-{digest.hexdigest()[:12]}.zip")
    if not os.path.exists(target):
        handle, partial = tempfile.mkstemp(prefix="sparkbeam-", suffix=".zip.partial")
        with (
            os.fdopen(handle, "wb") as stream,
            zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as archive,
        ):
            for name, source in contents:
                archive.writestr(name, source)
                if name in own:
                    archive.writestr(f"{name}c", compiled(source, name))
        os.replace(partial, target)
    _ZIP = target
    return target


def has_protobuf() -> bool:
    """Whether this Python imports the protobuf package itself.

    A directory `google/protobuf` with no package in it does not count: Spark
    puts its `spark-core` jar on its workers' `PYTHONPATH`, and the jar's
    `.proto` files there make `google.protobuf` a namespace with no module.
    """
    try:
        spec = importlib.util.find_spec("google.protobuf")
    except ModuleNotFoundError:
        return False
    return spec is not None and spec.origin is not None


def use_shipped_protobuf() -> None:
    """On a worker with no protobuf, import protobuf from the copy shipped in the zip.

    Runs where a `transformWithState` processor's module is imported (on the
    driver too, where it does nothing). The copy is extracted once per zip
    and machine, appended to `sys.path` (never before a copy the worker has)
    and runs as protobuf's pure-Python implementation, which needs no
    compiled extension of the driver's platform.
    """
    if has_protobuf():
        return
    loader = globals().get("__loader__")
    if not isinstance(loader, zipimport.zipimporter):
        return  # sparkbeam installed, not shipped: protobuf came with its spark extra
    archive = loader.archive
    target = Path(tempfile.gettempdir()) / f"{Path(archive).stem}-protobuf"
    if not target.exists():
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{target.name}."))
        with zipfile.ZipFile(archive) as package:
            names = [name for name in package.namelist() if name.startswith(SHIPPED_PROTOBUF)]
            package.extractall(staging, names)
        with contextlib.suppress(OSError):  # another worker on this machine made it first
            os.rename(staging / SHIPPED_PROTOBUF, target)
        shutil.rmtree(staging, ignore_errors=True)
    os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
    if str(target) not in sys.path:
        sys.path.append(str(target))
        importlib.invalidate_caches()


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
        context = spark.sparkContext
        context.addPyFile(path)
        # The Python process that plans a `transformWithState` runs beside the driver and
        # reads no shipped file, only the workers' environment (`sc.environment`, merged into
        # its PYTHONPATH): the zip's path is on the driver's disk, where it runs.
        given = context.environment.get("PYTHONPATH")
        context.environment["PYTHONPATH"] = path if not given else f"{path}{os.pathsep}{given}"
    _SHIPPED.add(spark)
