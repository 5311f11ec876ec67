"""sparkbeam: Beam-style pipelines with event-time watermarks as messages.

One pipeline, two runners that agree row for row: `"direct"` (in-process,
checks invariant W on every edge) and `"spark"` (PySpark).

Each public name is imported from its module on first use (`sb.Pipeline`,
`from sparkbeam import Tumble`): a Spark worker that unpickles one of the
runner's functions imports that function's modules, not the whole package,
and pyspark stays optional.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from sparkbeam.errors import DataError, InvariantViolation, PipelineError
    from sparkbeam.graph import PTransform
    from sparkbeam.messages import Watermark
    from sparkbeam.metrics import PipelineMetrics, TransformMetrics
    from sparkbeam.pipeline import PCollection, Pipeline, PipelineResult
    from sparkbeam.pipeline_graph import PipelineGraph
    from sparkbeam.runners.direct import DirectRunner
    from sparkbeam.runners.spark import SparkResult, SparkRunner
    from sparkbeam.schema import Schema
    from sparkbeam.testing import assert_that, equal_to
    from sparkbeam.transforms.combine import (
        All,
        Any,
        CollectSet,
        CombineFn,
        CombinePerKey,
        Count,
        CountDistinct,
        Max,
        MaxBy,
        Mean,
        Min,
        MinBy,
        Sum,
    )
    from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
    from sparkbeam.transforms.elementwise import Filter, Map, Select
    from sparkbeam.transforms.expressions import Expr, coalesce, col, concat, lit, when
    from sparkbeam.transforms.files import ReadFiles, WriteFiles
    from sparkbeam.transforms.flat import FlatMap, Partition
    from sparkbeam.transforms.join import Join
    from sparkbeam.transforms.late import invalid_rows, late_rows
    from sparkbeam.transforms.sort import Sort
    from sparkbeam.transforms.sources import Create, TestStream
    from sparkbeam.transforms.union import Union
    from sparkbeam.transforms.watermark import WithWatermark
    from sparkbeam.transforms.windows import Hop, Session, Tumble

_HOMES: dict[str, tuple[str, ...]] = {
    "sparkbeam.errors": ("DataError", "InvariantViolation", "PipelineError"),
    "sparkbeam.graph": ("PTransform",),
    "sparkbeam.messages": ("Watermark",),
    "sparkbeam.metrics": ("PipelineMetrics", "TransformMetrics"),
    "sparkbeam.pipeline": ("PCollection", "Pipeline", "PipelineResult"),
    "sparkbeam.pipeline_graph": ("PipelineGraph",),
    "sparkbeam.runners.direct": ("DirectRunner",),
    "sparkbeam.runners.spark": ("SparkResult", "SparkRunner"),
    "sparkbeam.schema": ("Schema",),
    "sparkbeam.testing": ("assert_that", "equal_to"),
    "sparkbeam.transforms.combine": (
        "All",
        "Any",
        "CollectSet",
        "CombineFn",
        "CombinePerKey",
        "Count",
        "CountDistinct",
        "Max",
        "MaxBy",
        "Mean",
        "Min",
        "MinBy",
        "Sum",
    ),
    "sparkbeam.transforms.connectors": ("ForEachBatch", "ReadFromSpark"),
    "sparkbeam.transforms.elementwise": ("Filter", "Map", "Select"),
    "sparkbeam.transforms.expressions": ("Expr", "coalesce", "col", "concat", "lit", "when"),
    "sparkbeam.transforms.files": ("ReadFiles", "WriteFiles"),
    "sparkbeam.transforms.flat": ("FlatMap", "Partition"),
    "sparkbeam.transforms.join": ("Join",),
    "sparkbeam.transforms.late": ("invalid_rows", "late_rows"),
    "sparkbeam.transforms.sort": ("Sort",),
    "sparkbeam.transforms.sources": ("Create", "TestStream"),
    "sparkbeam.transforms.union": ("Union",),
    "sparkbeam.transforms.watermark": ("WithWatermark",),
    "sparkbeam.transforms.windows": ("Hop", "Session", "Tumble"),
}
"""The module of each public name: the imports above, which type checkers and editors read."""

_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "All",
    "Any",
    "CollectSet",
    "CombineFn",
    "CombinePerKey",
    "Count",
    "CountDistinct",
    "Create",
    "DataError",
    "DirectRunner",
    "Expr",
    "Filter",
    "FlatMap",
    "ForEachBatch",
    "Hop",
    "InvariantViolation",
    "Join",
    "Map",
    "Max",
    "MaxBy",
    "Mean",
    "Min",
    "MinBy",
    "PCollection",
    "PTransform",
    "Partition",
    "Pipeline",
    "PipelineError",
    "PipelineGraph",
    "PipelineMetrics",
    "PipelineResult",
    "ReadFiles",
    "ReadFromSpark",
    "Schema",
    "Select",
    "Session",
    "Sort",
    "SparkResult",
    "SparkRunner",
    "Sum",
    "TestStream",
    "TransformMetrics",
    "Tumble",
    "Union",
    "Watermark",
    "WithWatermark",
    "WriteFiles",
    "assert_that",
    "coalesce",
    "col",
    "concat",
    "equal_to",
    "invalid_rows",
    "late_rows",
    "lit",
    "when",
]


def __getattr__(name: str) -> typing.Any:
    """A public name, imported from its module on first use and kept."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'sparkbeam' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
