"""What every runner's result shows alike: rows as frames and the pipeline as a picture.

`DirectResult`, `SparkResult` and `SparkStreamingResult` inherit `ResultViews`, so
`to_pandas`, `to_arrow` and `graph` are the same on both runners: built from
`collect` and `metrics`, which each runner implements.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node, not_a_pcollection
from sparkbeam.metrics import TransformMetrics
from sparkbeam.pipeline_graph import PipelineGraph
from sparkbeam.schema import Row

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from sparkbeam.pipeline import PCollection, Pipeline


def _frames() -> ModuleType:
    """`sparkbeam.frames`, which needs pandas and pyarrow (optional dependencies)."""
    try:
        return importlib.import_module("sparkbeam.frames")
    except ImportError as exc:
        raise ImportError(
            f"results as frames need pandas and pyarrow ({exc}): pip install 'sparkbeam[frames]'"
        ) from exc


class ResultViews:
    """`to_pandas`, `to_arrow` and `graph`, over a runner's `collect` and `metrics`."""

    pipeline: Pipeline
    node_count: int
    """How many nodes the pipeline had when it ran: later ones are not in this result."""

    def of_run(self, pcoll: PCollection) -> PCollection:
        """`pcoll`, when it is one this run computed; else `PipelineError` saying why not."""
        if not isinstance(getattr(pcoll, "node", None), Node):
            raise PipelineError(
                f"{type(self).__name__}: a result is asked about a PCollection of its pipeline; "
                f"{not_a_pcollection(pcoll)}"
            )
        if pcoll.pipeline is not self.pipeline:
            raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        if pcoll.node.id >= self.node_count:
            raise PipelineError(
                f"{pcoll.node.label}: it was added to the pipeline after this result's run, "
                "so the run did not compute it; run the pipeline again (p.run()) and ask the "
                "new result"
            )
        return pcoll

    def collect(self, pcoll: PCollection) -> list[Row]:
        raise NotImplementedError

    def metrics(self) -> dict[str, TransformMetrics]:
        raise NotImplementedError

    def to_arrow(self, pcoll: PCollection) -> pa.Table:
        """The rows of `collect(pcoll)` as a `pyarrow.Table`, in its order, typed by the
        schema (datetimes as `timestamp("us")` without a time zone; `sparkbeam.frames`)."""
        rows = self.collect(pcoll)
        table: pa.Table = _frames().rows_to_arrow(rows, pcoll.schema, pcoll.node.label)
        return table

    def to_pandas(self, pcoll: PCollection) -> pd.DataFrame:
        """The rows of `collect(pcoll)` as a `pandas.DataFrame`, in its order, typed by the
        schema (datetimes as `datetime64[us]`, integers as `int64`, or `Int64` where a
        `None` occurs; `sparkbeam.frames`)."""
        frame: pd.DataFrame = _frames().rows_to_pandas(self.collect(pcoll), pcoll.schema)
        return frame

    def graph(self) -> PipelineGraph:
        """The pipeline's picture with this run's counts: rows per edge, and the late and
        invalid rows and watermarks of each `WithWatermark`, `Union` and `Join` (from
        `metrics()`, so on Spark it may run the queries `metrics()` runs)."""
        return PipelineGraph.of(self.pipeline.nodes, self.metrics())
