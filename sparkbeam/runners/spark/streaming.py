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
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.arrow import from_arrow, to_arrow
from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.sort import sort_stream
from sparkbeam.runners.spark.translate import (
    TRANSLATORS,
    Translation,
    Translator,
    _aggregate,
    _long,
    units,
)
from sparkbeam.schema import Columns, Schema, columns_to_rows, rows_to_columns
from sparkbeam.transforms.combine import AggregateFn, CombinePerKey
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Hop, Tumble

Judge = Callable[[Column], Column]
"""A column's judge: a value of the column to the Spark timestamp Spark compares with `W`."""

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

STATELESS = (Map, Filter, Select, Tumble, Hop, Union)


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


class EpochSource:
    """A directory Spark reads as a file stream; the runner adds one parquet file per epoch."""

    def __init__(self, directory: str, schema: Schema, label: str) -> None:
        self.directory = directory
        self.schema = schema
        self.label = label
        os.makedirs(directory)
        self.files = 0

    def frame(self, spark: SparkSession) -> DataFrame:
        reader = spark.readStream.schema(spark_schema(self.schema, self.label))
        return reader.option("maxFilesPerTrigger", 1).parquet(self.directory)

    def write(self, columns: Columns) -> None:
        table = to_arrow(columns, self.schema, self.label)
        final = os.path.join(self.directory, f"epoch-{self.files:06d}.parquet")
        hidden = os.path.join(self.directory, f".epoch-{self.files:06d}.parquet.tmp")
        pq.write_table(table, hidden)
        os.replace(hidden, final)
        self.files += 1

    def write_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.write(rows_to_columns(rows, self.schema, self.label))
        else:
            self.write({name: [] for name in self.schema.names})


class StreamingTranslation(Translation):
    """The streaming DataFrames of one query: the ancestors of one PCollection."""

    def __init__(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        directory: str,
        selected: set[int] | None = None,
    ) -> None:
        super().__init__(spark, nodes)
        self.directory = directory
        self.selected = set(range(len(nodes))) if selected is None else selected
        self.sources: dict[int, EpochSource] = {}
        self.sentinels: dict[int, EpochSource] = {}
        self.judges: dict[int, dict[str, Judge]] = {}
        self.origins: dict[int, frozenset[int]] = {}
        """For each node, the `WithWatermark` nodes its watermarks come from."""
        self.epoch_rows: dict[int, tuple[tuple[dict[str, Any], ...], ...]] = {}

    def run(self) -> None:
        for node in self.nodes:
            if node.id not in self.selected:
                continue
            translate = STREAMING_TRANSLATORS.get(type(node.transform))
            if translate is None:
                raise PipelineError(
                    f"{node.label}: {type(node.transform).__name__} on unbounded input is not "
                    "supported by the Spark runner yet; run it on the direct runner"
                )
            inputs = [self.frames[i] for i in node.inputs]
            self.origins[node.id] = frozenset().union(*(self.origins[i] for i in node.inputs))
            self.frames[node.id] = translate(self, node, inputs)
            if node.id not in self.judges:
                self.judges[node.id] = derive_judges(self, node)

    def input_judges(self, node: Node, port: int = 0) -> dict[str, Judge]:
        return self.judges[node.inputs[port]]

    def new_source(self, name: str, schema: Schema, label: str) -> EpochSource:
        return EpochSource(os.path.join(self.directory, name), schema, label)


STREAMING_TRANSLATORS: dict[type, Translator] = {kind: TRANSLATORS[kind] for kind in STATELESS}


def streaming(kind: type) -> Callable[[Translator], Translator]:
    def register(function: Translator) -> Translator:
        STREAMING_TRANSLATORS[kind] = function
        return function

    return register


def _streaming(translation: Translation) -> StreamingTranslation:
    assert isinstance(translation, StreamingTranslation)
    return translation


@streaming(TestStreamSource)
@streaming(Create)
def epoch_source(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    if isinstance(transform, TestStreamSource):
        epochs = transform.epochs
    else:
        assert isinstance(transform, Create)
        epochs = (transform.rows,)
    run.epoch_rows[node.id] = tuple(tuple(epoch) for epoch in epochs)
    source = run.new_source(f"source-{node.id}", node.info.schema, node.label)
    run.sources[node.id] = source
    return source.frame(run.spark)


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

    sentinel = run.new_source(
        f"sentinel-{node.id}", schema.with_columns((SENTINEL, bool)), node.label
    )
    run.sentinels[node.id] = sentinel
    events = inputs[0].withColumn(SENTINEL, F.lit(False)).unionByName(sentinel.frame(run.spark))

    time = F.col(column)
    counted = events.observe(
        f"in_{node.id}",
        F.count(F.when(~F.col(SENTINEL) & time.isNotNull(), 1)).alias("rows"),
        F.count(F.when(time.isNull(), 1)).alias("invalid"),
    )
    valid = counted.filter(time.isNotNull())
    spark_time = "__sparkbeam_event_time"
    marked = valid.withColumn(spark_time, _as_spark_time(time, kind)).withWatermark(
        spark_time, f"{delay_ms} milliseconds"
    )
    # One conjunct that names the event time, so the optimizer cannot push it below
    # the watermark (the sentinel must reach the watermark's statistics).
    not_sentinel = ~F.col(SENTINEL) | F.col(spark_time).isNull()
    real = marked.filter(not_sentinel).drop(SENTINEL, spark_time)
    judge = own_judge(kind)
    run.judges[node.id] = {column: judge, **_pass_through(run.input_judges(node), {column})}
    run.origins[node.id] = run.origins[node.id] | {node.id}
    kept = stateful(real, [judge(time)], delay_ms).withColumn(ROW_ID, F.expr("uuid()"))
    filtered = kept.dropDuplicates([ROW_ID, JUDGE]).drop(ROW_ID, JUDGE)
    return filtered.observe(f"out_{node.id}", F.count(F.lit(1)).alias("rows"))


def own_judge(kind: type) -> Judge:
    """`J(v) = v + 1`: `v < W` exactly when `v + 1 <= W` (integers, microseconds or units)."""
    return lambda value: _as_spark_time(_plus(value, kind, 1), kind)


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
    if isinstance(transform, Filter):
        return dict(judges)
    if isinstance(transform, Map):
        return {c: j for c, j in judges.items() if c in transform.keeps}
    if isinstance(transform, (Tumble, Hop)):
        spec = transform.spec(schema, node.label)
        kind = schema.type_of(transform.column)
        base = judges.get(transform.column)
        if base is None:
            return dict(judges)
        out = _pass_through(judges, set())
        out[WINDOW_START] = lambda v: base(_plus(v, kind, spec.size - 1))
        out[WINDOW_END] = lambda v: base(_plus(v, kind, -1))
        return out
    if isinstance(transform, Select):
        out = {}
        for name, bound in transform.bind(schema, node.label):
            if bound.source in judges:
                out[name] = _select_judge(judges[bound.source], bound.output_type, bound.steps)
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
    return lambda v: (
        F.greatest(*(judge(v) for judge in judges)) if len(judges) > 1 else judges[0](v)
    )


def _select_judge(base: Judge, kind: type, steps: tuple[tuple[str, int], ...]) -> Judge:
    judge = base
    for step, amount in steps:
        previous = judge
        if step == "shift":
            judge = _shifted(previous, kind, -amount)
        else:
            judge = _shifted(previous, kind, amount - 1)
    return judge


def _shifted(judge: Judge, kind: type, amount: int) -> Judge:
    return lambda v: judge(_plus(v, kind, amount))


@streaming(CombinePerKey)
def combine_per_key(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    if not all(isinstance(a, AggregateFn) for _, a in transform.aggregates):
        raise PipelineError(
            f"{node.label}: a user CombineFn on unbounded input is not supported by the Spark "
            "runner yet (Spark refuses Python aggregates in streaming aggregations)"
        )
    judges = run.input_judges(node)
    keyed = [judges[k](F.col(k)) for k in transform.keys if k in judges]
    frame = stateful(inputs[0], keyed)
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


@streaming(Union)
def union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    origins = [run.origins[i] for i in node.inputs]
    if len(frozenset().union(*origins)) > 1 and node.info.watermarked:
        raise PipelineError(
            f"{node.label}: its inputs are watermarked by different WithWatermark transforms; "
            "Spark keeps one watermark per query and would judge each input's late rows "
            "against the slowest input's watermark. Apply one WithWatermark after the Union "
            "on the Spark runner"
        )
    return TRANSLATORS[Union](translation, node, inputs)


def write_sentinel(source: EpochSource, column: str, kind: type) -> None:
    columns: Columns = {name: [None] for name in source.schema.names}
    columns[column] = [
        FAR_FUTURE_INT
        if kind is int
        else (FAR_FUTURE - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1)
    ]
    columns[SENTINEL] = [True]
    source.write(columns)


class StreamingRun:
    """Runs the query of one PCollection epoch by epoch and keeps what each epoch emitted."""

    def __init__(self, spark: SparkSession, nodes: Sequence[Node], target: Node) -> None:
        self.spark = spark
        self.directory = tempfile.mkdtemp(prefix="sparkbeam-stream-")
        self.translation = StreamingTranslation(
            spark, nodes, self.directory, _ancestors(nodes, target)
        )
        self.target = target
        self.epochs: list[list[dict[str, Any]]] = []
        self.metrics: dict[str, int] = {}

    def translate(self) -> None:
        self.translation.run()

    def execute(self) -> None:
        translation, target = self.translation, self.target
        frame = translation.frames[target.id]
        schema = target.info.schema
        tables: list[pa.Table] = []

        def sink(batch: DataFrame, batch_id: int) -> None:
            tables.append(batch.toArrow())

        query = (
            frame.writeStream.foreachBatch(sink)
            .outputMode("append")
            .option("checkpointLocation", os.path.join(self.directory, "checkpoint"))
            .start()
        )
        try:
            epochs = max((len(e) for e in translation.epoch_rows.values()), default=0)
            for epoch in range(epochs + 1):
                if epoch < epochs:
                    for node_id, source in translation.sources.items():
                        source_epochs = translation.epoch_rows[node_id]
                        if epoch < len(source_epochs):
                            source.write_rows(source_epochs[epoch])
                else:
                    for node_id, sentinel in translation.sentinels.items():
                        node = translation.nodes[node_id]
                        transform = node.transform
                        assert isinstance(transform, WithWatermark)
                        kind = node.info.schema.type_of(transform.column)
                        write_sentinel(sentinel, transform.column, kind)
                start = len(tables)
                query.processAllAvailable()
                emitted: list[dict[str, Any]] = []
                for table in tables[start:]:
                    emitted.extend(columns_to_rows(from_arrow(table, schema), schema))
                self.epochs.append(emitted)
            for progress in query.recentProgress:
                for name, metric in (progress.get("observedMetrics") or {}).items():
                    for field, value in metric.asDict().items():
                        key = f"{name}.{field}"
                        self.metrics[key] = self.metrics.get(key, 0) + int(value)
        finally:
            query.stop()
            shutil.rmtree(self.directory, ignore_errors=True)


def _ancestors(nodes: Sequence[Node], target: Node) -> set[int]:
    seen: set[int] = set()
    stack = [target.id]
    while stack:
        node_id = stack.pop()
        if node_id not in seen:
            seen.add(node_id)
            stack.extend(nodes[node_id].inputs)
    return seen
