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
from sparkbeam.runners.spark.python_functions import DATA_ERROR_MARK

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


@contextlib.contextmanager
def spark_errors(labels: Sequence[str] = ()) -> Iterator[None]:
    """Errors of a Spark job as sparkbeam's: a `DataError` raised in a Python worker, and
    the engine's errors about files and functions, named by `labels` (the sources)."""
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
                raise DataError(match.group(1).strip()) from None
        missing = _MISSING_MODULE.search(text)
        if missing:
            raise PipelineError(_missing_module_advice(missing.group(1), labels)) from None
        for marks, kind, advice in _ENGINE_ERRORS:
            lines = [line.strip() for line in text.splitlines() if any(m in line for m in marks)]
            if lines:
                where = f"{', '.join(labels)}: " if labels else ""
                said = _ENGINE_LINE.search(lines[0])
                detail = said.group(1) if said else lines[0]
                raise kind(f"{where}{advice}. Spark: {detail[:600]}") from None
        raise
