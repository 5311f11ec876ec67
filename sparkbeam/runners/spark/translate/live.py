"""What Spark reads and writes itself in a production run: live file sources and the sinks
(`WriteFiles` as Spark's file sink, `ForEachBatch`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sparkbeam.arrow import from_arrow
from sparkbeam.graph import Node
from sparkbeam.paths import Paths
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.parts.arrow import nanosecond_columns, spark_schema
from sparkbeam.runners.spark.session.engine_errors import PIPELINE_ERROR_MARK
from sparkbeam.runners.spark.session.paths import paths_of
from sparkbeam.runners.spark.translate.context import (
    connector_frame,
    file_options,
    files_schema,
    nullable,
)
from sparkbeam.schema import Schema, columns_to_rows
from sparkbeam.transforms.connectors import ForEachBatch, call_batch
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files


def live_files(spark: SparkSession, node: Node) -> DataFrame:
    """`ReadFiles(streaming=True)` in a production run: Spark's file source on the directory,
    one new file per micro-batch (an epoch, as on the direct runner). Spark takes new
    files in the order of their modification times; the direct runner in name order.
    CSV columns are read in the header order of the first file there at the start."""
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    paths = paths_of(spark)
    files = data_files(transform.path, node.label, paths)
    if transform.format == "parquet":
        refuse_live_nanoseconds(files, node.info.schema, node.label, paths, transform.schema_origin)
    schema = files_schema(transform.format, files, node.info.schema, node.label, paths)
    reader = spark.readStream.format(transform.format)
    reader = reader.schema(spark_schema(schema, node.label))
    options = {**file_options(transform.format, write=False), "maxFilesPerTrigger": "1"}
    return connector_frame(reader.options(**options).load(transform.path), node)


def refuse_live_nanoseconds(
    files: Sequence[str], schema: Schema, label: str, paths: Paths, origin: str
) -> None:
    """Refuse parquet files there at the start that hold nanosecond timestamps (and those
    whose columns differ from `schema`, which `origin` gave: `nanosecond_columns`).

    Spark's file source reads a column of every file in one unit, fixed by the
    read schema when the query starts: reading nanoseconds needs a 64-bit
    integer schema, under which a later file in microseconds reads as
    nanoseconds too (times a thousand times too close to 1970, with no
    error). A batch read and a collected one look at each file's own unit."""
    for file, nanos in nanosecond_columns(files, schema, label, paths, origin).items():
        for column in sorted(nanos):
            raise limits.PARQUET_LIVE_NANOSECONDS.error(label, column=column, file=file)


Sink = Callable[[DataFrame], Any]
"""Turns a query's DataFrame into the `DataStreamWriter` of a production sink."""


def file_sink(node: Node) -> Sink:
    """`WriteFiles` on unbounded input: Spark's file sink (exactly once with its checkpoint)."""
    transform = node.transform
    assert isinstance(transform, WriteFiles)

    def attach(frame: DataFrame) -> Any:
        writer = nullable(frame).writeStream.format(transform.format)
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
