"""Spark's errors as sparkbeam's, naming the transforms they concern.

A `DataError` raised in a Python worker comes back as itself; the engine's
errors about files and functions become `DataError`/`PipelineError` with
Spark's own line, not its stack. Spark's exception goes along as the error's
`spark_error`, never chained: an uncaught error prints sparkbeam's message and
the user's frames, as on the direct runner.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import inspect
import os
import re
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from sparkbeam.errors import (
    SPARKBEAM_ERRORS,
    DataError,
    PipelineError,
    clean_line,
    first_line,
    unexpected,
)
from sparkbeam.graph import Node
from sparkbeam.paths import DRIVER, base_name, contains, is_local, join, local_path, normalised
from sparkbeam.runners.shared.files import read_file
from sparkbeam.schema import INT64_MAX, INT64_MIN
from sparkbeam.transforms.combine import CombineFn, CombinePerKey, Sum
from sparkbeam.transforms.files import ReadFiles, data_files, parquet_footer, parquet_mismatch

DATA_ERROR_MARK = "sparkbeam.DataError: "
"""What a `DataError` raised in a Spark job starts with (`parts.python_functions.fail_when`)."""

PIPELINE_ERROR_MARK = "sparkbeam.PipelineError: "
"""What a `PipelineError` raised in a Python worker starts with
(`parts.python_functions.guarded`)."""

_PIPELINE_ERROR = re.compile(
    re.escape(PIPELINE_ERROR_MARK) + r"(.*?)(?:\s*SQLSTATE: \w+)*\s*$", re.M
)
_DATA_ERROR = re.compile(re.escape(DATA_ERROR_MARK) + r"(.*?)(?:\s*SQLSTATE: \w+)*\s*$", re.M)


_ENGINE_LINE = re.compile(r"\[[\w.]+\]\s*(.*?)\s*(?:SQLSTATE: \w+)?\s*$")


_PARQUET_TYPE_MARKS = ("PARQUET_COLUMN_DATA_TYPE_MISMATCH", "SCHEMA_COLUMN_CONVERT")
"""Spark's words for a parquet column whose type differs from the schema it reads with."""

_ENGINE_ERRORS: list[tuple[tuple[str, ...], type[DataError | PipelineError], str]] = [
    (
        _PARQUET_TYPE_MARKS,
        DataError,
        "ReadFiles: a parquet file's column type differs from the schema (Spark's words "
        "after this name the file and the column); make them agree: rewrite the file with "
        "the schema's type, or read the column as the file's type (schema=) and convert it "
        "(cast, Map)",
    ),
    (
        (
            "MALFORMED_RECORD",
            "FAILFAST",
            "MALFORMED_CSV_RECORD",
            "CANNOT_PARSE",
        ),
        DataError,
        "ReadFiles: a file holds a value that does not match schema= (fix the file or the schema)",
    ),
    (
        ("FAILED_READ_FILE",),
        DataError,
        "ReadFiles: a file cannot be read: corrupt or truncated (a parquet file still being "
        "written?), or holding a value that does not match schema=; replace the file or fix "
        "the schema",
    ),
    (
        ("PATH_NOT_FOUND",),
        PipelineError,
        "ReadFiles: the path no longer exists; check it",
    ),
]


_READ_FILE = re.compile(r"(?:reading|read) file (\S+?)\.?(?:\s|$)")

EXACT_READ_LIMIT = 256 * 1024 * 1024
"""Bytes of JSON/CSV input the driver reads again, at most, to name the line, column and
value of a file Spark failed to parse (Spark's own message names at most the file)."""


def _exact_read_error(text: str, nodes: Sequence[Node]) -> DataError | None:
    """The direct runner's `DataError` (file, line, column, value) for the JSON or CSV input
    Spark failed to parse: its local files read again on the driver, only the one Spark names
    where it names one (None when that finds nothing, or the files are not local or larger
    than `EXACT_READ_LIMIT`: Spark's own line stays)."""
    named = {local_path(found) for found in _READ_FILE.findall(text)}
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, ReadFiles) or transform.format == "parquet":
            continue
        if not is_local(transform.path):
            continue  # only files on the driver's disk are read again
        try:
            files = data_files(transform.path, node.label, DRIVER)
            chosen = [f for f in files if local_path(f) in named] or files
            if sum(os.path.getsize(local_path(f)) for f in chosen) > EXACT_READ_LIMIT:
                return None
            for file in chosen:
                for _ in read_file(file, transform.format, node.info.schema, node.label):
                    pass
        except DataError as exc:
            return exc
        except Exception:
            return None
    return None


def _parquet_type_error(text: str, nodes: Sequence[Node]) -> DataError | None:
    """The direct runner's `DataError` (file, column, both types, what to do) for the parquet
    file Spark failed to read with the schema: the footer of the file Spark names, read on
    the driver and compared with the schema of the `ReadFiles` reading it (None when no
    footer there can be read or none differs: Spark's own line stays)."""
    named = [normalised(found) for found in _READ_FILE.findall(text)]
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, ReadFiles) or transform.format != "parquet":
            continue
        root = normalised(transform.path)
        for file in named:
            if not contains(root, file):
                continue
            shown = transform.path if file == root else join(transform.path, base_name(file))
            try:
                footer = parquet_footer(file, node.label, DRIVER)
            except Exception:
                continue
            schema, origin = node.info.schema, transform.schema_origin
            mismatch = parquet_mismatch(node.label, shown, footer, schema, origin)
            if mismatch is not None:
                return DataError(mismatch)
    return None


_PARSE_MARKS = ("MALFORMED_RECORD", "FAILFAST", "MALFORMED_CSV_RECORD", "CANNOT_PARSE")
"""Spark's words for a JSON/CSV value that does not match the schema."""


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _user_objects(node: Node) -> list[Any]:
    """The user's functions and `CombineFn`s a node runs in Spark's Python workers."""
    transform = node.transform
    found = [getattr(transform, "fn", None)]
    if isinstance(transform, CombinePerKey):
        found += [agg for _, agg in transform.aggregates if isinstance(agg, CombineFn)]
    return [obj for obj in found if obj is not None]


def _refers_to(obj: Any, module: str) -> bool:
    """Whether `obj` (a function, a `CombineFn`) lives in `module` (or a module inside it), or
    a function of it names a global that is that module: what a worker imports to unpickle it."""
    kind = obj if isinstance(obj, type) else type(obj)
    homes = [getattr(obj, "__module__", None), kind.__module__]
    if any(home and (home == module or home.startswith(module + ".")) for home in homes):
        return True
    functions = [obj] if inspect.isfunction(obj) else []
    functions += [f for f in vars(kind).values() if inspect.isfunction(f)]
    for function in functions:
        names = set(function.__code__.co_names)
        for name in names & set(function.__globals__):
            value = function.__globals__[name]
            if inspect.ismodule(value) and (
                value.__name__ == module or value.__name__.startswith(module + ".")
            ):
                return True
    return False


def _missing_module_labels(module: str, nodes: Sequence[Node]) -> list[str]:
    """The transforms whose functions need `module` on the workers (if none is found: every
    transform with a function that runs there, since one of them does)."""
    users = [(node.label, _user_objects(node)) for node in nodes]
    users = [(label, objects) for label, objects in users if objects]
    named = [label for label, objects in users if any(_refers_to(o, module) for o in objects)]
    return named or [label for label, _ in users]


def sparkbeam_version() -> str:
    """The version of sparkbeam the driver runs."""
    try:
        return importlib.metadata.version("sparkbeam")
    except importlib.metadata.PackageNotFoundError:
        return "<the driver's version>"


def _missing_module_advice(module: str, labels: Sequence[str]) -> str:
    where = f"{' or '.join(labels)}: " if labels else ""
    if module.split(".")[0] == "sparkbeam":
        return (
            f"{where}Spark's Python workers cannot import {module!r}. The runner ships "
            "sparkbeam to the executors unless SparkRunner(ship_package=False): with it off, "
            "install the driver's version in the cluster's Python (pip install "
            f"'sparkbeam=={sparkbeam_version()}' protobuf; protobuf for Sort, Session and "
            "the other streaming operators that keep state), or leave ship_package on. On "
            "Spark Connect the server's process that plans such an operator reads no shipped "
            "file: install the same in the Python the server's PYSPARK_PYTHON names"
        )
    return (
        f"{where}Spark's Python workers cannot import the module {module!r}, where a function "
        "of the pipeline (Map, Filter, CombineFn, ...) lives: install it on the cluster's "
        "Python, ship it (spark-submit --py-files, SparkContext.addPyFile; on Spark Connect "
        "spark.addArtifacts(path, pyfile=True)), or define the "
        "function in the script or register its module with "
        "cloudpickle.register_pickle_by_value"
    )


def _integer_sums(nodes: Sequence[Node]) -> list[str]:
    """`label name` of every `Sum` over an integer column: where Spark's ANSI sum overflows."""
    out = []
    for node in nodes:
        transform = node.transform
        if isinstance(transform, CombinePerKey) and node.inputs:
            schema = nodes[node.inputs[0]].info.schema
            out += [
                f"{node.label} {name}"
                for name, aggregate in transform.aggregates
                if isinstance(aggregate, Sum) and schema.type_of(aggregate.column) is int
            ]
    return out


def _overflow(nodes: Sequence[Node]) -> DataError:
    """Spark's own advice (turn ANSI off) would make sums wrap silently: not repeated."""
    sums = _integer_sums(nodes)
    if not sums:
        return DataError(
            f"an integer computation left the 64-bit integers ({INT64_MIN} to {INT64_MAX}) "
            "both runners hold; compute with floats (convert the values in a Map) for numbers "
            "that large (Spark: ARITHMETIC_OVERFLOW)"
        )
    return DataError(
        f"{' or '.join(sums)}: a sum left the 64-bit integers ({INT64_MIN} to {INT64_MAX}) "
        "both runners hold; sum a float column (convert the values in a Map) for totals that "
        "large (Spark: ARITHMETIC_OVERFLOW)"
    )


_JVM_THROWN = re.compile(r"^: [\w.$]+(?:Exception|Error)\b")
_PYTHON_ERROR = re.compile(r"^(\w[\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$", re.M)


def spark_line(exc: BaseException) -> str:
    """The first useful line of a Spark failure: a Python worker's own exception (the last
    line of its traceback), else the JVM exception a Py4J error carries, else the first line;
    with Spark's error class, never a JVM stack or package names."""
    text = str(exc)
    line = None
    traceback_at = text.find("Traceback (most recent call last)")
    if traceback_at >= 0:
        found = _PYTHON_ERROR.search(text, traceback_at)
        if found:
            line = f"{found.group(1)}: {found.group(2)}"
    if line is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        # Py4J's line with the JVM exception (a plan's lines start with ": " too)
        thrown = [ln[1:].strip() for ln in lines if _JVM_THROWN.match(ln)]
        line = thrown[0] if thrown else (lines[0] if lines else type(exc).__name__)
        failure = re.search(r"most recent failure: .*?\): (.*)", line)
        if failure:
            line = failure.group(1)
        line = re.sub(r"Query \[id = [^\]]*\] terminated with exception: ", "", line)
        line = re.sub(r"\s*SQLSTATE: \w+", "", line)
    error_class = None
    for method in ("getCondition", "getErrorClass"):  # Spark 4, Spark 3
        if error_class is None and hasattr(exc, method):
            with contextlib.suppress(Exception):
                error_class = getattr(exc, method)()
    if error_class and error_class not in line:
        line = f"[{error_class}] {line}"
    return clean_line(line)


def converted(
    exc: BaseException, nodes: Sequence[Node] = (), target: Node | None = None
) -> DataError | PipelineError:
    """Spark's failure `exc` as sparkbeam's error (`spark_errors`)."""
    labels = [node.label for node in nodes if isinstance(node.transform, ReadFiles)]
    text = str(exc)
    for match in _DATA_ERROR.finditer(text):
        # A streaming query's error also prints its plan, where the check's message
        # appears unevaluated: only a message with its row in it was raised.
        if "to_json(struct(" not in match.group(1):
            return DataError(match.group(1).strip())
    if "ARITHMETIC_OVERFLOW" in text:
        return _overflow(nodes)
    for match in _PIPELINE_ERROR.finditer(text):
        return PipelineError(match.group(1).strip())
    missing = _MISSING_MODULE.search(text)
    if missing:
        module = missing.group(1)
        return PipelineError(_missing_module_advice(module, _missing_module_labels(module, nodes)))
    if any(mark in text for mark in _PARQUET_TYPE_MARKS):
        mismatch = _parquet_type_error(text, nodes)
        if mismatch is not None:
            return mismatch
    if any(mark in text for mark in _PARSE_MARKS):
        exact = _exact_read_error(text, nodes)
        if exact is not None:
            return DataError(str(exact), exact.row)
    for marks, kind, advice in _ENGINE_ERRORS:
        lines = [line.strip() for line in text.splitlines() if any(m in line for m in marks)]
        if lines:
            where = f"{', '.join(labels)}: " if labels else ""
            said = _ENGINE_LINE.search(lines[0])
            detail = said.group(1) if said else lines[0]
            return kind(f"{where}{advice}. Spark: {clean_line(detail, 600)}")
    label = target.label if target is not None else (nodes[-1].label if nodes else "Spark")
    if "PicklingError" in type(exc).__name__ or "Could not serialize object" in text:
        return PipelineError(
            f"{label}: Spark sends the transform's function to its Python workers "
            f"pickled (cloudpickle), and it cannot be: {clean_line(first_line(exc))}. "
            "Keep what the function captures picklable: create locks, connections, "
            "clients and open files inside it (or once per worker), not around it"
        )
    of_spark = type(exc).__module__.split(".")[0] in _SPARK_PACKAGES
    return unexpected(label, exc, spark_line(exc) if of_spark else None)


@contextlib.contextmanager
def spark_errors(nodes: Sequence[Node] = (), target: Node | None = None) -> Iterator[None]:
    """Errors of a Spark job as sparkbeam's: a `DataError` raised in a Python worker, and
    the engine's errors about files, functions and integer overflow, named by the
    transforms of `nodes` they concern (the `ReadFiles`, the integer `Sum`s); any other
    a `PipelineError` naming `target` (the transform whose rows the job computes; else the
    pipeline's last), with Spark's error class and its first useful line (`spark_line`).

    Spark's exception is the error's `spark_error`, not its cause: it is raised `from None`,
    so a traceback prints sparkbeam's error alone, never Spark's `StreamingQueryException`,
    a worker's traceback or JVM frames (another exception, sparkbeam's own bug, stays the
    cause, as on the direct runner). A `DataError` or `PipelineError` goes on from here as a
    copy (its message, row, `spark_error` and cause) without the frames of the runner's
    machinery below (the threads feeding epochs, the queries' steps): its message says
    everything, and printed it is as short as the direct runner's."""
    try:
        yield
    except (DataError, PipelineError) as own:
        raise copy.copy(own).with_traceback(None) from own.__cause__
    except SPARKBEAM_ERRORS:
        raise
    except Exception as exc:
        error = converted(exc, nodes, target)
        if not from_spark(exc):
            raise error from exc
        error.spark_error = exc
        raise error from None


def from_spark(exc: BaseException) -> bool:
    """Whether `exc` is Spark's: of pyspark or Py4J, or raised in their code (a pickling error
    of pyspark's serializer)."""
    if type(exc).__module__.split(".")[0] in _SPARK_PACKAGES:
        return True
    frames = traceback.extract_tb(exc.__traceback__)
    return any(_SPARK_FILE.search(frame.filename) for frame in frames)


_SPARK_PACKAGES = ("pyspark", "py4j")
_SPARK_FILE = re.compile(r"[/\\](?:pyspark|py4j)[/\\]")
