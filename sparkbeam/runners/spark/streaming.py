"""Unbounded input on Spark: one Structured Streaming query per collected PCollection.

How the model maps onto Spark (see also ENGINE-FACTS and the issue notes):

- **Epochs.** Each source (`TestStream`, and a `Create` in an unbounded
  pipeline) becomes a parquet file source; the runner writes one file per
  source for epoch `i` and calls `processAllAvailable()`, so Spark runs one
  data micro-batch for the epoch and then, when the watermark moved, a
  no-data batch: the model's end-of-epoch emission.
- **Watermarks.** `WithWatermark(c, delay)` is Spark's `withWatermark` (on `c`,
  or on `c` as milliseconds for an integer column), which computes exactly
  the model's `floor_to_ms(max) - delay`. Spark drops a row when
  `time <= watermark`; the model when `time < watermark`. So every stateful
  operator is keyed on a *judge* column instead of the time itself: for a
  column `v` whose model watermark is `wm`, a timestamp `J(v)` with
  `J(v) <= W` exactly when `v < wm`, `W` being Spark's watermark (for the
  event-time column itself `J(v) = v + 1 microsecond`; windows, shifts and
  truncations compose). The judge carries Spark's watermark metadata; the
  time column's own is removed.
- **Late rows** are dropped at the `WithWatermark` by a stateful
  deduplication keyed on a unique row id and the judge: Spark's own late-row
  filter, moved by one microsecond. `late_count` is the rows in minus the rows
  out of that operator (observed metrics).
- **End of input.** Spark never flushes open state. After the last epoch the
  runner feeds each `WithWatermark` a sentinel row far in the future (through
  a sentinel source unioned in before it and filtered out after it), which
  moves the watermark past everything: the model's end-of-input flush.
- **One watermark per query.** Spark keeps one watermark per query (the
  minimum over its `withWatermark`s). A query holds only the collected
  PCollection's ancestors, so branches that never meet never share one; a
  `Union` or `Join` of inputs watermarked by different `WithWatermark`s is
  refused, since Spark would judge each input's late rows against the
  slowest input's watermark.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.arrow import from_arrow, to_arrow
from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.runners.direct.alignment import AlignmentGraph
from sparkbeam.runners.direct.files import read_file
from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.late_filter import (
    Late,
    Steps,
    current_watermark_filter,
    late_against_current_watermark,
)
from sparkbeam.runners.spark.python_combine import combine_stream
from sparkbeam.runners.spark.session import session_stream
from sparkbeam.runners.spark.sort import sort_stream
from sparkbeam.runners.spark.translate import (
    TRANSLATORS,
    Translation,
    Translator,
    _aggregate,
    _long,
    connector_frame,
    file_options,
    files_schema,
    join_output,
    units,
)
from sparkbeam.schema import Columns, Schema, columns_to_rows, rows_to_columns
from sparkbeam.transforms.combine import AggregateFn, CombinePerKey
from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import INVALID, LATE_WATERMARK, DroppedRows
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Hop, Session, Tumble


@attrs.frozen
class Judge:
    """A column's judge: `J(v) = spark_time(v + offset)`, which Spark compares with `W`.

    Every rule of the model moves a watermark by a constant or floors it to an
    aligned grid, so every judge is the event time's own judge (`offset = 1`)
    moved by a constant: two columns with equal judges close at the same `W`.
    """

    kind: type
    offset: int
    steps: Steps = ()
    """How the column's model watermark follows from the event time's (`late_filter.mark`)."""

    def __call__(self, value: Column) -> Column:
        return _as_spark_time(_plus(value, self.kind, self.offset), self.kind)

    def moved(self, amount: int, *steps: tuple[str, int, int]) -> Judge:
        """The judge of `v` that this judge gives to `v + amount`; its watermark is this one's
        through `steps`."""
        return Judge(self.kind, self.offset + amount, (*self.steps, *steps))

    def late(self, column: str) -> Late:
        """How `late_filter` judges `column` by this judge and names its watermark."""
        shift = SHIFT_MICROS if self.kind is _dt.datetime else SHIFT_MICROS // 1000
        return Late(self(F.col(column)), column, self.kind is _dt.datetime, shift, self.steps)


WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"
SENTINEL = "__sparkbeam_end"
JUDGE = "__sparkbeam_judge"
ROW_ID = "__sparkbeam_row"
SHIFT_MICROS = (_dt.datetime(1970, 1, 1) - _dt.datetime(1, 1, 1)) // _dt.timedelta(microseconds=1)
"""Spark's watermark starts at 0 (1970) and never goes below it, so times before 1970 would
all look late: Spark sees every event time moved forward by this much (year 1 becomes 1970).
Event times after the year 8029 are out of Spark's range once shifted."""
FAR_FUTURE = _dt.datetime(8000, 1, 1)
FAR_FUTURE_INT = 100_000_000_000_000
"""The sentinels' times: beyond any real row, still a Spark timestamp once shifted."""

STATE_STORE = (
    "spark.sql.streaming.stateStore.providerClass",
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
)
"""transformWithState (`Sort`, the late-row filters, ...) needs the RocksDB state store: every
query starts with it (`Stage.start`)."""

ONE_WATERMARK = ("spark.sql.streaming.statefulOperator.allowMultiple", "false")
"""Spark's stateful operators drop late input by the previous batch's watermark (and evict
state by the current one), so that rows one operator emits are not late for the next. That
is the model's watermark only when a no-data batch runs between two data batches, as when
the runner feeds epochs; a live source with a backlog runs data batches back to back. With
this setting every operator judges by the current batch's watermark: exact for the
late-row filter and one operator after it (rows it passes lie above that watermark), wrong
for an operator after another (what the first emits would be late for the second)."""

MAX_POLICY = ("spark.sql.streaming.multipleWatermarkPolicy", "max")
"""Spark's watermark of a query is the latest of its `withWatermark`s' instead of the earliest:
`policy="max"` where watermarks of different `WithWatermark`s meet."""

_STARTING = threading.Lock()

STATELESS = (Map, Filter, Select, Tumble, Hop, WriteFiles, ForEachBatch)
"""`WriteFiles` and `ForEachBatch` pass their rows on; they write only as a query's sink."""


def _as_spark_time(value: Column, kind: type) -> Column:
    """A time value as the (shifted) Spark timestamp the watermark is kept in.

    Integer times are read as milliseconds, so Spark's millisecond watermark
    rounds nothing.
    """
    if kind is _dt.datetime:
        return F.timestamp_micros(F.unix_micros(value) + _long(SHIFT_MICROS))
    return F.timestamp_millis(value + _long(SHIFT_MICROS // 1000))


def _plus(value: Column, kind: type, amount: int) -> Column:
    if kind is _dt.datetime:
        return F.timestamp_micros(units(value, kind) + _long(amount))
    return value + _long(amount)


CHANNEL = "__sparkbeam_channel"


class Channel:
    """One input of a query (a source, a sentinel, an earlier stage's output) within its feed."""

    def __init__(self, index: int, name: str, schema: Schema, label: str) -> None:
        self.index = index
        self.name = name
        self.schema = schema
        self.label = label
        self.pending: Columns | None = None
        self.frame: DataFrame | None = None

    def column(self, name: str) -> str:
        return f"__c{self.index}_{name}"

    def put(self, columns: Columns) -> None:
        """This channel's rows for the epoch being fed."""
        self.pending = columns

    def put_rows(self, rows: Sequence[dict[str, Any]], label: str) -> None:
        self.put(rows_to_columns(rows, self.schema, label))


class EpochFeed:
    """All inputs of one query, as one directory Spark reads as a file stream.

    Each epoch is one parquet file holding the rows of every channel (a tag
    column says whose), written at once: Spark sees an epoch whole or not at
    all, so a micro-batch never holds part of one. Each channel's DataFrame
    is the one stream filtered by its tag (one source, read once per batch).
    """

    def __init__(self, directory: str, channels: Sequence[tuple[str, Schema, str]]) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.files = 0
        self.channels = {
            name: Channel(i, name, schema, label)
            for i, (name, schema, label) in enumerate(channels)
        }
        fields: list[tuple[str, type]] = [(CHANNEL, int)]
        for channel in self.channels.values():
            fields += [(channel.column(n), kind) for n, kind in channel.schema.fields]
        self.schema = Schema(tuple(fields))

    def open(self, spark: SparkSession) -> None:
        reader = spark.readStream.schema(spark_schema(self.schema, "input"))
        stream = reader.option("maxFilesPerTrigger", 1).parquet(self.directory)
        for channel in self.channels.values():
            channel.frame = stream.filter(F.col(CHANNEL) == channel.index).select(
                *(F.col(channel.column(n)).alias(n) for n in channel.schema.names)
            )

    def write(self) -> None:
        """One file with every channel's pending rows (possibly none)."""
        columns: Columns = {name: [] for name in self.schema.names}
        for channel in self.channels.values():
            pending, channel.pending = channel.pending, None
            size = len(next(iter(pending.values()), [])) if pending else 0
            if not size:
                continue
            assert pending is not None
            for name in self.schema.names:
                columns[name].extend([None] * size)
            columns[CHANNEL][-size:] = [channel.index] * size
            for name, values in pending.items():
                columns[channel.column(name)][-size:] = values
        table = to_arrow(columns, self.schema, "input")
        final = os.path.join(self.directory, f"epoch-{self.files:06d}.parquet")
        hidden = os.path.join(self.directory, f".epoch-{self.files:06d}.parquet.tmp")
        pq.write_table(table, hidden)
        os.replace(hidden, final)
        self.files += 1


class StreamingTranslation(Translation):
    """The streaming DataFrames of one query: the ancestors of one PCollection."""

    def __init__(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        directory: str,
        selected: set[int] | None = None,
        staged: set[int] | None = None,
        live: bool = False,
    ) -> None:
        super().__init__(spark, nodes)
        self.directory = directory
        self.live = live
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a production run)
        rather than replayed epoch by epoch (`collect`)."""
        self.late_filter = "dedup"
        """How `WithWatermark` drops late rows: a deduplication keyed on the judge, exact when
        it judges by the current batch's watermark; or "current", a pass-through
        `transformWithState` that compares with that watermark (`late_filter`)."""
        self.settings: dict[str, str] = dict([STATE_STORE])
        """Spark settings the query starts with: `STATE_STORE`, and `ONE_WATERMARK` (see
        `StreamingRun`) or `MAX_POLICY` (a `Union` with `policy="max"`)."""
        self.selected = set(range(len(nodes))) if selected is None else selected
        self.staged = staged or set()
        """`WithWatermark`s computed by an earlier stage: read their output instead."""
        channels: list[tuple[str, Schema, str]] = []
        for node in nodes:
            if node.id not in self.selected:
                continue
            if node.id in self.staged:
                channels.append((f"staged-{node.id}", node.info.schema, node.label))
            if is_replayed(node, live):
                channels.append((f"source-{node.id}", node.info.schema, node.label))
            if isinstance(node.transform, WithWatermark):
                with_flag = node.info.schema.with_columns((SENTINEL, bool))
                channels.append((f"sentinel-{node.id}", with_flag, node.label))
        self.feed = EpochFeed(directory, channels)
        self.feed.open(spark)
        self.sources: dict[int, Channel] = {}
        self.sentinels: dict[int, Channel] = {}
        self.judges: dict[int, dict[str, Judge]] = {}
        self.origins: dict[int, frozenset[int]] = {}
        """For each node, the `WithWatermark` nodes its watermarks come from."""
        self.policies: set[int] = set()
        """The `Union`s and `Join`s where watermarks of several `WithWatermark`s meet."""
        self.judged: dict[int, DataFrame] = {}
        """For each `WithWatermark`, its rows with their judge (`JUDGE`), before the filter."""
        self.late_frames: dict[int, DataFrame] = {}
        """For each `Union` and `Join` under `policy="max"`, the rows it drops as late."""
        self._epochs: dict[int, tuple[tuple[dict[str, Any], ...], ...]] = {}

    def epochs_of(self, node_id: int) -> tuple[tuple[dict[str, Any], ...], ...]:
        """A source's rows by epoch, read once, when the query first needs them."""
        if node_id not in self._epochs:
            self._epochs[node_id] = source_epochs(self.nodes[node_id])
        return self._epochs[node_id]

    def run(self) -> None:
        for node in self.nodes:
            if node.id not in self.selected:
                continue
            translate = STREAMING_TRANSLATORS.get(type(node.transform))
            if node.id in self.staged:
                translate = restamp
            if translate is None:
                raise PipelineError(
                    f"{node.label}: {type(node.transform).__name__} on unbounded input is not "
                    "supported by the Spark runner yet; run it on the direct runner"
                )
            inputs = [self.frames[i] for i in node.inputs if i in self.frames]
            self.origins[node.id] = frozenset().union(
                *(self.origins.get(i, frozenset()) for i in node.inputs)
            )
            frame = translate(self, node, inputs)
            if node.id not in self.staged:  # an earlier stage counts a staged node
                frame = observed(node, frame)
            self.frames[node.id] = frame
            if node.id not in self.judges:
                self.judges[node.id] = derive_judges(self, node)

    def merge_policy(self, node: Node, policy: str) -> None:
        """Note that watermarks of several `WithWatermark`s meet at `node` under `policy`:
        Spark keeps one watermark per query, so all such merges must have one policy."""
        chosen = self.settings.get(MAX_POLICY[0], "min")
        if self.policies and policy != chosen:
            raise PipelineError(
                f"{node.label}: policy={policy!r} meets policy={chosen!r} of another Union or "
                "Join in the same query; Spark keeps one watermark per query, the earliest or "
                "the latest of its inputs: give them the same policy"
            )
        self.policies.add(node.id)
        if policy == "max":
            self.settings[MAX_POLICY[0]] = MAX_POLICY[1]

    def input_judges(self, node: Node, port: int = 0) -> dict[str, Judge]:
        return self.judges[node.inputs[port]]

    def channel(self, name: str) -> Channel:
        return self.feed.channels[name]

    def frame(self, name: str) -> DataFrame:
        frame = self.feed.channels[name].frame
        assert frame is not None
        return frame


STREAMING_TRANSLATORS: dict[type, Translator] = {kind: TRANSLATORS[kind] for kind in STATELESS}


def streaming(kind: type) -> Callable[[Translator], Translator]:
    def register(function: Translator) -> Translator:
        STREAMING_TRANSLATORS[kind] = function
        return function

    return register


def _streaming(translation: Translation) -> StreamingTranslation:
    assert isinstance(translation, StreamingTranslation)
    return translation


def _file_rows(path: str, transform: ReadFiles, node: Node) -> tuple[dict[str, Any], ...]:
    schema = node.info.schema
    chunks = read_file(path, transform.format, schema, node.label)
    return tuple(row for chunk in chunks for row in columns_to_rows(chunk.columns, schema))


def source_epochs(node: Node) -> tuple[tuple[dict[str, Any], ...], ...]:
    """A source's rows by epoch: a TestStream's, one for a Create, and for ReadFiles one per
    file in name order (`streaming=True`, as the direct runner) or all files in one."""
    transform = node.transform
    epochs: Sequence[Sequence[dict[str, Any]]]
    if isinstance(transform, TestStreamSource):
        epochs = transform.epochs
    elif isinstance(transform, ReadFiles):
        paths = data_files(transform.path, node.label)
        files = [_file_rows(path, transform, node) for path in paths]
        epochs = files if transform.streaming else [[row for rows in files for row in rows]]
    else:
        assert isinstance(transform, Create)
        epochs = (transform.rows,)
    return tuple(tuple(epoch) for epoch in epochs)


def epoch_count(node: Node) -> int:
    """How many epochs a replayed source has (`source_epochs`), without reading them."""
    transform = node.transform
    if isinstance(transform, TestStreamSource):
        return len(transform.epochs)
    if isinstance(transform, ReadFiles) and transform.streaming:
        return len(data_files(transform.path, node.label))
    return 1


def is_replayed(node: Node, live: bool) -> bool:
    """Whether the runner feeds this source's epochs itself (a source with an end)."""
    transform = node.transform
    if isinstance(transform, ReadFiles):
        return not (live and transform.streaming)
    return isinstance(transform, (TestStreamSource, Create))


def is_live(node: Node, live: bool) -> bool:
    """Whether Spark reads this source itself (a source with no end)."""
    transform = node.transform
    return isinstance(transform, ReadFromSpark) or (
        live and isinstance(transform, ReadFiles) and transform.streaming
    )


@streaming(TestStreamSource)
@streaming(Create)
@streaming(ReadFiles)
def epoch_source(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """A source's channel; its rows are read only when the query runs (`source_epochs`)."""
    run = _streaming(translation)
    if not is_replayed(node, run.live):
        return live_files(run, node)
    run.sources[node.id] = run.channel(f"source-{node.id}")
    return run.frame(f"source-{node.id}")


def live_files(run: StreamingTranslation, node: Node) -> DataFrame:
    """`ReadFiles(streaming=True)` in a production run: Spark's file source on the directory,
    one new file per micro-batch (an epoch, as on the direct runner). Spark takes new
    files in the order of their modification times; the direct runner in name order.
    CSV columns are read in the header order of the first file there at the start."""
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    files = data_files(transform.path, node.label)
    schema = files_schema(transform.format, files, node.info.schema, node.label)
    reader = run.spark.readStream.format(transform.format)
    reader = reader.schema(spark_schema(schema, node.label))
    options = {**file_options(transform.format, write=False), "maxFilesPerTrigger": "1"}
    return connector_frame(reader.options(**options).load(transform.path), node)


@streaming(ReadFromSpark)
def read_from_spark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, ReadFromSpark)
    if transform.bounded:
        raise PipelineError(
            f"{node.label}: a bounded ReadFromSpark cannot feed an unbounded pipeline on Spark; "
            "read it with bounded=False, or run its part of the pipeline as a batch job"
        )
    return TRANSLATORS[ReadFromSpark](translation, node, inputs)


@streaming(WithWatermark)
def with_watermark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    if transform.emit != "periodic":
        raise PipelineError(
            f"{node.label}: emit={transform.emit!r} raises the watermark after every row, but "
            "Spark raises it once per micro-batch; use emit='periodic' on the Spark runner"
        )
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    delay = transform.delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay

    real = _declare_watermark(run, node, inputs[0], counted=True)
    time = F.col(column)
    judge = own_judge(kind)
    marked = stateful(real, [judge(time)], delay_ms)
    run.judged[node.id] = marked
    if run.late_filter == "current":
        filtered = current_watermark_filter(marked, schema, [F.col(JUDGE)], node.label)
    else:
        kept = marked.withColumn(ROW_ID, F.expr("uuid()"))
        filtered = kept.dropDuplicates([ROW_ID, JUDGE]).drop(ROW_ID, JUDGE)
    return filtered.observe(f"out_{node.id}", F.count(F.lit(1)).alias("rows"))


def _declare_watermark(
    run: StreamingTranslation, node: Node, frame: DataFrame, counted: bool
) -> DataFrame:
    """Spark's watermark for a `WithWatermark` node over `frame`, with the end-of-input sentinel.

    Rows with no event time are dropped (counted as invalid when `counted`).
    Sets the node's judges and origin.
    """
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    delay = transform.delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay
    run.sentinels[node.id] = run.channel(f"sentinel-{node.id}")
    sentinel = run.frame(f"sentinel-{node.id}")
    events = frame.withColumn(SENTINEL, F.lit(False)).unionByName(sentinel)
    time = F.col(column)
    if counted:
        run.invalid[node.id] = frame.filter(time.isNull())
        events = events.observe(
            f"in_{node.id}",
            F.count(F.when(~F.col(SENTINEL) & time.isNotNull(), 1)).alias("rows"),
            F.count(F.when(time.isNull(), 1)).alias("invalid"),
        )
    spark_time = "__sparkbeam_event_time"
    marked = (
        events.filter(time.isNotNull())
        .withColumn(spark_time, _as_spark_time(time, kind))
        .withWatermark(spark_time, f"{delay_ms} milliseconds")
    )
    # One conjunct that names the event time, so the optimizer cannot push it below
    # the watermark (the sentinel must reach the watermark's statistics).
    not_sentinel = ~F.col(SENTINEL) | F.col(spark_time).isNull()
    upstream = run.judges.get(node.inputs[0], {})
    run.judges[node.id] = {column: own_judge(kind), **_pass_through(upstream, {column})}
    run.origins[node.id] = run.origins[node.id] | {node.id}
    return marked.filter(not_sentinel).drop(SENTINEL, spark_time)


def restamp(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """A `WithWatermark` an earlier stage ran: its surviving rows, with the same watermark."""
    run = _streaming(translation)
    return _declare_watermark(run, node, run.frame(f"staged-{node.id}"), counted=False)


def own_judge(kind: type) -> Judge:
    return Judge(kind, 1)


def stateful(frame: DataFrame, judges: Sequence[Column], delay_ms: int = 0) -> DataFrame:
    """`frame` with the judge column Spark's stateful operators key their watermark on."""
    judge = judges[0] if len(judges) == 1 else F.least(*judges)
    return frame.withColumn(JUDGE, judge.alias(JUDGE, metadata={WATERMARK_DELAY_KEY: delay_ms}))


def _pass_through(judges: dict[str, Judge], skip: set[str]) -> dict[str, Judge]:
    return {column: judge for column, judge in judges.items() if column not in skip}


def derive_judges(run: StreamingTranslation, node: Node) -> dict[str, Judge]:
    """The judges of a stateless node's output, by its watermark-derivation rule."""
    transform = node.transform
    if not node.inputs:
        return {}
    judges = run.input_judges(node)
    schema = run.nodes[node.inputs[0]].info.schema
    if isinstance(transform, (Filter, WriteFiles, ForEachBatch)):
        return dict(judges)
    if isinstance(transform, Map):
        return {c: j for c, j in judges.items() if c in transform.keeps}
    if isinstance(transform, (Tumble, Hop)):
        spec = transform.spec(schema, node.label)
        base = judges.get(transform.column)
        if base is None:
            return dict(judges)
        out = _pass_through(judges, set())
        # The earliest window start of a watermark `wm`: floor(wm - size, slide) + slide.
        start = (("add", -spec.size, 0), ("floor", spec.slide, spec.offset), ("add", spec.slide, 0))
        out[WINDOW_START] = base.moved(spec.size - 1, *start)
        out[WINDOW_END] = base.moved(-1, *start, ("add", spec.size, 0))
        return out
    if isinstance(transform, Select):
        out = {}
        for name, bound in transform.bind(schema, node.label):
            if bound.source in judges:
                out[name] = _select_judge(judges[bound.source], bound.steps)
        return out
    if isinstance(transform, Union):
        common = set.intersection(*(set(run.judges[i]) for i in node.inputs))
        return {
            column: _greatest([run.judges[i][column] for i in node.inputs]) for column in common
        }
    if isinstance(transform, CombinePerKey):
        return {c: j for c, j in judges.items() if c in transform.keys}
    return {}


def _greatest(judges: list[Judge]) -> Judge:
    """The judge of the minimum of several watermarks: the latest of their judges."""
    return max(judges, key=lambda judge: judge.offset)


def _select_judge(base: Judge, steps: tuple[tuple[str, int], ...]) -> Judge:
    judge = base
    for step, amount in steps:
        if step == "shift":
            judge = judge.moved(-amount, ("add", amount, 0))
        else:
            judge = judge.moved(amount - 1, ("floor", amount, 0))
    return judge


@streaming(CombinePerKey)
def combine_per_key(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    judges = run.input_judges(node)
    keyed = [judges[k](F.col(k)) for k in transform.keys if k in judges]
    frame = stateful(inputs[0], keyed)
    if not all(isinstance(a, AggregateFn) for _, a in transform.aggregates):
        # Spark refuses Python aggregates in streaming aggregations: keyed state instead.
        run.judges[node.id] = {c: j for c, j in judges.items() if c in transform.keys}
        in_schema = run.nodes[node.inputs[0]].info.schema
        return combine_stream(
            frame,
            in_schema,
            node.info.schema,
            transform.keys,
            transform.aggregates,
            JUDGE,
            node.label,
        )
    aggregates = [_aggregate(a).alias(name) for name, a in transform.aggregates]
    grouped = frame.groupBy(*transform.keys, JUDGE).agg(*aggregates).drop(JUDGE)
    run.judges[node.id] = {c: j for c, j in judges.items() if c in transform.keys}
    return grouped


@streaming(Sort)
def sort(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Sort)
    judge = run.input_judges(node)[transform.column]
    frame = stateful(inputs[0], [judge(F.col(transform.column))])
    schema = node.info.schema
    out = sort_stream(frame, schema, transform.column, transform.keys, JUDGE, node.label)
    run.judges[node.id] = {transform.column: judge}
    return out


def may_idle(run: StreamingTranslation, node: Node) -> bool:
    """Whether an input of `node` comes from a `WithWatermark` with `idle_after` (epochs)."""
    for origin in run.origins[node.id]:
        transform = run.nodes[origin].transform
        if isinstance(transform, WithWatermark) and transform.idle_after is not None:
            return True
    return False


def require_separable_origins(run: StreamingTranslation, node: Node) -> None:
    """Refuse a merge of watermarks from `WithWatermark`s chained one after the other.

    Merges of independent `WithWatermark`s run as one stage query per origin
    (`StreamingRun`); a `WithWatermark` downstream of another cannot be cut
    out that way.
    """
    origins = frozenset().union(*(run.origins[i] for i in node.inputs))
    nested = [o for o in origins if any(o in run.origins[p] for p in origins if p != o)]
    if len(origins) > 1 and nested:
        raise PipelineError(
            f"{node.label}: its inputs carry watermarks of WithWatermark transforms chained "
            "one after another; Spark keeps one watermark per query, so the Spark runner "
            "cannot judge their late rows apart. Keep one WithWatermark per input branch"
        )


def _judged_sides(
    run: StreamingTranslation,
    node: Node,
    left: DataFrame,
    right: DataFrame,
    judges: list[dict[str, Judge]],
    window_keys: Sequence[str],
) -> tuple[DataFrame, DataFrame]:
    """A join's sides under `policy="max"` or with an idle input: the rows not below Spark's
    watermark on a window key; the others go to its late rows, laid out as unmatched rows."""
    transform = node.transform
    assert isinstance(transform, Join)
    if not window_keys:
        raise PipelineError(
            f"{node.label}: policy='max' or an idle input (idle_after) at a Join with no "
            "window key (a column of `on` watermarked on both sides) is not supported by the "
            "Spark runner on unbounded input (Spark cleans an interval join's state by the "
            "query's one watermark, the model by each side's own); join on a window key, or "
            "use policy='min' without idle_after"
        )
    schemas = [run.nodes[i].info.schema for i in node.inputs]
    for key in window_keys:
        if judges[0][key] != judges[1][key]:
            raise PipelineError(
                f"{node.label}: {key!r} is derived differently on the two sides (different "
                "window sizes or shifts), so Spark's one watermark cannot judge its rows under "
                "policy='max' or with an idle input; derive it alike on both sides"
            )
    prefixed = [
        Schema(tuple((f"__{side}_{name}", kind) for name, kind in schema.fields))
        for side, schema in zip("lr", schemas, strict=True)
    ]
    kept, late_rows = [], []
    for port, frame in enumerate((left, right)):
        frame = frame.observe(f"in_{node.id}_{port}", F.count(F.lit(1)).alias("rows"))
        side = "lr"[port]
        late = [judges[port][key].late(f"__{side}_{key}") for key in window_keys]
        kind = schemas[port].type_of(window_keys[0])
        output = prefixed[port].with_columns((LATE_WATERMARK, kind))
        judged = [entry.judge for entry in late]
        passed = current_watermark_filter(frame, prefixed[port], judged, node.label)
        kept.append(passed.observe(f"out_{node.id}_{port}", F.count(F.lit(1)).alias("rows")))
        rows = late_against_current_watermark(frame, prefixed[port], late, output, node.label)
        other = prefixed[1 - port]
        types = spark_schema(other, node.label)
        for field in types.fields:
            rows = rows.withColumn(field.name, F.lit(None).cast(field.dataType))
        unmatched = join_output(transform, schemas[0], schemas[1], node.label)
        late_rows.append(rows.select(*unmatched, LATE_WATERMARK))
    run.late_frames[node.id] = late_rows[0].unionByName(late_rows[1])
    return kept[0], kept[1]


def _interval(amount: int, kind: type) -> Column:
    """A day-time interval literal: `amount` microseconds (datetime) or milliseconds (int)."""
    micros = amount if kind is _dt.datetime else amount * 1000
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return F.expr(f"INTERVAL '{sign}{seconds}.{fraction:06d}' SECOND")


@streaming(Join)
def join(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """A stream-stream join; Spark cleans its state by the judge of a window key on both
    sides (their judges must agree), or by a range on the judges of the interval times."""
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Join)
    require_separable_origins(run, node)
    if len(run.origins[node.id]) > 1:
        run.merge_policy(node, transform.policy)
    left_info, right_info = (run.nodes[i].info for i in node.inputs)
    judges = [run.judges[i] for i in node.inputs]
    left = inputs[0].select([F.col(n).alias(f"__l_{n}") for n in left_info.schema.names])
    right = inputs[1].select([F.col(n).alias(f"__r_{n}") for n in right_info.schema.names])
    condition = functools.reduce(
        lambda a, b: a & b, [F.col(f"__l_{k}") == F.col(f"__r_{k}") for k in transform.on]
    )
    window_keys = transform.window_keys(left_info, right_info)
    bounds = transform.interval_bounds(left_info.schema, right_info.schema, node.label)
    if len(run.origins[node.id]) > 1 and (transform.policy == "max" or may_idle(run, node)):
        left, right = _judged_sides(run, node, left, right, judges, window_keys)

    def marked(frame: DataFrame, name: str, judge: Judge, column: str) -> DataFrame:
        value = judge(F.col(column)).alias(name, metadata={WATERMARK_DELAY_KEY: 0})
        return frame.withColumn(name, value)

    if window_keys:
        key = window_keys[0]
        if judges[0][key] != judges[1][key]:
            raise PipelineError(
                f"{node.label}: {key!r} is derived differently on the two sides (different "
                "window sizes or shifts), so Spark cannot clean the join's state by it; derive "
                "it alike on both sides"
            )
        left = marked(left, "__l_judge", judges[0][key], f"__l_{key}")
        right = marked(right, "__r_judge", judges[1][key], f"__r_{key}")
        condition = condition & (F.col("__l_judge") == F.col("__r_judge"))
    elif bounds is not None and transform.times is not None:
        left_time, right_time = transform.times
        lj, rj = judges[0][left_time], judges[1][right_time]
        kind = left_info.schema.type_of(left_time)
        left = marked(left, "__l_judge", lj, f"__l_{left_time}")
        right = marked(right, "__r_judge", rj, f"__r_{right_time}")
        skew = rj.offset - lj.offset
        lower, upper = bounds[0] + skew, bounds[1] + skew
        condition = (
            condition
            & (F.col("__r_judge") >= F.col("__l_judge") + _interval(lower, kind))
            & (F.col("__r_judge") <= F.col("__l_judge") + _interval(upper, kind))
        )
    how = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}
    joined = left.join(right, condition, how[transform.how])
    run.judges[node.id] = {key: judges[0][key] for key in window_keys}
    return joined.select(*join_output(transform, left_info.schema, right_info.schema, node.label))


@streaming(Session)
def session(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Session)
    schema = run.nodes[node.inputs[0]].info.schema
    judge = run.input_judges(node)[transform.column]
    gap = transform.gap_units(schema, node.label)
    frame = stateful(inputs[0], [judge(F.col(transform.column))])
    out = session_stream(frame, schema, transform.column, gap, transform.keys, judge, node.label)
    # W(window_end, t): a window end v is released when v < t, as the time column itself.
    run.judges[node.id] = {WINDOW_END: judge}
    return out


@streaming(Union)
def union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """Under `policy="max"` with watermarks of several `WithWatermark`s, the query keeps the
    latest of them (`MAX_POLICY`): the rows below it on a watermarked column are late here,
    judged against the current batch's watermark (`late_filter`)."""
    run = _streaming(translation)
    require_separable_origins(run, node)
    merged = TRANSLATORS[Union](translation, node, inputs)
    transform = node.transform
    assert isinstance(transform, Union)
    if len(run.origins[node.id]) < 2:
        return merged  # the latest of one watermark is the earliest: no row is late here
    run.merge_policy(node, transform.policy)
    if transform.policy == "min" and not may_idle(run, node):
        return merged
    judges = {}
    for column in sorted(node.info.watermarked):
        inputs_judges = {run.judges[i][column] for i in node.inputs}
        if len(inputs_judges) > 1:
            raise PipelineError(
                f"{node.label}: {column!r} is derived differently on its inputs (different "
                "windows, shifts or truncations), so under policy='max' or with an idle input "
                "Spark's one watermark cannot judge its rows; derive it alike on every input"
            )
        judges[column] = inputs_judges.pop()
    run.judges[node.id] = judges
    schema = node.info.schema
    late = [judges[column].late(column) for column in schema.names if column in judges]
    output = schema.with_columns((LATE_WATERMARK, schema.type_of(late[0].column)))
    run.late_frames[node.id] = late_against_current_watermark(
        merged, schema, late, output, node.label
    )
    counted = merged.observe(f"in_{node.id}", F.count(F.lit(1)).alias("rows"))
    kept = current_watermark_filter(counted, schema, [entry.judge for entry in late], node.label)
    return kept.observe(f"out_{node.id}", F.count(F.lit(1)).alias("rows"))


@streaming(DroppedRows)
def dropped_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """Invalid rows: the `WithWatermark`'s input rows with no event time. Late rows: the rows
    its filter (or a `Union`'s under `policy="max"`) drops, judged the same way."""
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, DroppedRows)
    source = run.nodes[node.inputs[0]]
    if source.id in run.staged:
        raise PipelineError(
            f"{node.label}: the rows {source.label} drops meet the watermark of another "
            "WithWatermark in this query, which Spark would judge them by; collect or write "
            "each WithWatermark's dropped rows on their own"
        )
    if transform.kind == INVALID:
        return run.invalid[source.id]
    run.judges[node.id] = {}
    schema = node.info.schema
    if isinstance(source.transform, WithWatermark):
        column = source.transform.column
        judge = own_judge(source.info.schema.type_of(column))
        late = [attrs.evolve(judge.late(column), judge=F.col(JUDGE))]
        frame = run.judged[source.id]
    elif source.id in run.late_frames:
        return run.late_frames[source.id]
    else:  # policy="min" (the only policy of a Join on Spark streaming): nothing is late
        kind = spark_schema(schema, node.label)[LATE_WATERMARK].dataType
        return inputs[0].filter(F.lit(False)).withColumn(LATE_WATERMARK, F.lit(None).cast(kind))
    return late_against_current_watermark(frame, source.info.schema, late, schema, node.label)


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
        time = (
            FAR_FUTURE_INT
            if kind is int
            else (FAR_FUTURE - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1)
        )
    columns[column] = [time]
    columns[SENTINEL] = [True]
    source.put(columns)


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
            fn(rows, batch_id)

    return lambda frame: frame.writeStream.foreachBatch(call)


def sink_of(node: Node) -> Sink:
    return file_sink(node) if isinstance(node.transform, WriteFiles) else callback_sink(node)


class Stage:
    """One streaming query: the ancestors of `target`, with a sink that keeps each epoch's rows
    (or the production `sink`: files, or the user's callback).

    With `output`, the rows of each epoch also go to that channel of a later
    stage's feed.
    """

    def __init__(
        self,
        translation: StreamingTranslation,
        target: Node,
        output: Channel | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.translation = translation
        self.target = target
        self.output = output
        self.sink = sink
        self.tables: list[pa.Table] = []
        self.epochs: list[list[dict[str, Any]]] = []
        self.metrics: dict[str, int] = {}
        self.counted: dict[str, int] = {}
        """The observed metrics of the last epoch's micro-batches."""
        self.latest: int | None = None
        """The latest event time (in units) among the rows emitted, for a `WithWatermark`."""
        self.seen_batches: set[int] = set()
        self.watermark_ms: int | None = None
        """Spark's watermark after the last epoch before the end of input (`record_watermark`)."""
        self.query: Any = None

    def start(self, checkpoint: str, trigger: str | None = None) -> None:
        tables = self.tables

        def keep(batch: DataFrame, batch_id: int) -> None:
            tables.append(batch.toArrow())

        frame = self.translation.frames[self.target.id]
        if self.sink is None:
            writer = frame.writeStream.foreachBatch(keep)
        else:
            writer = self.sink(frame.select(*self.target.info.schema.names))
        writer = writer.outputMode("append").option("checkpointLocation", checkpoint)
        if trigger is not None:
            writer = writer.trigger(processingTime=trigger)
        # A query keeps the session's settings as it starts: set this query's only while it
        # starts, and start one query at a time (`prepare` starts them from several threads).
        conf = self.translation.spark.conf
        with _STARTING:
            before = {key: conf.get(key, None) for key in self.translation.settings}
            for key, value in self.translation.settings.items():
                conf.set(key, value)
            try:
                self.query = writer.start()
            finally:
                for key, old in before.items():
                    if old is None:
                        conf.unset(key)
                    else:
                        conf.set(key, old)

    def feed(self, reads: dict[int, int] | None) -> None:
        """Write the next epoch's file: source `s`'s epoch `reads[s]` (a source not in `reads`
        brings no rows), or with `reads=None` the end of input."""
        translation = self.translation
        if reads is not None:
            for node_id, source in translation.sources.items():
                if node_id in reads:
                    rows = translation.epochs_of(node_id)[reads[node_id]]
                    source.put_rows(rows, translation.nodes[node_id].label)
        else:
            for node_id, sentinel in translation.sentinels.items():
                node = translation.nodes[node_id]
                transform = node.transform
                assert isinstance(transform, WithWatermark)
                put_sentinel(sentinel, transform.column, node.info.schema.type_of(transform.column))
        translation.feed.write()

    def process(self) -> None:
        """Run every micro-batch the new files allow; keep their rows as one epoch."""
        schema = self.target.info.schema
        start = len(self.tables)
        self.query.processAllAvailable()
        columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        for table in self.tables[start:]:
            for name, values in from_arrow(table, schema).items():
                columns[name].extend(values)
        self.epochs.append(columns_to_rows(columns, schema))
        if self.output is not None:
            self.output.put(columns)
        transform = self.target.transform
        if isinstance(transform, WithWatermark):
            # columns hold times in their units (datetimes as microseconds)
            times = [v for v in columns[transform.column] if v is not None]
            if times:
                self.latest = max(times) if self.latest is None else max(self.latest, *times)
        self.counted = self.collect_metrics()

    def collect_metrics(self) -> dict[str, int]:
        """Add up the observed metrics of the micro-batches not counted yet (and return them)."""
        counted: dict[str, int] = {}
        for progress in self.query.recentProgress:
            # A trigger that found nothing to run reports the next batch's id with no
            # observed metrics, before that batch reports its own: count only batches run.
            observed = progress.get("observedMetrics")
            if not observed or progress["batchId"] in self.seen_batches:
                continue
            self.seen_batches.add(progress["batchId"])
            for name, metric in observed.items():
                for field, value in metric.asDict().items():
                    key = f"{name}.{field}"
                    if field.startswith(LATEST):  # the largest value so far (None: no rows)
                        if value is not None:
                            before = self.metrics.get(key)
                            self.metrics[key] = value if before is None else max(before, value)
                        continue
                    self.metrics[key] = self.metrics.get(key, 0) + int(value)
                    counted[key] = counted.get(key, 0) + int(value)
        return counted

    def record_watermark(self) -> None:
        """Keep Spark's watermark after the epoch just run (milliseconds of Spark time)."""
        progress = self.query.lastProgress or {}
        text = (progress.get("eventTime") or {}).get("watermark")
        if text:
            moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
            self.watermark_ms = (moment - epoch) // _dt.timedelta(milliseconds=1)


class StreamingRun:
    """Runs the queries of one PCollection epoch by epoch and keeps what each epoch emitted.

    Spark keeps one watermark per query. When watermarks of different
    `WithWatermark`s meet (a `Union` or `Join`), each of those runs as its own
    stage query, so its late rows are judged against its own watermark; its
    output is fed, epoch by epoch, to the final query, which declares the same
    watermark again on the surviving rows (their maximum is the same, since
    late rows lie below the watermark) and takes the minimum where they meet.

    With a production `sink` (`WriteFiles`, `ForEachBatch`) the final query
    writes there instead. With `live`, `ReadFiles(streaming=True)` is Spark's
    own file source; a query that reads a live source (that or a
    `ReadFromSpark`) is started and left running (`stop` ends it), with its
    checkpoint and state under `directory`, so that a query started again on
    the same directory goes on where the last one stopped.
    """

    def __init__(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        target: Node,
        sink: Sink | None = None,
        directory: str | None = None,
        live: bool = False,
        trigger: str | None = None,
    ) -> None:
        self.spark = spark
        self.trigger = trigger
        self.live_run = live
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a run with sinks)."""
        upstream = ancestors(nodes, target)
        live_sources = [nodes[n].label for n in sorted(upstream) if is_live(nodes[n], live)]
        replayed = [nodes[n].label for n in sorted(upstream) if is_replayed(nodes[n], live)]
        self.live = bool(live_sources)
        self.keep = directory is not None and self.live
        """A replayed run always starts afresh: its checkpoint is temporary."""
        self.directory = (
            directory
            if directory is not None and self.live
            else tempfile.mkdtemp(prefix="sparkbeam-stream-")
        )
        self.resumed = self.keep and os.path.exists(os.path.join(self.directory, "checkpoint-0"))
        """Whether the query goes on from the checkpoint of an earlier one."""
        if live_sources and sink is None:
            raise PipelineError(
                f"{target.label}: reads {live_sources[0]}, a source with no end that the Spark "
                "runner cannot replay for collect; send its rows to a sink (WriteFiles or "
                "ForEachBatch) and run the pipeline, or test it with a TestStream"
            )
        if live_sources and replayed:
            raise PipelineError(
                f"{target.label}: reads {live_sources[0]} (Spark reads it as it grows) and "
                f"{replayed[0]} (replayed epoch by epoch) in one query; Spark cannot line their "
                "epochs up: read both through Spark (ReadFiles(streaming=True), ReadFromSpark)"
            )
        origins = [n for n in sorted(upstream) if isinstance(nodes[n].transform, WithWatermark)]
        staged = set(origins) if _origins_meet(nodes, upstream) else set()
        if live_sources and staged:
            raise PipelineError(
                f"{target.label}: watermarks of different WithWatermark transforms meet in a "
                "Union or Join; the Spark runner runs such pipelines only over sources it "
                "replays (TestStream, ReadFiles collected), not over live ones yet"
            )
        needed = ancestors(nodes, target, stop=staged)
        final = StreamingTranslation(
            spark, nodes, os.path.join(self.directory, "final"), needed, staged, live
        )
        self.stages: list[Stage] = []
        for origin in sorted(staged):
            node = nodes[origin]
            directory = os.path.join(self.directory, f"stage-{origin}")
            translation = StreamingTranslation(spark, nodes, directory, ancestors(nodes, node))
            self.stages.append(Stage(translation, node, final.channel(f"staged-{origin}")))
        if self.live:
            # Back-to-back batches: judge late rows by the current batch's watermark.
            if _stateful_depth(nodes, needed) <= 2:
                # the filter and at most one operator after it
                final.settings[ONE_WATERMARK[0]] = ONE_WATERMARK[1]
            else:
                final.late_filter = "current"
        self.alignment = AlignmentGraph.of(nodes)
        """Watermark alignment (`max_drift`): which sources to hold back after each epoch."""
        if self.alignment is not None:
            self._shadow_stages(spark, nodes, live_sources, staged | needed)
        self.final = Stage(final, target, sink=sink)
        self.stages.append(self.final)

    def _shadow_stages(
        self, spark: SparkSession, nodes: Sequence[Node], live: list[str], observed: set[int]
    ) -> None:
        """A stage query for each `WithWatermark` of the alignment this run's queries do not
        hold: its watermark decides which sources are held back, as on the direct runner."""
        assert self.alignment is not None
        drifting = [nodes[o] for o in sorted(self.alignment.drift)]
        if live:
            raise PipelineError(
                f"{drifting[0].label}: max_drift holds back a source's epochs, which the Spark "
                f"runner can do only for sources it replays (TestStream, Create, ReadFiles "
                f"collected); {live[0]} is read by Spark itself. Drop max_drift, or run the "
                "pipeline on the direct runner"
            )
        idle = [
            n for n in nodes if isinstance(n.transform, WithWatermark) and n.transform.idle_after
        ]
        if idle:
            raise PipelineError(
                f"{drifting[0].label}: max_drift together with idle_after ({idle[0].label}) is "
                "not supported by the Spark runner yet; use one of them, or run the pipeline "
                "on the direct runner"
            )
        group = set(self.alignment.drift).union(*self.alignment.peers.values())
        for origin in sorted(group - observed):
            node = nodes[origin]
            directory = os.path.join(self.directory, f"shadow-{origin}")
            translation = StreamingTranslation(spark, nodes, directory, ancestors(nodes, node))
            self.stages.append(Stage(translation, node))

    def _watermark(self, origin: int) -> int | None:
        """The model's watermark of `origin` (a `WithWatermark`) after the epochs run so far."""
        node = self.final.translation.nodes[origin]
        transform = node.transform
        assert isinstance(transform, WithWatermark)
        index = sorted(node.info.watermarked).index(transform.column)
        for stage in self.stages:
            latest = stage.metrics.get(f"n_{origin}.{LATEST}_{index}")
            if latest is not None:
                return transform.watermark_function(node.info.schema)(latest)
        return None

    @property
    def epochs(self) -> list[list[dict[str, Any]]]:
        return self.final.epochs

    @property
    def metrics(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for stage in self.stages:
            if self.live:
                stage.collect_metrics()
            for key, value in stage.metrics.items():
                merged[key] = merged.get(key, 0) + value
        return merged

    def watermarks(self) -> dict[int, tuple[int, dict[str, Judge]]]:
        """For each node a stage query counts: Spark's watermark there (after the last epoch
        before the end of input; a live query's now) and its columns' judges."""
        out: dict[int, tuple[int, dict[str, Judge]]] = {}
        for stage in self.stages:
            if self.live:
                stage.record_watermark()
            if not stage.watermark_ms:  # none yet (Spark's starts at 0)
                continue
            translation = stage.translation
            for node_id in translation.selected - translation.staged:
                out[node_id] = (stage.watermark_ms, translation.judges.get(node_id, {}))
        return out

    def translate(self) -> None:
        for stage in self.stages:
            stage.translation.run()

    def execute(self) -> None:
        """Replayed sources: every epoch, the end-of-input flush, then stop. Live: start."""
        try:
            for index, stage in enumerate(self.stages):
                stage.start(os.path.join(self.directory, f"checkpoint-{index}"), self.trigger)
            if self.live:
                return
            # As many epochs as the pipeline's longest source, as on the direct runner, also
            # where that source is not one of this query's; more where sources are held back.
            nodes = self.final.translation.nodes
            counts = {n.id: epoch_count(n) for n in nodes if is_replayed(n, self.live_run)}
            read = dict.fromkeys(counts, 0)
            held: set[int] = set()
            idle = IdleInputs(self.stages[:-1], self.final.translation)
            while any(read[s] < counts[s] for s in counts):
                reads = {s: read[s] for s in counts if s not in held and read[s] < counts[s]}
                for stage in self.stages:
                    if stage is self.final:
                        idle.mark()
                    stage.feed(reads)
                    stage.process()
                    stage.record_watermark()
                for source in reads:
                    read[source] += 1
                if self.alignment is not None:
                    running = {s for s in counts if read[s] < counts[s]}
                    held = self.alignment.held(running, self._watermark, lambda origin: False)
            for stage in self.stages:
                stage.feed(None)
                stage.process()
        except BaseException:
            self.stop()
            raise
        self.stop()

    def stop(self) -> None:
        for stage in self.stages:
            if stage.query is not None:
                stage.query.stop()
        if not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)


class IdleInputs:
    """`WithWatermark(idle_after=n)` where watermarks meet: which stage queries' inputs are
    idle, and the marker rows that leave them out of the final query's minimum.

    As on the direct runner, an origin whose input brought no rows (counted by
    its stage query) for `n` epochs in a row is idle until its next row. Each
    epoch it is idle, its channel of the final query gets a marker row (the
    end-of-input sentinel's kind, filtered out after the watermark) that lifts
    its watermark to the minimum of the active origins' (computed from the
    rows each stage emitted, as the model does). Spark's minimum is then the
    model's; when the origin comes back, Spark's watermark stays where the
    markers put it until the origin's own passes it, which is what the model's
    merge emits (it never goes back), and its rows below it are the merge's
    late rows. Under `policy="max"` an idle input changes nothing Spark
    emits.
    """

    def __init__(self, stages: Sequence[Stage], final: StreamingTranslation) -> None:
        self.final = final
        self.stages = [s for s in stages if isinstance(s.target.transform, WithWatermark)]
        self.empty = {stage.target.id: 0 for stage in self.stages}

    def mark(self) -> None:
        """After the stage queries ran an epoch: put the final query's marker rows."""
        if self.final.settings.get(MAX_POLICY[0]) == MAX_POLICY[1]:
            return
        idle, active = [], []
        for stage in self.stages:
            transform = stage.target.transform
            assert isinstance(transform, WithWatermark)
            schema = stage.target.info.schema
            after = transform.idle_epochs(stage.target.label)
            node_id = stage.target.id
            seen = stage.counted.get(f"in_{node_id}.rows", 0)
            seen += stage.counted.get(f"in_{node_id}.invalid", 0)
            self.empty[node_id] = 0 if seen else self.empty[node_id] + 1
            mark = None
            if stage.latest is not None:
                mark = transform.watermark_function(schema)(stage.latest)
            if after is not None and self.empty[node_id] >= after:
                idle.append((stage, transform, schema))
            else:
                active.append(mark)
        if not idle or not active or any(mark is None for mark in active):
            return
        lowest = min(mark for mark in active if mark is not None)
        for stage, transform, schema in idle:
            delay = transform.delay_units(schema, stage.target.label)
            kind = schema.type_of(transform.column)
            channel = self.final.sentinels[stage.target.id]
            put_sentinel(channel, transform.column, kind, lowest + delay)


LATEST = "latest"
"""Observed fields named so hold the largest value over micro-batches, not the sum."""


def observed(node: Node, frame: DataFrame) -> DataFrame:
    """`frame` counting its rows (`n_<id>.rows`) and the largest value of each watermarked
    column (`n_<id>.latest_<i>`, in the column's units, `i` in sorted column order)."""
    schema = node.info.schema
    fields = [F.count(F.lit(1)).alias("rows")]
    for i, column in enumerate(sorted(node.info.watermarked)):
        value = units(F.col(column), schema.type_of(column))
        fields.append(F.max(value).alias(f"{LATEST}_{i}"))
    return frame.observe(f"n_{node.id}", *fields)


STATEFUL = (WithWatermark, CombinePerKey, Sort, Session, Join)


def _stateful_depth(nodes: Sequence[Node], selected: set[int]) -> int:
    """The most stateful operators (late-row filters included) on one path of a query."""
    depth: dict[int, int] = {}
    for node_id in sorted(selected):
        node = nodes[node_id]
        above = max((depth.get(i, 0) for i in node.inputs), default=0)
        depth[node_id] = above + isinstance(node.transform, STATEFUL)
    return max(depth.values(), default=0)


def _origins_meet(nodes: Sequence[Node], ancestors: set[int]) -> bool:
    """Whether watermarks of different `WithWatermark`s meet at a Union or Join."""
    origins: dict[int, frozenset[int]] = {}
    meet = False
    for node_id in sorted(ancestors):
        node = nodes[node_id]
        inputs = [origins[i] for i in node.inputs]
        mine = frozenset().union(*inputs)
        if isinstance(node.transform, WithWatermark):
            mine = mine | {node_id}
        if len({o for o in inputs if o}) > 1:
            meet = True
        origins[node_id] = mine
    return meet


def ancestors(nodes: Sequence[Node], target: Node, stop: set[int] | None = None) -> set[int]:
    """`target` and the nodes it reads from, not going past the nodes in `stop`."""
    seen: set[int] = set()
    stack = [target.id]
    while stack:
        node_id = stack.pop()
        if node_id not in seen:
            seen.add(node_id)
            if not stop or node_id not in stop:
                stack.extend(nodes[node_id].inputs)
    return seen
