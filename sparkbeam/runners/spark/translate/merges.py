"""`Union` and `Join`, and where watermarks of different `WithWatermark`s meet in them: idle
inputs, `policy="max"` and what Spark's one watermark per query cannot separate.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Mapping, Sequence
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.exact.judges import (
    Judge,
    with_watermark_metadata,
)
from sparkbeam.runners.spark.exact.late_filter import late_against_current_watermark
from sparkbeam.runners.spark.exact.late_rows import not_late_at_merge
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.units import long_literal, units
from sparkbeam.runners.spark.plan import merges as plan_merges
from sparkbeam.runners.spark.plan.keys import (
    ROWS,
    Observation,
)
from sparkbeam.runners.spark.plan.late_filters import LateFilters
from sparkbeam.runners.spark.plan.merges import join_keys_apart, union_columns_apart
from sparkbeam.runners.spark.plan.origins import merges_chained_origins
from sparkbeam.runners.spark.translate.context import (
    Made,
    StreamingContext,
    Translation,
    as_streaming,
    input_schema,
    streaming,
    translates,
)
from sparkbeam.schema import Schema
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import LATE_WATERMARK
from sparkbeam.transforms.union import Union


@translates(Union)
def union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    return Made(functools.reduce(DataFrame.unionByName, inputs))


@translates(Join)
def join(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Join)
    left_schema, right_schema = (input_schema(translation, node, i) for i in (0, 1))
    left = inputs[0].select([F.col(n).alias(f"__l_{n}") for n in left_schema.names])
    right = inputs[1].select([F.col(n).alias(f"__r_{n}") for n in right_schema.names])
    condition = functools.reduce(
        lambda a, b: a & b, [F.col(f"__l_{k}") == F.col(f"__r_{k}") for k in transform.on]
    )
    bounds = transform.interval_bounds(left_schema, right_schema, node.label)
    if bounds is not None and transform.times is not None:
        kind = left_schema.type_of(transform.times[0])
        lt = units(F.col(f"__l_{transform.times[0]}"), kind)
        rt = units(F.col(f"__r_{transform.times[1]}"), kind)
        condition = (
            condition & (lt + long_literal(bounds[0]) <= rt) & (rt <= lt + long_literal(bounds[1]))
        )
    how = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}
    joined = left.join(right, condition, how[transform.how])
    return Made(joined.select(*join_output(transform, left_schema, right_schema, node.label)))


def join_output(transform: Join, left: Schema, right: Schema, label: str) -> list[Column]:
    """The output columns of a join whose sides' columns are prefixed `__l_` and `__r_`."""
    columns = []
    for name, side, column in transform.layout(left, right, label).sources:
        if side < 0:
            value = F.coalesce(F.col(f"__l_{column}"), F.col(f"__r_{column}"))
        else:
            value = F.col(f"__{'lr'[side]}_{column}")
        columns.append(value.alias(name))
    return columns


def _interval(amount: int, kind: type) -> Column:
    """A day-time interval literal: `amount` microseconds (datetime) or milliseconds (int)."""
    micros = amount if kind is _dt.datetime else amount * 1000
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return F.expr(f"INTERVAL '{sign}{seconds}.{fraction:06d}' SECOND")


def _judges_sides(run: StreamingContext, node: Node) -> bool:
    """A `Join` where watermarks of several `WithWatermark`s meet under `policy="max"` or
    with an idle input: its sides' late rows are judged by the current watermark."""
    transform = node.transform
    assert isinstance(transform, Join)
    meets = len(run.origins[node.id]) > 1
    return meets and (transform.policy == "max" or may_idle(run, node))


@streaming(Join, state_store=_judges_sides)
def streaming_join(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """A stream-stream join; Spark cleans its state by the judge of a window key on both
    sides (their judges must agree), or by a range on the judges of the interval times."""
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, Join)
    require_separable_origins(run, node)
    meets = len(run.origins[node.id]) > 1
    left_info, right_info = (run.nodes[i].info for i in node.inputs)
    judges = [run.judges[i] for i in node.inputs]
    left = inputs[0].select([F.col(n).alias(f"__l_{n}") for n in left_info.schema.names])
    right = inputs[1].select([F.col(n).alias(f"__r_{n}") for n in right_info.schema.names])
    condition = functools.reduce(
        lambda a, b: a & b, [F.col(f"__l_{k}") == F.col(f"__r_{k}") for k in transform.on]
    )
    window_keys = transform.window_keys(left_info, right_info)
    bounds = transform.interval_bounds(left_info.schema, right_info.schema, node.label)
    late = None
    if _judges_sides(run, node):
        left, right, late = judged_sides(run, node, left, right, judges, window_keys)

    left, right, keyless = _without_none_keys(transform, left, right, left_info, right_info, node)

    def marked(frame: DataFrame, name: str, judge: Judge, column: str) -> DataFrame:
        return with_watermark_metadata(frame.withColumn(name, judge(F.col(column))), name)

    if window_keys:
        key = window_keys[0]
        run.exact_judge(node, key, 0), run.exact_judge(node, key, 1)
        assert join_keys_apart(run.judges, node, [key]) is None, "refused by the plan"
        left = marked(left, "__l_judge", judges[0][key], f"__l_{key}")
        right = marked(right, "__r_judge", judges[1][key], f"__r_{key}")
        condition = condition & (F.col("__l_judge") == F.col("__r_judge"))
    elif bounds is not None and transform.times is not None:
        # An outer side's unmatched row comes out once Spark's one watermark, the minimum of
        # both sides', passes it; the model waits for the other side's only. Where the sides'
        # watermarks come from different WithWatermarks and the outer side's is behind, the
        # row comes out micro-batches later than on the direct runner: the same rows, never
        # a different match (docs/decisions.md).
        left_time, right_time = transform.times
        lj, rj = run.exact_judge(node, left_time, 0), run.exact_judge(node, right_time, 1)
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
    output = joined.select(*join_output(transform, left_info.schema, right_info.schema, node.label))
    for rows in keyless:
        output = output.unionByName(rows)
    return Made(output, late=late, policy=transform.policy if meets else None)


KEEPS_UNMATCHED = {"inner": (), "left": (0,), "right": (1,), "full": (0, 1)}
"""Which sides' unmatched rows each `how` emits."""


def _without_none_keys(
    transform: Join,
    left: DataFrame,
    right: DataFrame,
    left_info: EdgeInfo,
    right_info: EdgeInfo,
    node: Node,
) -> tuple[DataFrame, DataFrame, list[DataFrame]]:
    """The sides' rows whose `on` keys hold no None, and the rows with a None key that the
    join emits, laid out as unmatched rows.

    A row with a None key never matches, and an outer side emits it at once
    (the model's rule, `transforms.join`). Spark's stream-stream join would
    keep it in its state instead: its state matches a None key with a None key
    (a full join pairs them), and emits an outer side's only when the watermark
    passes it. So these rows go around the join: the side's own stateless
    branch, in the same micro-batch.
    """
    schemas = (left_info.schema, right_info.schema)
    frames = [left, right]
    keyless: list[DataFrame] = []
    for port, side in enumerate("lr"):
        none_key = functools.reduce(
            lambda a, b: a | b, [F.col(f"__{side}_{k}").isNull() for k in transform.on]
        )
        if port in KEEPS_UNMATCHED[transform.how]:
            rows = frames[port].filter(none_key)
            other = "lr"[1 - port]
            for name, kind in schemas[1 - port].fields:
                spark_type = spark_schema(Schema(((name, kind),)), node.label).fields[0].dataType
                rows = rows.withColumn(f"__{other}_{name}", F.lit(None).cast(spark_type))
            keyless.append(rows.select(*join_output(transform, schemas[0], schemas[1], node.label)))
        frames[port] = frames[port].filter(~none_key)
    return frames[0], frames[1], keyless


def _judges_union(run: StreamingContext, node: Node) -> bool:
    """A `Union` where watermarks of several `WithWatermark`s meet under `policy="max"` or
    with an idle input: its late rows are judged by the current watermark."""
    transform = node.transform
    assert isinstance(transform, Union)
    meets = len(run.origins[node.id]) > 1
    return meets and (transform.policy == "max" or may_idle(run, node))


@streaming(Union, state_store=_judges_union)
def streaming_union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """Under `policy="max"` with watermarks of several `WithWatermark`s, the query keeps the
    latest of them (`MAX_POLICY`): the rows below it on a watermarked column are late here,
    judged against the current batch's watermark (`exact.late_filter`)."""
    run = as_streaming(translation)
    require_separable_origins(run, node)
    merged = union(translation, node, inputs).frame
    transform = node.transform
    assert isinstance(transform, Union)
    if len(run.origins[node.id]) < 2:
        return Made(merged)  # the latest of one watermark is the earliest: no row is late here
    if not _judges_union(run, node):
        return Made(merged, policy=transform.policy)
    judges = {}
    for column in sorted(node.info.watermarked):
        for port in range(len(node.inputs)):
            judges[column] = run.exact_judge(node, column, port)
    assert union_columns_apart(run.judges, node) is None, "refused by the plan"
    schema = node.info.schema
    late = [judges[column].late(column) for column in schema.names if column in judges]
    output = schema.with_columns((LATE_WATERMARK, schema.type_of(late[0].column)))
    late_rows = late_against_current_watermark(merged, schema, late, output, node.label)
    counted = merged.observe(Observation("in", node.id).name(), F.count(F.lit(1)).alias(ROWS))
    kept = not_late(run, counted, schema, [entry.judge for entry in late], node.label)
    out = kept.observe(Observation("out", node.id).name(), F.count(F.lit(1)).alias(ROWS))
    return Made(out, late=late_rows, policy=transform.policy)


class MergeContext(Protocol):
    """What the merges read of the query being translated (its translation, read only)."""

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def origins(self) -> Mapping[int, frozenset[int]]:
        """The `WithWatermark`s each node's watermarks come from."""

    @property
    def judges(self) -> Mapping[int, Mapping[str, Judge]]:
        """Each translated node's judge per watermarked column."""

    @property
    def late_filters(self) -> LateFilters:
        """The plan's late-row filters of the query."""


def may_idle(run: MergeContext, node: Node) -> bool:
    """Whether an input of `node` comes from a `WithWatermark` with `idle_after` (epochs)."""
    return plan_merges.may_idle(run.nodes, run.origins, node)


def require_separable_origins(run: MergeContext, node: Node) -> None:
    """Refuse a merge of watermarks from `WithWatermark`s chained one after the other.

    Merges of independent `WithWatermark`s run as one stage query per origin
    (`StreamingRun`); a `WithWatermark` downstream of another cannot be cut
    out that way.
    """
    if merges_chained_origins(run.origins, node.inputs):
        raise limits.CHAINED_WATERMARKS.error(node.label)


def not_late(
    run: MergeContext,
    frame: DataFrame,
    schema: Schema,
    judges: Sequence[Column],
    label: str,
) -> DataFrame:
    """The rows of `frame` (columns `schema`) not late on any of `judges` at a merge, by the
    filter the plan chose for the query's merges (`exact.late_rows.not_late_at_merge`)."""
    return not_late_at_merge(run.late_filters.merges, frame, schema, judges, label)


def judged_sides(
    run: MergeContext,
    node: Node,
    left: DataFrame,
    right: DataFrame,
    judges: list[Mapping[str, Judge]],
    window_keys: Sequence[str],
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """A join's sides under `policy="max"` or with an idle input: the rows not below Spark's
    watermark on a window key, and the others, its late rows, laid out as unmatched rows."""
    transform = node.transform
    assert isinstance(transform, Join)
    assert window_keys, "refused by the plan (`plan.merges.refuse_interval_join_max`)"
    assert plan_merges.join_keys_apart(run.judges, node, window_keys) is None
    schemas = [run.nodes[i].info.schema for i in node.inputs]
    prefixed = [
        Schema(tuple((f"__{side}_{name}", kind) for name, kind in schema.fields))
        for side, schema in zip("lr", schemas, strict=True)
    ]
    kept, late_rows = [], []
    for port, frame in enumerate((left, right)):
        frame = frame.observe(
            Observation("in", node.id, port).name(), F.count(F.lit(1)).alias(ROWS)
        )
        side = "lr"[port]
        late = [judges[port][key].late(f"__{side}_{key}") for key in window_keys]
        kind = schemas[port].type_of(window_keys[0])
        output = prefixed[port].with_columns((LATE_WATERMARK, kind))
        judged = [entry.judge for entry in late]
        passed = not_late(run, frame, prefixed[port], judged, node.label)
        kept.append(
            passed.observe(Observation("out", node.id, port).name(), F.count(F.lit(1)).alias(ROWS))
        )
        rows = late_against_current_watermark(frame, prefixed[port], late, output, node.label)
        other = prefixed[1 - port]
        types = spark_schema(other, node.label)
        for field in types.fields:
            rows = rows.withColumn(field.name, F.lit(None).cast(field.dataType))
        unmatched = join_output(transform, schemas[0], schemas[1], node.label)
        late_rows.append(rows.select(*unmatched, LATE_WATERMARK))
    return kept[0], kept[1], late_rows[0].unionByName(late_rows[1])
