"""A live parquet `ReadFiles` whose `WithWatermark`s' filters are `Strategy.FOOTERS`: read by
the Python streaming source of `footers`, each row with the watermark it is judged by."""

from __future__ import annotations

import datetime as _dt
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from sparkbeam.graph import Node
from sparkbeam.paths import is_local
from sparkbeam.runners.spark.parts.arrow import refuse_live_nanoseconds, spark_schema
from sparkbeam.runners.spark.plan.keys import INVALID_ROWS, Observation
from sparkbeam.runners.spark.plan.late_filters import LateFilter
from sparkbeam.runners.spark.session.paths import local_directory, paths_of
from sparkbeam.runners.spark.session.shipping import is_connect
from sparkbeam.runners.spark.translate import footers
from sparkbeam.runners.spark.translate.footers import (
    SOURCE_NAME,
    Counts,
    Mark,
    MarkCounts,
    ParquetFootersSource,
    batch_counts,
    options_of,
)
from sparkbeam.transforms.files import ReadFiles, data_files
from sparkbeam.transforms.watermark import WithWatermark

_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()


def footer_files(
    spark: SparkSession, node: Node, readers: Sequence[tuple[Node, LateFilter]], directory: str
) -> DataFrame:
    """`node` (a live parquet `ReadFiles` whose files are in `directory` on the driver's disk)
    with, for each `WithWatermark` of `readers`, the watermark of each row's file (None before
    any file) in its filter's column (`LateFilter.mark`), or its late rows dropped by the
    reader (`LateFilter.in_reader`). The reader counts the source's rows and what those
    `WithWatermark`s' observations would (`reader_counts`)."""
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    schema = node.info.schema
    paths = paths_of(spark)
    files = data_files(transform.path, node.label, paths)
    refuse_live_nanoseconds(files, schema, node.label, paths, transform.schema_origin)
    if spark not in _REGISTERED:
        cloudpickle.register_pickle_by_value(footers)
        spark.dataSource.register(ParquetFootersSource)
        _REGISTERED.add(spark)
    marks = []
    for reader, chosen in readers:
        watermark = reader.transform
        assert isinstance(watermark, WithWatermark) and chosen.mark is not None
        function = watermark.watermark_function(reader.info.schema)
        is_datetime = schema.type_of(watermark.column) is _dt.datetime
        delay, in_millis, drops = function.delay, function.in_millis, chosen.in_reader
        marks.append(Mark(chosen.mark, watermark.column, is_datetime, delay, in_millis, drops))
    fields = spark_schema(schema, node.label).fields
    written = [T.StructField(m.column, T.LongType()) for m in marks if not m.drops]
    read_schema = T.StructType([*fields, *written])
    counts = reader_counts(node, [reader for reader, _ in readers])
    options = options_of(directory, marks, node.label, counts, parallelism_of(spark))
    return spark.readStream.format(SOURCE_NAME).schema(read_schema).options(**options).load()


CONNECT_PARALLELISM = 2
"""The parallelism a footer source assumes on Spark Connect where the session does not set
`spark.default.parallelism` (a Connect client cannot ask the server for its cores)."""


def parallelism_of(spark: SparkSession) -> int:
    """How many partitions a big file of a footer source is read as, at most
    (`footers.PART_ROWS`): the session's default parallelism, as Spark's own file source
    splits files by it."""
    if is_connect(spark):
        return int(spark.conf.get("spark.default.parallelism", None) or CONNECT_PARALLELISM)
    return int(spark.sparkContext.defaultParallelism)


def reader_counts(source: Node, readers: Sequence[Node]) -> Counts:
    """The metric keys a footer source's reader counts under, in place of the observations
    of a source a `WithWatermark` reads straight from (`plan.streaming_query.counts_source`):
    the source's rows and, for each `WithWatermark` of `readers`, what it counts on its
    input and what its filter passes (`translate.watermark`). A source holds no watermarked
    column, and a `WithWatermark` straight on it only its own."""
    assert not source.info.watermarked, source.label
    marks = []
    for reader in readers:
        transform = reader.transform
        assert isinstance(transform, WithWatermark)
        assert sorted(reader.info.watermarked) == [transform.column], reader.label
        into, out = Observation("in", reader.id), Observation("n", reader.id)
        marks.append(
            MarkCounts(
                rows=into.rows(),
                invalid=into.field(INVALID_ROWS),
                latest=into.latest(),
                kept=out.rows(),
                kept_latest=out.latest(0),
            )
        )
    return Counts(tuple(marks), Observation("n", source.id).rows())


def read_counts(progress: Any) -> dict[str, int]:
    """What the footer sources' readers counted of the micro-batch a query's `progress`
    reports (`reader_counts`), by metric key: carried in each reader's end offset, which the
    offset log keeps, so a batch replayed after a restart counts what it counted before."""
    counts: dict[str, int] = {}
    for source in progress.get("sources") or ():
        counts.update(batch_counts(source.get("startOffset"), source.get("endOffset")))
    return counts


def resolved_directories(
    spark: SparkSession, nodes: Sequence[Node], selected: Iterable[int]
) -> dict[int, str]:
    """The live parquet `ReadFiles` among `selected` whose URI is not local but resolves, through
    the session's Hadoop file system, to a directory on the driver's disk (a `viewfs://` mount
    of a `file:` directory): that directory, by node id (`late_filters.Query.resolved`).
    Resolved once, before the query starts: the mount table is the session's."""
    resolved = {}
    for node_id in selected:
        transform = nodes[node_id].transform
        if not isinstance(transform, ReadFiles) or not transform.streaming:
            continue
        if transform.format != "parquet" or is_local(transform.path):
            continue
        directory = local_directory(spark, transform.path)
        if directory is not None:
            resolved[node_id] = directory
    return resolved


STARTING_SOURCES = ("Initializing StreamExecution", "Initializing sources")
"""A query's status messages until its sources have started."""

SOURCE_START_SECONDS = 120.0


def sources_started(query: Any) -> None:
    """Wait until `query` (reading a footer source) has started its sources, or ended.

    Spark starts a Python streaming source's reader in a new Python process
    that must connect back to the JVM within a fixed 10 seconds, or the query
    fails. Queries started together start theirs together, and on a loaded
    machine (two cores, several queries) some missed it; started one after
    another, each has the machine to itself for that second or so.
    """
    deadline = time.monotonic() + SOURCE_START_SECONDS
    while time.monotonic() < deadline and query.isActive:
        if query.status["message"] not in STARTING_SOURCES:
            return
        time.sleep(0.05)
