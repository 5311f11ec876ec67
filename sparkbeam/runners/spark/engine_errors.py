"""Spark's errors as sparkbeam's, naming the transforms they concern.

A `DataError` raised in a Python worker comes back as itself; the engine's
errors about files and functions become `DataError`/`PipelineError` with
Spark's own line, not its stack.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

from sparkbeam.errors import DataError, PipelineError
from sparkbeam.graph import Node
from sparkbeam.runners.spark.python_functions import DATA_ERROR_MARK
from sparkbeam.schema import INT64_MAX, INT64_MIN
from sparkbeam.transforms.combine import CombinePerKey, Sum
from sparkbeam.transforms.files import ReadFiles

_DATA_ERROR = re.compile(re.escape(DATA_ERROR_MARK) + r"(.*?)(?:\s*SQLSTATE: \w+)?\s*$", re.M)


_ENGINE_LINE = re.compile(r"\[[\w.]+\]\s*(.*?)\s*(?:SQLSTATE: \w+)?\s*$")


_ENGINE_ERRORS: list[tuple[tuple[str, ...], type[ValueError], str]] = [
    (
        ("PARQUET_COLUMN_DATA_TYPE_MISMATCH", "SCHEMA_COLUMN_CONVERT"),
        DataError,
        "ReadFiles: a parquet file's column type differs from the schema (a file added after "
        "the pipeline was built?)",
    ),
    (
        (
            "MALFORMED_RECORD",
            "FAILFAST",
            "MALFORMED_CSV_RECORD",
            "CANNOT_PARSE",
            "FAILED_READ_FILE",
        ),
        DataError,
        "ReadFiles: a file holds a value that does not match schema= (fix the file or the schema)",
    ),
    (
        ("PATH_NOT_FOUND",),
        PipelineError,
        "ReadFiles: the path no longer exists; check it",
    ),
]


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _missing_module_advice(module: str, labels: Sequence[str]) -> str:
    where = f"{', '.join(labels)}: " if labels else ""
    if module.split(".")[0] == "sparkbeam":
        return (
            f"{where}Spark's Python workers cannot import {module!r}: the runner ships "
            "sparkbeam to them unless SparkRunner(ship_package=False); with it off, install "
            "sparkbeam (the same version) on the cluster's Python"
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
    where = " or ".join(sums) if sums else "an integer computation"
    return DataError(
        f"{where}: a sum left the 64-bit integers ({INT64_MIN} to {INT64_MAX}) both runners "
        "hold; sum a float column (convert the values in a Map) for totals that large "
        "(Spark: ARITHMETIC_OVERFLOW)"
    )


@contextlib.contextmanager
def spark_errors(nodes: Sequence[Node] = ()) -> Iterator[None]:
    """Errors of a Spark job as sparkbeam's: a `DataError` raised in a Python worker, and
    the engine's errors about files, functions and integer overflow, named by the
    transforms of `nodes` they concern (the `ReadFiles`, the integer `Sum`s)."""
    labels = [node.label for node in nodes if isinstance(node.transform, ReadFiles)]
    try:
        yield
    except DataError:
        raise
    except Exception as exc:
        text = str(exc)
        for match in _DATA_ERROR.finditer(text):
            # A streaming query's error also prints its plan, where the check's message
            # appears unevaluated: only a message with its row in it was raised.
            if "to_json(struct(" not in match.group(1):
                raise DataError(match.group(1).strip()) from exc
        if "ARITHMETIC_OVERFLOW" in text:
            raise _overflow(nodes) from exc
        missing = _MISSING_MODULE.search(text)
        if missing:
            raise PipelineError(_missing_module_advice(missing.group(1), labels)) from exc
        for marks, kind, advice in _ENGINE_ERRORS:
            lines = [line.strip() for line in text.splitlines() if any(m in line for m in marks)]
            if lines:
                where = f"{', '.join(labels)}: " if labels else ""
                said = _ENGINE_LINE.search(lines[0])
                detail = said.group(1) if said else lines[0]
                raise kind(f"{where}{advice}. Spark: {detail[:600]}") from exc
        raise
