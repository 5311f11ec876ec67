"""What Spark reads and writes itself in a production run: live file sources and the sinks
(`WriteFiles` as Spark's file sink, `ForEachBatch`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from sparkbeam.arrow import from_arrow
from sparkbeam.errors import DataError
from sparkbeam.graph import Node
from sparkbeam.paths import Paths
from sparkbeam.runners.spark.arrow import (
    exact_microseconds,
    nanosecond_columns,
    read_schema,
)
from sparkbeam.runners.spark.paths import paths_of
from sparkbeam.runners.spark.python_functions import PIPELINE_ERROR_MARK
from sparkbeam.runners.spark.translate import (
    connector_frame,
    file_options,
    files_schema,
)
from sparkbeam.schema import Schema, columns_to_rows
from sparkbeam.transforms.connectors import ForEachBatch, call_batch
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files

if TYPE_CHECKING:
    from sparkbeam.runners.spark.streaming import StreamingTranslation


def live_files(run: StreamingTranslation, node: Node) -> DataFrame:
    """`ReadFiles(streaming=True)` in a production run: Spark's file source on the directory,
    one new file per micro-batch (an epoch, as on the direct runner). Spark takes new
    files in the order of their modification times; the direct runner in name order.
    CSV columns are read in the header order of the first file there at the start."""
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    paths = paths_of(run.spark)
    files = data_files(transform.path, node.label, paths)
    nanos: frozenset[str] = frozenset()
    if transform.format == "parquet":
        nanos = live_nanosecond_columns(files, node.info.schema, node.label, paths)
    schema = files_schema(transform.format, files, node.info.schema, node.label, paths)
    reader = run.spark.readStream.format(transform.format)
    reader = reader.schema(read_schema(schema, nanos, node.label))
    options = {**file_options(transform.format, write=False), "maxFilesPerTrigger": "1"}
    loaded = reader.options(**options).load(transform.path)
    return connector_frame(exact_microseconds(loaded, nanos, files, node.label), node)


def live_nanosecond_columns(
    files: Sequence[str], schema: Schema, label: str, paths: Paths
) -> frozenset[str]:
    """The columns of `schema` that the parquet files there at the start hold as nanosecond
    timestamps: Spark's file source reads every file of a column alike, so a column in
    nanoseconds in one file and not in another is a `DataError` naming both files."""
    by_file = list(nanosecond_columns(files, schema, label, paths).items())
    if not by_file:
        return frozenset()
    first, in_nanos = by_file[0]
    for file, nanos in by_file[1:]:
        for name in sorted(nanos ^ in_nanos):
            ns_file, other = (first, file) if name in in_nanos else (file, first)
            raise DataError(
                f"{label}: column {name!r} holds nanosecond timestamps in {ns_file!r} but "
                f"not in {other!r}; a live source reads a column of every file in one "
                "unit: write them all with microsecond timestamps (pyarrow's "
                "coerce_timestamps='us') or all with pandas' default, nanoseconds"
            )
    return in_nanos


Sink = Callable[[DataFrame], Any]
"""Turns a query's DataFrame into the `DataStreamWriter` of a production sink."""


def file_sink(node: Node) -> Sink:
    """`WriteFiles` on unbounded input: Spark's file sink (exactly once with its checkpoint)."""
    transform = node.transform
    assert isinstance(transform, WriteFiles)

    def attach(frame: DataFrame) -> Any:
        writer = frame.writeStream.format(transform.format)
        writer = writer.options(**file_options(transform.format, write=True))
        return writer.option("path", transform.path)

    return attach


def callback_sink(node: Node) -> Sink:
    """`ForEachBatch`: the user's function with each micro-batch's rows and its batch id."""
    transform = node.transform
    assert isinstance(transform, ForEachBatch)
    schema = node.info.schema
    fn = transform.fn

    def call(batch: DataFrame, batch_id: int) -> None:
        rows = columns_to_rows(from_arrow(batch.toArrow(), schema), schema)
        if rows:
            call_batch(fn, rows, batch_id, node.label, PIPELINE_ERROR_MARK)

    return lambda frame: frame.writeStream.foreachBatch(call)


def sink_of(node: Node) -> Sink:
    return file_sink(node) if isinstance(node.transform, WriteFiles) else callback_sink(node)
