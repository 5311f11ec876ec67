"""The result of a bounded pipeline on Spark: its DataFrames, collected, explained and measured."""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkbeam.arrow import from_arrow
from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.metrics import PipelineMetrics, TransformMetrics
from sparkbeam.results import ResultViews
from sparkbeam.runners.spark.execute.progress import say
from sparkbeam.runners.spark.session.engine_errors import spark_errors
from sparkbeam.runners.spark.translate.context import Translation
from sparkbeam.schema import Row, columns_to_rows
from sparkbeam.time import ONE_MICROSECOND, from_micros
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection, Pipeline


class SparkResult(ResultViews):
    """The DataFrames of a translated pipeline, and what a run reports."""

    def __init__(self, pipeline: Pipeline, translation: Translation) -> None:
        self.pipeline = pipeline
        self.node_count = len(pipeline.nodes)
        self.translation = translation
        self._metrics: dict[str, TransformMetrics] | None = None

    def to_dataframe(self, pcoll: PCollection) -> DataFrame:
        """The Spark DataFrame of `pcoll`, to go on with in Spark."""
        return self.translation.frames[self.of_run(pcoll).node.id]

    def collect(self, pcoll: PCollection) -> list[Row]:
        """Every row of `pcoll`, as the same Python values the direct runner gives."""
        schema = self.of_run(pcoll).schema
        say("computing %s", pcoll.node.label)
        with spark_errors(self.pipeline.nodes, pcoll.node):
            table = self.to_dataframe(pcoll).toArrow()
        return columns_to_rows(from_arrow(table, schema), schema)

    def explain(self, pcoll: PCollection, mode: str = "formatted") -> str:
        """Spark's plan for `pcoll`."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.to_dataframe(pcoll).explain(mode=mode)
        return out.getvalue()

    def _watermark_node(self, pcoll: PCollection) -> Any:
        self.of_run(pcoll)
        if not isinstance(pcoll.node.transform, WithWatermark):
            raise PipelineError(
                f"{pcoll.node.label}: rows with no event time are counted by WithWatermark; "
                "pass the PCollection that .with_watermark(...) returned"
            )
        return pcoll.node

    def late_count(self, pcoll: PCollection) -> int:
        """Rows dropped as late. Bounded input is one epoch, judged before any watermark: 0."""
        self.of_run(pcoll)
        if not isinstance(pcoll.node.transform, (WithWatermark, Union, Join)):
            raise PipelineError(
                f"{pcoll.node.label}: late rows are counted by WithWatermark (and by Union and "
                "Join); pass the PCollection that .with_watermark(...) returned"
            )
        return 0

    def invalid_count(self, pcoll: PCollection) -> int:
        """Rows dropped by that `WithWatermark` because their event time was `None`."""
        node = self._watermark_node(pcoll)
        with spark_errors(self.pipeline.nodes, node):
            return int(self.translation.invalid[node.id].count())

    def metrics(self) -> PipelineMetrics:
        """Per transform (by label, in graph order): rows in and out, drops, watermarks, lag.

        Counted by Spark jobs when called (one per transform, cached). A batch
        job is one epoch: no late rows; the watermark of a `WithWatermark` is
        the one the direct runner reaches after its epoch (`floor_to_ms(max) -
        delay`), with its lag; other transforms report none (a batch plan
        carries no watermarks), and state sizes are None (a batch job keeps no
        state between epochs).
        """
        if self._metrics is None:
            say("counting the rows of each transform (a Spark job each)")
            self._metrics = self._measure()
        return PipelineMetrics(self._metrics)

    def _measure(self) -> dict[str, TransformMetrics]:
        nodes = self.pipeline.nodes
        frames = self.translation.frames
        with spark_errors(self.pipeline.nodes):
            rows = [int(frames[node.id].count()) for node in nodes]
            out: dict[str, TransformMetrics] = {}
            for node in nodes:
                transform = node.transform
                rows_in = rows[node.id]
                if not isinstance(transform, DroppedRows):
                    rows_in = sum(rows[i] for i in node.inputs)
                invalid = 0
                marks: dict[str, Any] = {}
                lags: dict[str, Any] = {}
                estimates: dict[str, Any] = {}
                if isinstance(transform, WithWatermark):
                    invalid = int(self.translation.invalid[node.id].count())
                    mark, lag, estimate = _batch_watermark(frames[node.id], transform, node)
                    if mark is not None:
                        marks[transform.column], lags[transform.column] = mark, lag
                    if estimate != mark:
                        estimates[transform.column] = estimate
                out[node.label] = TransformMetrics(
                    rows_in=rows_in,
                    rows_out=rows[node.id],
                    invalid_rows=invalid,
                    watermarks=marks,
                    watermark_lag=lags,
                    watermark_estimates=estimates,
                )
        return out


def _batch_watermark(
    frame: DataFrame, transform: WithWatermark, node: Node
) -> tuple[Any, Any, Any]:
    """`(watermark, lag, estimate)` a `WithWatermark` reaches after one epoch, or
    `(None, None, None)`."""
    schema = node.info.schema
    kind = schema.type_of(transform.column)
    is_datetime = kind is _dt.datetime
    column = F.col(transform.column)
    (top,) = frame.agg(F.max(F.unix_micros(column) if is_datetime else column)).first() or (None,)
    if top is None:
        return None, None, None
    mark = transform.watermark_function(schema)(int(top))
    estimate = transform.estimate_function(schema)(int(top))
    if is_datetime:
        return from_micros(mark), (int(top) - mark) * ONE_MICROSECOND, from_micros(estimate)
    return mark, int(top) - mark, estimate
