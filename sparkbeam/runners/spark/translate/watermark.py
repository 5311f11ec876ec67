"""`WithWatermark` and its dropped rows (`DroppedRows`: late and invalid rows). On bounded
input the watermark changes no row; on unbounded input it is Spark's watermark over the
event time as Spark holds it, with the end-of-input sentinel, and its late-row filter the
one the plan chose (`exact.late_rows`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.exact.judges import (
    INT_TIME_OUTSIDE,
    INT_TIME_RANGE,
    JUDGE,
    as_spark_time,
    own_judge,
)
from sparkbeam.runners.spark.exact.late_filter import late_against_current_watermark
from sparkbeam.runners.spark.exact.late_rows import filter_late_rows
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.python_functions import fail_when
from sparkbeam.runners.spark.parts.units import units
from sparkbeam.runners.spark.plan.delays import long_delay
from sparkbeam.runners.spark.plan.keys import (
    INVALID_ROWS,
    LATEST,
    ROWS,
    ChannelKey,
    Observation,
)
from sparkbeam.runners.spark.plan.late_filters import Strategy
from sparkbeam.runners.spark.plan.origins import redefines_watermark
from sparkbeam.runners.spark.translate.context import (
    Made,
    StreamingContext,
    Translation,
    as_streaming,
    streaming,
    translates,
)
from sparkbeam.runners.spark.translate.sources import staged_rows
from sparkbeam.schema import Schema
from sparkbeam.transforms.late import INVALID, LATE_WATERMARK, DroppedRows
from sparkbeam.transforms.watermark import WithWatermark


@translates(WithWatermark)
def with_watermark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    if transform.raises_watermark_per_row():
        raise limits.EMIT_EVENT.error(node.label, emit=transform.emit)
    (frame,) = inputs
    time = F.col(transform.column)
    return Made(frame.filter(time.isNotNull()), invalid=frame.filter(time.isNull()))


@translates(DroppedRows)
def dropped_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """Late rows: none in a batch job (one epoch: every row is judged before any watermark,
    at a `WithWatermark`, `Union` or `Join` alike). Invalid rows: the `WithWatermark`'s
    input rows with no event time."""
    transform = node.transform
    assert isinstance(transform, DroppedRows)
    if transform.kind == INVALID:
        return Made(translation.invalid[node.inputs[0]])
    schema = spark_schema(node.info.schema, node.label)
    return Made(translation.spark.createDataFrame([], schema=schema))


def _current_filter(run: StreamingContext, node: Node) -> bool:
    """A `WithWatermark` whose late-row filter is `Strategy.CURRENT`."""
    return run.late_filters.of(node.id).strategy is Strategy.CURRENT


@streaming(WithWatermark, state_store=_current_filter)
def streaming_with_watermark(
    translation: Translation, node: Node, inputs: Sequence[DataFrame]
) -> Made:
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    if transform.raises_watermark_per_row():
        raise limits.EMIT_EVENT.error(node.label, emit=transform.emit)
    if redefines_watermark(run.origins, node):
        raise limits.CHAINED_WATERMARKS.error(node.label)
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    delay = transform.watermark_delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay

    time = F.col(column)
    invalid = inputs[0].filter(time.isNull())
    chosen = run.late_filters.of(node.id)
    if chosen.strategy is Strategy.FOOTERS:
        # A live parquet source's reader writes the watermark each row is judged by, and
        # counts what this node's observation would, from the files' footers (`footers`).
        source, _ = run.epoch_marks[node.id]
        real = _declare_watermark(run, node, run.marked[source], counted=False, keep_time=True)
    elif chosen.reads_marks:
        # Fed straight from a replayed source: its epoch files hold the watermark each row is
        # judged by, a stateless filter (exact: `exact.late_filter`).
        source, mark = run.epoch_marks[node.id]
        # One observation counts the source, this node's input and what its filter passes.
        kept = time.isNotNull() & (F.col(mark).isNull() | (units(time, kind) >= F.col(mark)))
        counts = _counted(node, kept)
        if run.counts_source.get(source) == node.id:
            counts += _counted(run.nodes[source], F.lit(True))
        marked = run.marked[source]
        real = _declare_watermark(run, node, marked, counted=True, also=counts, keep_time=True)
    else:  # live sources, an input computed in the query: a stateful filter
        real = _declare_watermark(run, node, inputs[0], counted=True)
    made = filter_late_rows(chosen, real, schema, column, delay_ms, SPARK_TIME, node.label)
    return Made(
        made.passed,
        judged=made.judged,
        invalid=invalid,
        late=made.late,
        counts_as=Observation("out", node.id),  # the filter's output is the node's
    )


SENTINEL = "__sparkbeam_end"
"""The column that marks the end-of-input row of a `WithWatermark`'s sentinel channel
(`execute.epochs.put_sentinel`), which moves Spark's watermark past every row."""

SPARK_TIME = "__sparkbeam_event_time"
"""The event time as Spark holds it, which its watermark is declared on (`_declare_watermark`)."""


def _counted(node: Node, rows: Column) -> list[Column]:
    """What `observed` counts of `node`, on the rows where `rows` holds among a
    `WithWatermark`'s input (the end-of-input sentinel left out), as fields named by key."""
    real = rows & ~F.col(SENTINEL)
    schema = node.info.schema
    fields = [F.count(F.when(real, 1)).alias(Observation("n", node.id).rows())]
    for i, column in enumerate(sorted(node.info.watermarked)):
        value = units(F.col(column), schema.type_of(column))
        fields.append(F.max(F.when(real, value)).alias(Observation("n", node.id).latest(i)))
    return fields


def _declare_watermark(
    run: StreamingContext,
    node: Node,
    frame: DataFrame,
    counted: bool,
    also: Sequence[Column] = (),
    keep_time: bool = False,
) -> DataFrame:
    """Spark's watermark for a `WithWatermark` node over `frame`, with the end-of-input sentinel.

    Rows with no event time are dropped (counted as invalid when `counted`, with `also`:
    fields of the same observation, `_counted`). With `keep_time`, the event time as Spark
    holds it stays, as `SPARK_TIME`.
    """
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    refusal = long_delay(node)  # the plan's (`plan.delays`)
    if refusal is not None:
        raise refusal
    delay = transform.watermark_delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay
    events = frame.withColumn(SENTINEL, F.lit(False))
    sentinel = ChannelKey("sentinel", node.id)
    if run.has_channel(sentinel):  # a query the runner feeds: its end of input, idle marks
        sentinels = run.frame(sentinel.name())
        events = events.unionByName(sentinels, allowMissingColumns=True)  # epoch marks: null
    time = F.col(column)
    if counted:
        valid = ~F.col(SENTINEL) & time.isNotNull()
        events = events.observe(
            Observation("in", node.id).name(),
            F.count(F.when(valid, 1)).alias(ROWS),
            F.count(F.when(time.isNull(), 1)).alias(INVALID_ROWS),
            # the largest event time, late rows included (`plan.keys.model_watermark`)
            F.max(F.when(valid, units(time, kind))).alias(LATEST),
            *also,
        )
    spark_time = SPARK_TIME
    marked = (
        events.filter(time.isNotNull())
        .withColumn(spark_time, _held_time(time, kind, node.label, schema))
        .withWatermark(spark_time, f"{delay_ms} milliseconds")
    )
    # One conjunct that names the event time, so the optimizer cannot push it below
    # the watermark (the sentinel must reach the watermark's statistics).
    not_sentinel = ~F.col(SENTINEL) | F.col(spark_time).isNull()
    real = marked.filter(not_sentinel).drop(SENTINEL)
    return real if keep_time else real.drop(spark_time)


def _held_time(time: Column, kind: type, label: str, schema: Schema) -> Column:
    """The event time as Spark holds it (`as_spark_time`); on an integer column, a row whose
    time Spark cannot hold (`INT_TIME_RANGE`) fails the query with a `DataError` naming the
    transform and the row (datetimes: the calendar's every value fits)."""
    held = as_spark_time(time, kind)
    if kind is _dt.datetime:
        return held
    low, high = INT_TIME_RANGE
    outside = ~F.col(SENTINEL) & ((time < F.lit(low)) | (time > F.lit(high)))
    return fail_when(outside, held, label, schema, INT_TIME_OUTSIDE)


def restamp(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """A `WithWatermark` an earlier stage ran: its surviving rows, with the same watermark."""
    run = as_streaming(translation)
    path = run.staged_paths.get(node.id)
    if path is not None:  # a live stage's file sink (`live_merges`)
        rows = staged_rows(run.spark, node, path)
        return Made(_declare_watermark(run, node, rows, counted=False))
    return Made(
        _declare_watermark(
            run, node, run.frame(ChannelKey("staged", node.id).name()), counted=False
        )
    )


def _judges_late_rows(run: StreamingContext, node: Node) -> bool:
    """Late rows of a `WithWatermark` whose filter left them in its judged rows."""
    transform, source = node.transform, run.nodes[node.inputs[0]]
    assert isinstance(transform, DroppedRows)
    if transform.kind == INVALID or run.made[source.id].late is not None:
        return False
    return isinstance(source.transform, WithWatermark)


@streaming(DroppedRows, state_store=_judges_late_rows)
def streaming_dropped_rows(
    translation: Translation, node: Node, inputs: Sequence[DataFrame]
) -> Made:
    """Invalid rows: the `WithWatermark`'s input rows with no event time. Late rows: the rows
    its filter (or a `Union`'s under `policy="max"`) drops, judged the same way."""
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, DroppedRows)
    source = run.nodes[node.inputs[0]]
    assert source.id not in run.staged, "refused by the plan (`plan.queries`)"
    made = run.made[source.id]
    if transform.kind == INVALID:
        assert made.invalid is not None
        return Made(made.invalid)
    schema = node.info.schema
    if made.late is not None:
        return Made(made.late)
    if isinstance(source.transform, WithWatermark):
        column = source.transform.column
        judge = own_judge(source.info.schema.type_of(column))
        late = [replace(judge.late(column), judge=F.col(JUDGE))]
        assert made.judged is not None
        frame = made.judged
    else:  # policy="min" (the only policy of a Join on Spark streaming): nothing is late
        kind = spark_schema(schema, node.label)[LATE_WATERMARK].dataType
        return Made(
            inputs[0].filter(F.lit(False)).withColumn(LATE_WATERMARK, F.lit(None).cast(kind))
        )
    return Made(late_against_current_watermark(frame, source.info.schema, late, schema, node.label))
