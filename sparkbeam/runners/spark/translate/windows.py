"""`Tumble` and `Hop`: each row's windows, computed on integer time (the same on bounded and
unbounded input: no state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.parts.python_functions import fail_when
from sparkbeam.runners.spark.parts.units import from_units, long_literal, units
from sparkbeam.runners.spark.plan.keys import Observation
from sparkbeam.runners.spark.translate.context import (
    Made,
    Translation,
    input_schema,
    require_time,
    streaming,
    translates,
)
from sparkbeam.runners.spark.translate.observed import Derive
from sparkbeam.schema import Schema
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Hop, Tumble


def _timed(translation: Translation, node: Node, column: str) -> bool:
    """Whether `column` of `node`'s input is never None: its input is a `WithWatermark` on it,
    which drops (and counts) the rows without it."""
    source = translation.nodes[node.inputs[0]].transform
    return isinstance(source, WithWatermark) and source.column == column


def _window_in_range(
    start: Column,
    last: Column,
    size: Column,
    bounds: tuple[int, int, str],
    label: str,
    schema: Schema,
    windows: Column | None = None,
) -> Column:
    """`start`, failing the job with a `DataError` naming the row when one of its windows,
    starting from `start` to `last` (null: their computation left 64 bits), has a bound
    outside `bounds` (`Translation.window_bounds`: years 1 to 9999 for datetimes, 64 bits
    for integers, as the direct runner). `windows`: whether the row has any (a `Hop` whose
    slide exceeds its size leaves gaps)."""
    low, high, words = bounds
    end = F.try_add(last, size)
    outside = (
        start.isNull() | end.isNull() | (start < long_literal(low)) | (end > long_literal(high))
    )
    if windows is not None:
        outside = windows & outside
    return fail_when(outside, start, label, schema, words)


WINDOW_START_UNITS = "__sparkbeam_window_start"
"""A `Tumble`'s window start in its column's units, before it is named (`tumble`)."""


def tumble_counts(node: Node, source: Node) -> Derive | None:
    """A `Tumble`'s counts from its input's, so that it needs no observation of its own: it
    emits one row per input row, and each watermarked column's largest value is the input's
    (passed through) or its window bound, a monotone function of the largest event time.
    None where the input counts no largest value of a column this needs."""
    transform = node.transform
    assert isinstance(transform, Tumble)
    spec = transform.spec(source.info.schema, node.label)
    before = sorted(source.info.watermarked)
    time = transform.column
    wanted: list[tuple[int, int, int]] = []
    """Per watermarked output column: its index, its input column's index, what to add."""
    for i, column in enumerate(sorted(node.info.watermarked)):
        bound = {WINDOW_START: 0, WINDOW_END: spec.size}.get(column)
        read = time if bound is not None else column
        if read not in before:
            return None
        wanted.append((i, before.index(read), -1 if bound is None else bound))

    def derive(metrics: Mapping[str, Any]) -> dict[str, Any]:
        rows = metrics.get(Observation("n", source.id).rows())
        if rows is None:
            return {}
        out: dict[str, Any] = {Observation("n", node.id).rows(): rows}
        for i, j, bound in wanted:
            latest = metrics.get(Observation("n", source.id).latest(j))
            if latest is None:
                continue
            if bound >= 0:  # the window's start (and end) of the latest time
                latest = latest - (latest - spec.offset) % spec.size + bound
            out[Observation("n", node.id).latest(i)] = latest
        return out

    return derive


@streaming(Tumble, counts_from_input=tumble_counts)
@translates(Tumble)
def tumble(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Tumble)
    schema = input_schema(translation, node)
    kind = schema.type_of(transform.column)
    spec = transform.spec(schema, node.label)
    t = units(F.col(transform.column), kind)
    size = long_literal(spec.size)
    bounds = translation.window_bounds(kind)
    frame = inputs[0]
    if not _timed(translation, node, transform.column):
        frame = require_time(frame, transform.column, node.label, schema)
    # The start once, then its checks, then both bounds from it, each a column of its own:
    # Spark generates a column used several times once, where an expression repeated in
    # each use is generated again each time (the checks read the start four times). Kept
    # small, the micro-batch's generated method stays within what the JVM compiles.
    bound = F.col(WINDOW_START_UNITS)
    started = frame.select(
        "*", F.try_subtract(t, _below_window_start(t, spec.offset, size)).alias(WINDOW_START_UNITS)
    )
    checked = started.withColumn(
        WINDOW_START_UNITS, _window_in_range(bound, bound, size, bounds, node.label, schema)
    )
    return Made(
        checked.select(
            "*",
            from_units(bound, kind).alias(WINDOW_START),
            from_units(bound + size, kind).alias(WINDOW_END),
        ).drop(WINDOW_START_UNITS)
    )


def _below_window_start(t: Column, offset: int, slide: Column) -> Column:
    """How far `t` lies past the latest window start at or before it (`offset + k * slide`,
    `0 <= offset < slide`): `pmod(t - offset, slide)`, without computing `t - offset`, which
    can leave 64 bits."""
    return F.pmod(F.pmod(t, slide) - long_literal(offset), slide)


HOP_VALUES = ("__sparkbeam_below", "__sparkbeam_last", "__sparkbeam_reach", "__sparkbeam_first")
"""A `Hop`'s columns before its windows: how far the time lies past the last window start
(`_below_window_start`), that start, how far back its windows reach, and the first start."""


@streaming(Hop)
@translates(Hop)
def hop(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Hop)
    schema = input_schema(translation, node)
    kind = schema.type_of(transform.column)
    spec = transform.spec(schema, node.label)
    size, slide = long_literal(spec.size), long_literal(spec.slide)
    t = units(F.col(transform.column), kind)
    bounds = translation.window_bounds(kind)
    frame = inputs[0]
    if not _timed(translation, node, transform.column):
        frame = require_time(frame, transform.column, node.label, schema)
    # Each value a column of its own, as in `tumble`. The windows holding t start at last,
    # last - slide, ..., down to the first after t - size (none where reach < 0).
    below, last, reach, first = (F.col(name) for name in HOP_VALUES)
    frame = frame.withColumn(HOP_VALUES[0], _below_window_start(t, spec.offset, slide))
    frame = frame.select(
        "*",
        F.try_subtract(t, below).alias(HOP_VALUES[1]),
        (size - long_literal(1) - below).alias(HOP_VALUES[2]),
    )
    frame = frame.withColumn(
        HOP_VALUES[3], F.try_subtract(last, F.call_function("div", reach, slide) * slide)
    )
    checked = _window_in_range(first, last, size, bounds, node.label, schema, reach >= 0)
    frame = frame.withColumn(HOP_VALUES[3], checked)
    starts = F.when(reach >= 0, F.sequence(first, last, slide)).otherwise(
        F.array().cast("array<bigint>")
    )
    start = F.explode(starts).alias("__sparkbeam_start")
    exploded = frame.select("*", start)
    begin = F.col("__sparkbeam_start")
    return Made(
        exploded.select(
            *[F.col(name) for name in schema.names],
            from_units(begin, kind).alias(WINDOW_START),
            from_units(begin + size, kind).alias(WINDOW_END),
        )
    )
