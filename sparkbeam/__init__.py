"""sparkbeam: Beam-style pipelines with event-time watermarks as messages.

One pipeline, two runners that agree row for row: `"direct"` (in-process,
checks invariant W on every edge) and `"spark"` (PySpark).
"""

import importlib
import typing

from sparkbeam.errors import DataError, InvariantViolation, PipelineError
from sparkbeam.graph import PTransform
from sparkbeam.messages import Watermark
from sparkbeam.metrics import PipelineMetrics, TransformMetrics
from sparkbeam.pipeline import PCollection, Pipeline, PipelineResult
from sparkbeam.pipeline_graph import PipelineGraph
from sparkbeam.runners.direct import DirectRunner
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


def __getattr__(name: str) -> typing.Any:
    """`sb.SparkRunner`, imported on first use: pyspark is an optional dependency."""
    if name in ("SparkRunner", "SparkResult"):
        return getattr(importlib.import_module("sparkbeam.runners.spark"), name)
    raise AttributeError(f"module 'sparkbeam' has no attribute {name!r}")


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
