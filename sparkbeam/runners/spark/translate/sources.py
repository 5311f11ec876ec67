"""Sources and sinks: `Create`, `ReadFiles`, `ReadFromSpark`, and `WriteFiles` and
`ForEachBatch`, on bounded and unbounded input; what Spark reads and writes itself in a
production run (live file sources, `WriteFiles` as Spark's file sink, `ForEachBatch`), and
the rows a stage query wrote for a later one (`staged_rows`, `execute.live_merges`).
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkbeam.arrow import from_arrow, to_arrow
from sparkbeam.errors import DataError, PipelineError
from sparkbeam.graph import Node
from sparkbeam.paths import Paths, local_path
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.parts.arrow import (
    exact_microseconds,
    nanosecond_columns,
    read_schema,
    refuse_live_nanoseconds,
    spark_schema,
)
from sparkbeam.runners.spark.plan.keys import ChannelKey
from sparkbeam.runners.spark.plan.queries import is_replayed
from sparkbeam.runners.spark.session.engine_errors import PIPELINE_ERROR_MARK
from sparkbeam.runners.spark.session.paths import paths_of
from sparkbeam.runners.spark.translate.context import (
    Made,
    Translation,
    as_streaming,
    streaming,
    translates,
)
from sparkbeam.runners.spark.translate.live_footers import footer_files
from sparkbeam.schema import Schema, columns_to_rows, rows_to_columns
from sparkbeam.transforms.connectors import KNOWN_SCHEMAS, ForEachBatch, ReadFromSpark, call_batch
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files
from sparkbeam.transforms.sources import Create, TestStreamSource


@translates(Create)
def create(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    assert isinstance(node.transform, Create)
    schema = node.info.schema
    columns = rows_to_columns(node.transform.rows, schema, node.label)
    table = to_arrow(columns, schema, node.label)
    return Made(translation.spark.createDataFrame(table, schema=spark_schema(schema, node.label)))


TIMESTAMP_TEXT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
"""How json and csv files hold timestamps: ISO 8601 with microseconds and an offset (in
UTC, `Z`)."""

PARQUET_WRITE_OPTIONS = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.writeLegacyFormat": "false",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
}
"""Session settings of Spark's parquet writer, given as options of each write (where they
override the session's): timestamps as INT64 microseconds in UTC (`timestamp[us, tz=UTC]`,
as the direct runner writes them; Spark's default is INT96), lists in the standard layout,
times before 1900 as they are (proleptic Gregorian, as pyarrow writes them)."""


def file_options(format: str, *, write: bool) -> dict[str, str]:
    """Spark reader/writer options that match `transforms.files` (and the direct runner's
    files: `runners.direct.text`): times in UTC whatever the session's time zone, a CSV
    string's spaces at either end kept (Spark's writer trims them by default), parquet
    timestamps in microseconds (`PARQUET_WRITE_OPTIONS`)."""
    options: dict[str, str] = {}
    if format in ("json", "csv"):
        options.update(mode="FAILFAST", timeZone="UTC")
        if write:
            options["timestampFormat"] = TIMESTAMP_TEXT
    if format == "json" and write:
        options["ignoreNullFields"] = "true"
    if format == "parquet" and write:
        options.update(PARQUET_WRITE_OPTIONS)
    if format == "csv":
        options.update(header="true", quote='"', escape='"')
        if write:
            options.update(ignoreLeadingWhiteSpace="false", ignoreTrailingWhiteSpace="false")
        else:
            options["multiLine"] = "true"
    if write:
        options.pop("mode", None)
    return options


def nullable(frame: DataFrame) -> DataFrame:
    """`frame` with every column, and every list's elements, nullable, as a `WriteFiles` writes
    them on both runners (parquet's optional): Spark writes a column it knows holds no None
    (a count, a window's start) as required. The always-true condition on the partition id
    is one Spark's optimizer cannot fold away (it folds any that it can prove, and with it
    the nullability); an empty list of nullable elements is appended to each list."""
    always = F.spark_partition_id() >= 0
    columns = []
    for field in frame.schema.fields:
        column, kind = F.col(f"`{field.name.replace('`', '``')}`"), field.dataType
        if isinstance(kind, T.ArrayType) and not kind.containsNull:
            column = F.concat(column, F.array().cast(T.ArrayType(kind.elementType, True)))
        elif field.nullable:
            columns.append(column)
            continue
        columns.append(F.when(always, column).alias(field.name))
    return frame.select(*columns)


@translates(ReadFiles)
def read_files(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    schema = node.info.schema
    paths = paths_of(translation.spark)
    files = data_files(transform.path, node.label, paths)  # PipelineError if it went away
    options = file_options(transform.format, write=False)
    if transform.format != "parquet":
        file_schema = files_schema(transform.format, files, schema, node.label, paths)
        reader = translation.spark.read.format(transform.format).options(**options)
        frame = reader.schema(spark_schema(file_schema, node.label)).load(transform.path)
        return Made(frame.select(*schema.names))
    by_file = nanosecond_columns(files, schema, node.label, paths, transform.schema_origin)
    groups: dict[frozenset[str], list[str]] = {}
    for file in files:
        groups.setdefault(by_file.get(file, frozenset()), []).append(file)
    frames = []
    for nanos, grouped in groups.items() or [(frozenset(), [])]:
        reader = translation.spark.read.format("parquet").options(**options)
        reader = reader.schema(read_schema(schema, nanos, node.label))
        loaded = reader.load(transform.path) if len(groups) <= 1 else reader.load(grouped)
        frames.append(exact_microseconds(loaded, nanos, grouped, node.label).select(*schema.names))
    return Made(functools.reduce(DataFrame.unionByName, frames))


def files_schema(
    format: str, files: Sequence[str], schema: Schema, label: str, paths: Paths
) -> Schema:
    """The schema Spark reads the files with: for CSV, whose columns Spark matches by
    position, the first file's header order (every column by name)."""
    if format != "csv" or not files:
        return schema
    with io.TextIOWrapper(paths.open_input(files[0]), encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    missing = [name for name in schema.names if name not in header]
    if missing:
        raise DataError(
            f"{label}: {files[0]!r} has no column(s) {missing} in its header row "
            f"{header}; fix schema= or the files"
        )
    return Schema(tuple((name, schema.type_of(name) if name in schema else str) for name in header))


@streaming(WriteFiles)
@streaming(ForEachBatch)
@translates(WriteFiles)
@translates(ForEachBatch)
def sink(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """`WriteFiles` and `ForEachBatch`: written (or called) when the pipeline runs."""
    return Made(inputs[0], written=True)


@translates(ReadFromSpark)
def read_from_spark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, ReadFromSpark)
    spark = translation.spark
    reader = (spark.read if transform.bounded else spark.readStream).format(transform.format)
    if transform.schema is not None and transform.format not in KNOWN_SCHEMAS:
        # File formats read a stream only with a schema; connectors with a fixed one refuse it.
        reader = reader.schema(spark_schema(transform.schema, node.label))
    try:
        loaded = reader.options(**dict(transform.options)).load()
    except Exception as exc:  # the connector refused its options, or is not on the classpath
        raise PipelineError(
            f"{node.label}: Spark could not open the {transform.format!r} source with options "
            f"{dict(transform.options)}; check the options, and that the connector's package is "
            f"on Spark's classpath (spark.jars.packages). Spark: {str(exc).strip()[:400]}"
        ) from None
    return Made(connector_frame(loaded, node))


def connector_frame(loaded: DataFrame, node: Node) -> DataFrame:
    """The schema's columns of a connector's DataFrame, cast to the schema's types."""
    schema = node.info.schema
    present = set(loaded.columns)
    missing = [name for name in schema.names if name not in present]
    if missing:
        raise PipelineError(
            f"{node.label}: the source has no column(s) {missing} (it has {loaded.columns}); "
            "fix schema="
        )
    types = spark_schema(schema, node.label)
    return loaded.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in types.fields))


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


def staged_rows(spark: SparkSession, node: Node, path: str) -> DataFrame:
    """The rows a stage query wrote for `node` (a `WithWatermark`) at `path`, as a file stream:
    every committed batch not read yet, in one micro-batch (no file limit).

    A query reading them for the first time (a sink added to a pipeline
    started again on its checkpoint location) takes the files still there:
    Spark's file source plans a batch on the files of the stage's log it has
    not seen, and drops those missing then (its file index skips a path
    that is not there); a file deleted after the batch was planned fails
    it (`FAILED_READ_FILE.FILE_NOT_EXIST`)."""
    schema = spark_schema(node.info.schema, node.label)
    return spark.readStream.schema(schema).parquet(path)


@streaming(TestStreamSource)
@streaming(Create)
@streaming(ReadFiles)
def epoch_source(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """A source's channel; its rows are read only when the query runs (`source_epochs`)."""
    run = as_streaming(translation)
    if node.id in run.marked_sources and not is_replayed(node, run.live):
        marked = [i for i, (source, _) in run.epoch_marks.items() if source == node.id]
        readers = [(run.nodes[i], run.late_filters.of(i)) for i in marked]
        assert isinstance(node.transform, ReadFiles)
        resolved = run.plan.query.resolved  # a viewfs:// mount, resolved as the query was planned
        directory = resolved.get(node.id) or local_path(node.transform.path)
        return Made(footer_files(run.spark, node, readers, directory))
    if not is_replayed(node, run.live):
        return Made(live_files(run.spark, node))
    return Made(run.frame(ChannelKey("source", node.id).name()))


@streaming(ReadFromSpark)
def streaming_read_from_spark(
    translation: Translation, node: Node, inputs: Sequence[DataFrame]
) -> Made:
    transform = node.transform
    assert isinstance(transform, ReadFromSpark)
    if transform.bounded:
        raise limits.BOUNDED_READ_IN_STREAM.error(node.label)
    return read_from_spark(translation, node, inputs)
