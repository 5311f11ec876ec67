"""The Spark runner: the pipeline translated into PySpark (needs the `spark` extra).

`SparkRunner` and `SparkResult` are imported on first use, so that the pure-Python rooms
(`plan/`, `limits.py`) import without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkbeam.runners.spark.runner import SparkResult, SparkRunner

__all__ = ["SparkResult", "SparkRunner"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from sparkbeam.runners.spark import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
