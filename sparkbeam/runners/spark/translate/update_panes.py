"""`CombinePerKey(emit="update")` on bounded input (a Spark batch job): each group's pane rows.

Bounded input is one epoch, then the end of input, so a group's rows follow from its
aggregate and from the estimate `E` and watermark `W` its `CombinePerKey` holds after that
epoch, with no state kept between epochs:

- step 1 of the epoch: `"EARLY"`, index 0 (nothing passed the group before the epoch);
- step 2, when `E` passes the group: `"ON_TIME"`, the last row if `W` passes it too;
- step 3, the end of input, for a group `W` did not pass: `"ON_TIME"` if `E` did not pass it
  either, else `"LATE"`; its last row.

So a group has the rows `EARLY, ON_TIME` (the second the last), or `EARLY, ON_TIME, LATE`
when `E` passes it and `W` does not. A group is passed by a value when its value in a
watermarked key column is below that column's value (window groups keyed on
`window_start`: the rule of the column's derivation makes that the window's end). A group
with no watermarked key (a running aggregate) only the end of input passes.

`E` and `W` after the epoch (`epoch_marks`) are evaluated on the driver as the direct runner
derives them: each `WithWatermark` from the largest event time of its rows (one Spark job
each: `W = floor_to_ms(max) - delay - allowed_lateness`, `E = W + allowed_lateness`),
through every transform's rule (`sparkbeam.derivation`), merged at a `Union` or `Join` as
their mergers do (the minimum once every input has one; `policy="max"`: the maximum of
those given), the estimate never below the watermark. No operator upstream holds rows (a
`Session`'s held `window_start` among them): such pipelines are refused
(`plan.update_batch`), since their held rows reach the `CombinePerKey` only at the end of
input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.parts.units import units
from sparkbeam.schema import Schema
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.updates import (
    EARLY,
    LATE,
    ON_TIME,
    PANE_COLUMNS,
    PANE_INDEX,
    PANE_IS_LAST,
    PANE_TIMING,
)

Marks = dict[str, tuple[int, int]]
"""A node's output watermarks after the epoch: column -> `(W, E)`, in the column's units
(microseconds for datetimes)."""


def aggregated_schema(node: Node) -> Schema:
    """The columns of an update-mode `CombinePerKey` before its pane columns: its keys and
    aggregates (the output of `emit="close"`)."""
    schema = node.info.schema
    return Schema(tuple((name, kind) for name, kind in schema.fields if name not in PANE_COLUMNS))


def _largest(frame: DataFrame, column: str, kind: type) -> int | None:
    """The largest value of `column` in `frame`, in its units (None over no rows): a Spark
    job."""
    row = frame.agg(F.max(units(F.col(f"`{column}`"), kind))).first()
    return None if row is None or row[0] is None else int(row[0])


def _merge(values: Sequence[int | None], highest: bool) -> int | None:
    """A merger's output from its inputs' values: the minimum once every input has one, or
    the maximum of those given (`highest`)."""
    if highest:
        present = [value for value in values if value is not None]
        return max(present) if present else None
    if not values or any(value is None for value in values):
        return None
    return min(value for value in values if value is not None)


def _derived(node: Node, marks: Mapping[str, tuple[int, int]]) -> Marks:
    """The output watermarks of a one-input transform from its input's (`marks`): its rule on
    the value and on the estimate, each the largest where several input columns give it."""
    out: Marks = {}
    for derived in node.rule.derived:
        if derived.source not in marks:
            continue
        value, estimate = marks[derived.source]
        mark = (derived.apply(value), derived.apply(estimate))
        if derived.column in out:
            old = out[derived.column]
            mark = (max(old[0], mark[0]), max(old[1], mark[1]))
        out[derived.column] = mark
    return out


def _merged(node: Node, inputs: Sequence[Marks], highest: bool) -> Marks:
    """The output watermarks of a `Union` or `Join`: each input's value of a column merged,
    then the rule."""
    out: Marks = {}
    for derived in node.rule.derived:
        values = [marks.get(derived.source) for marks in inputs]
        value = _merge([mark[0] if mark else None for mark in values], highest)
        estimate = _merge([mark[1] if mark else None for mark in values], highest)
        if value is None or estimate is None:
            continue
        mark = derived.apply(value)
        out[derived.column] = (mark, max(derived.apply(estimate), mark))
    return out


def _with_watermark(node: Node, frame: DataFrame, marks: Marks) -> Marks:
    """A `WithWatermark`'s watermarks: its own column's from the largest event time of its
    rows (never below the upstream one on that column), the others through its rule."""
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    column = transform.column
    out = _derived(node, marks)
    top = _largest(frame, column, schema.type_of(column))
    upstream = marks.get(column)
    if top is None:
        if upstream is not None:
            out[column] = upstream
        return out
    value = transform.watermark_function(schema)(top)
    estimate = value + transform.lateness_units(schema, node.label)
    if upstream is not None:
        value, estimate = max(value, upstream[0]), max(estimate, upstream[1])
    out[column] = (value, max(estimate, value))
    return out


def epoch_marks(nodes: Sequence[Node], frames: Mapping[int, DataFrame], node: Node) -> Marks:
    """The watermarks (`W`, `E`) of `node`'s input after the one epoch of bounded input
    (module docstring); `nodes` by id, `frames` their DataFrames."""
    found: dict[int, Marks] = {}

    def of(index: int) -> Marks:
        if index in found:
            return found[index]
        current = nodes[index]
        inputs = [of(i) for i in current.inputs]
        transform = current.transform
        if isinstance(transform, WithWatermark):
            marks = _with_watermark(current, frames[index], inputs[0])
        elif isinstance(transform, (Union, Join)):
            marks = _merged(current, inputs, transform.policy == "max")
        elif len(inputs) == 1:
            marks = _derived(current, inputs[0])
        else:
            marks = {}
        found[index] = {c: m for c, m in marks.items() if c in current.info.watermarked}
        return found[index]

    (source,) = node.inputs
    return of(source)


def _passed(marks: Marks, which: int, schema: Schema, keys: Sequence[str]) -> Column:
    """Whether a group is passed by the values (`which`: 0 `W`, 1 `E`) of `marks` on its
    watermarked key columns: its value in one of them is below that column's."""
    passed = F.lit(False)
    for key in keys:
        if key in marks:
            bound = F.lit(marks[key][which]).cast("long")
            below = units(F.col(f"`{key}`"), schema.type_of(key)) < bound
            passed = passed | F.coalesce(below, F.lit(False))
    return passed


def pane_rows(
    nodes: Sequence[Node], frames: Mapping[int, DataFrame], node: Node, aggregated: DataFrame
) -> DataFrame:
    """The update stream of the update-mode `CombinePerKey` `node` on bounded input, from
    its groups' aggregates (`aggregated`, the rows `emit="close"` gives): each group's
    `EARLY, ON_TIME` rows, or `EARLY, ON_TIME, LATE` when the estimate passes it and the
    watermark does not (module docstring)."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    schema = aggregated_schema(node)
    watermarked = nodes[node.inputs[0]].info.watermarked
    keys = [key for key in transform.keys if key in watermarked]
    marks = epoch_marks(nodes, frames, node)
    late_last = _passed(marks, 1, schema, keys) & ~_passed(marks, 0, schema, keys)
    short = F.array(F.lit(EARLY), F.lit(ON_TIME))
    long = F.array(F.lit(EARLY), F.lit(ON_TIME), F.lit(LATE))
    timings = F.when(late_last, long).otherwise(short)
    names = [f"`{name}`" for name in schema.names]
    exploded = aggregated.select(
        *names, F.posexplode(timings).alias("__sparkbeam_index", PANE_TIMING)
    )
    last = F.when(late_last, F.lit(2)).otherwise(F.lit(1))
    return exploded.select(
        *names,
        F.col(PANE_TIMING),
        F.col("__sparkbeam_index").cast("long").alias(PANE_INDEX),
        (F.col("__sparkbeam_index") == last).alias(PANE_IS_LAST),
    )


def finals(frame: DataFrame) -> DataFrame:
    """`finals()`: the rows with `pane_is_last`, without the pane columns."""
    kept = [f"`{name}`" for name in frame.columns if name not in PANE_COLUMNS]
    return frame.filter(F.col(PANE_IS_LAST)).select(*kept)
