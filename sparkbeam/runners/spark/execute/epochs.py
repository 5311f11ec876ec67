"""Replayed input: the sources the runner feeds epoch by epoch (`TestStream`, `Create`,
`ReadFiles` collected).

All inputs of one query go into one parquet file per epoch (a channel column
says whose), so a micro-batch never sees part of an epoch; the end of input is
a sentinel row far in the future that moves every watermark past everything.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.arrow import arrow_schema, to_arrow
from sparkbeam.graph import Node
from sparkbeam.paths import Paths, join
from sparkbeam.runners.shared.files import read_file
from sparkbeam.runners.spark.exact.judges import FAR_FUTURE_INT
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.plan.delays import FAR_FUTURE_MICROS
from sparkbeam.runners.spark.plan.streaming_query import QueryPlan
from sparkbeam.runners.spark.translate.watermark import SENTINEL
from sparkbeam.schema import Columns, Schema, rows_to_columns
from sparkbeam.transforms.files import ReadFiles, data_files
from sparkbeam.transforms.sources import Create, TestStreamSource

CHANNEL = "__sparkbeam_channel"


class Channel:
    """One input of a query (a source, a sentinel, an earlier stage's output) within its feed.

    `marks` name the constant columns it carries besides its schema's: one per
    `WithWatermark` that reads this source directly, holding the watermark the
    epoch's rows are judged by (`exact.late_filter.epoch_watermark_filter`).
    """

    def __init__(
        self, index: int, name: str, schema: Schema, label: str, marks: Sequence[str] = ()
    ) -> None:
        self.index = index
        self.name = name
        self.schema = schema
        self.label = label
        self.marks = tuple(marks)
        self.pending: pa.Table | None = None
        self.mark_values: dict[str, int | None] = {}
        """The marks' values for the epoch being fed (None: no watermark yet)."""
        self.frame: DataFrame | None = None

    def column(self, name: str) -> str:
        return f"__c{self.index}_{name}"

    def put_table(self, table: pa.Table) -> None:
        """This channel's rows for the epoch being fed, as Arrow (datetimes as timestamps)."""
        self.pending = table

    def put(self, columns: Columns) -> None:
        """This channel's rows for the epoch being fed, as internal columns."""
        self.put_table(to_arrow(columns, self.schema, self.label))

    def put_rows(self, rows: Sequence[dict[str, Any]], label: str) -> None:
        self.put_table(to_arrow(rows_to_columns(rows, self.schema, label), self.schema, label))


class EpochFeed:
    """All inputs of one query, as one directory Spark reads as a file stream.

    Each epoch is one parquet file holding the rows of every channel (a tag
    column says whose), written at once from Arrow: Spark sees an epoch whole
    or not at all, so a micro-batch never holds part of one. Each channel's
    DataFrame is the one stream filtered by its tag (one source, read once per
    batch), with its schema's columns and its marks.
    """

    def __init__(
        self,
        directory: str,
        channels: Sequence[tuple[str, Schema, str]],
        paths: Paths,
        marks: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.directory = directory
        """Any URI Spark reads (`SparkRunner(staging_location=...)`), or a local directory."""
        self.paths = paths
        self.incoming = directory.rstrip("/") + ".incoming"
        """Where each epoch's file is written before it is renamed into `directory`: outside
        it, since Spark's file source lists (and looks at) every file there, hidden or not."""
        self.files = 0
        marks = marks or {}
        self.channels = {
            name: Channel(i, name, schema, label, marks.get(name, ()))
            for i, (name, schema, label) in enumerate(channels)
        }
        fields: list[tuple[str, type]] = [(CHANNEL, int)]
        for channel in self.channels.values():
            fields += [(channel.column(n), kind) for n, kind in channel.schema.fields]
            fields += [(channel.column(mark), int) for mark in channel.marks]
        self.schema = Schema(tuple(fields))
        self.arrow = arrow_schema(self.schema)

    def open(self, spark: SparkSession) -> None:
        """Make the feed's directories and its stream; a feed with no channel (a query over
        live sources only) has neither."""
        if not self.channels:
            return
        self.paths.mkdirs(self.directory)
        self.paths.mkdirs(self.incoming)
        reader = spark.readStream.schema(spark_schema(self.schema, "input"))
        stream = reader.option("maxFilesPerTrigger", 1).parquet(self.directory)
        for channel in self.channels.values():
            names = [*channel.schema.names, *channel.marks]
            channel.frame = stream.filter(F.col(CHANNEL) == channel.index).select(
                *(F.col(channel.column(n)).alias(n) for n in names)
            )

    def write(self) -> None:
        """One file with every channel's pending rows (possibly none)."""
        parts = []
        for channel in self.channels.values():
            pending, channel.pending = channel.pending, None
            if pending is None or not pending.num_rows:
                continue
            size = pending.num_rows
            own = {channel.column(n): pending.column(n) for n in channel.schema.names}
            for mark in channel.marks:
                own[channel.column(mark)] = pa.repeat(
                    pa.scalar(channel.mark_values.get(mark), pa.int64()), size
                )
            own[CHANNEL] = pa.repeat(pa.scalar(channel.index, pa.int64()), size)
            arrays = [
                own[field.name] if field.name in own else pa.nulls(size, field.type)
                for field in self.arrow
            ]
            parts.append(pa.Table.from_arrays(arrays, schema=self.arrow))
        table = pa.concat_tables(parts) if parts else self.arrow.empty_table()
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        name = f"epoch-{self.files:06d}.parquet"
        staged = join(self.incoming, name)
        self.paths.write_bytes(join(self.directory, name), buffer.getvalue().to_pybytes(), staged)
        self.files += 1


def _file_table(path: str, transform: ReadFiles, node: Node, paths: Paths) -> pa.Table:
    schema = node.info.schema
    origin = transform.schema_origin
    batches = read_file(path, transform.format, schema, node.label, paths, origin)
    tables = [to_arrow(columns, schema, node.label) for columns in batches]
    return pa.concat_tables(tables) if tables else arrow_schema(schema).empty_table()


def source_epochs(node: Node, paths: Paths) -> Iterator[pa.Table]:
    """A source's rows by epoch, as Arrow, read and checked one epoch at a time: a
    TestStream's, one for a Create, and for ReadFiles one per file in name order
    (`streaming=True`, as the direct runner) or all files in one (read on the driver through
    `paths`)."""
    transform = node.transform
    schema, label = node.info.schema, node.label
    if isinstance(transform, (TestStreamSource, Create)):
        epochs = transform.epochs if isinstance(transform, TestStreamSource) else [transform.rows]
        for rows in epochs:
            yield to_arrow(rows_to_columns(rows, schema, label), schema, label)
        return
    assert isinstance(transform, ReadFiles)
    found = data_files(transform.path, label, paths)
    files = (_file_table(path, transform, node, paths) for path in found)
    if transform.streaming:
        yield from files
        return
    tables = list(files)
    yield pa.concat_tables(tables) if tables else arrow_schema(schema).empty_table()


_READER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sparkbeam-epochs")


class _Epochs:
    """One source's epochs as the reader publishes them; `get` waits for one."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.error: BaseException | None = None
        self.ready = threading.Condition()

    def publish(self, tables: Sequence[pa.Table], error: BaseException | None = None) -> None:
        with self.ready:
            self.tables.extend(tables)
            self.error = error
            self.ready.notify_all()

    def get(self, index: int) -> pa.Table:
        with self.ready:
            self.ready.wait_for(lambda: len(self.tables) > index or self.error is not None)
            if len(self.tables) > index:
                return self.tables[index]
            assert self.error is not None
            raise self.error


class SourceEpochs:
    """The replayed sources' epochs (`source_epochs`), read and checked once for all the
    queries that feed them (a run's stage queries and its final one; the runs `prepare` runs
    together), in the background while those queries start and run.

    With `whole`, every epoch of a source is read and checked before its first is
    fed, as on the direct runner: a bad row in the last epoch fails the run before
    a sink wrote anything. Without it (runs whose output is collected, where a
    failure returns nothing either way), epoch `i + 1` is read while the queries
    run epoch `i`.
    """

    def __init__(self, paths: Paths, whole: bool = True) -> None:
        self.paths = paths
        self.whole = whole
        self._epochs: dict[int, _Epochs] = {}
        self._lock = threading.Lock()

    def prefetch(self, node: Node) -> None:
        """Start reading `node`'s epochs, unless that started already."""
        with self._lock:
            if node.id in self._epochs:
                return
            epochs = self._epochs[node.id] = _Epochs()
        _READER.submit(self._read, node, epochs)

    def _read(self, node: Node, epochs: _Epochs) -> None:
        read: list[pa.Table] = []
        try:
            for table in source_epochs(node, self.paths):
                if self.whole:
                    read.append(table)
                else:
                    epochs.publish([table])
        except BaseException as exc:  # raised where the epoch is wanted
            epochs.publish([], exc)
            return
        epochs.publish(read)

    def epoch(self, node: Node, index: int) -> pa.Table:
        """Epoch `index` of `node`, waiting for it (raising what reading it raised)."""
        self.prefetch(node)
        return self._epochs[node.id].get(index)


def epoch_count(node: Node, paths: Paths) -> int:
    """How many epochs a replayed source has (`source_epochs`), without reading them."""
    transform = node.transform
    if isinstance(transform, TestStreamSource):
        return len(transform.epochs)
    if isinstance(transform, ReadFiles) and transform.streaming:
        return len(data_files(transform.path, node.label, paths))
    return 1


_PLACEHOLDERS: dict[type, Any] = {
    _dt.datetime: 0,
    int: 0,
    float: 0.0,
    str: "",
    bool: False,
    bytes: b"",
}


def put_sentinel(source: Channel, column: str, kind: type, time: int | None = None) -> None:
    """The row that ends the input: far in the future, and no column null, so that no
    `IS NOT NULL` the optimizer infers (from a join key, say) can stop it on its way to
    the watermark. With `time` (in the column's units), a marker row that lifts the
    watermark to what that time gives instead (an idle input, `StreamingRun`)."""
    columns: Columns = {
        name: [_PLACEHOLDERS.get(source.schema.type_of(name))] for name in source.schema.names
    }
    if time is None:
        time = FAR_FUTURE_INT if kind is int else FAR_FUTURE_MICROS
    columns[column] = [time]
    columns[SENTINEL] = [True]
    source.put(columns)


def open_feed(spark: SparkSession, directory: str, plan: QueryPlan, paths: Paths) -> EpochFeed:
    """The epoch feed of `plan`'s query, under `directory` (made there), its stream opened:
    the plan's channels, a sentinel's rows with the end-of-input flag (`SENTINEL`)."""
    channels = [
        (
            channel.key.name(),
            channel.schema.with_columns((SENTINEL, bool))
            if channel.key.kind == "sentinel"
            else channel.schema,
            channel.label,
        )
        for channel in plan.channels
    ]
    feed = EpochFeed(directory, channels, paths, plan.marks)
    feed.open(spark)
    return feed
