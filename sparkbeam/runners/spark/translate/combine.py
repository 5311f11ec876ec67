"""`CombinePerKey`: Spark's native aggregates where there are, Python aggregates grouped on
the workers (`parts.python_functions.combine_groups`) on bounded input and in a
`transformWithState` (`python_combine`) on unbounded input, and a `Session`'s
`window_start` grouped with it (`session.session_then_combine`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import (
    JUDGE,
    stateful,
)
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.python_functions import combine_groups
from sparkbeam.runners.spark.translate import update_panes
from sparkbeam.runners.spark.translate.context import (
    Made,
    StreamingContext,
    Translation,
    as_streaming,
    input_schema,
    streaming,
    translates,
)
from sparkbeam.runners.spark.translate.python_combine import combine_stream
from sparkbeam.runners.spark.translate.session import session_then_combine
from sparkbeam.runners.spark.translate.update_groups import finals as update_finals
from sparkbeam.runners.spark.translate.update_groups import update_stream
from sparkbeam.transforms.combine import (
    AggregateFn,
    All,
    CollectSet,
    CombinePerKey,
    Count,
    CountDistinct,
    Finals,
    Max,
    Mean,
    Min,
    MinBy,
    Sum,
    ValueBy,
)
from sparkbeam.transforms.combine import Any as AnyOf
from sparkbeam.transforms.windows import WINDOW_START, Session


def _aggregate(aggregate: AggregateFn, streaming: bool = False) -> Column:
    """A built-in aggregate as Spark's native one (also in streaming, where Spark refuses
    Python aggregates and distinct aggregates: `CountDistinct` is the size of the set)."""
    if isinstance(aggregate, Count):
        return F.count(F.lit(1)) if aggregate.column is None else F.count(aggregate.column)
    if isinstance(aggregate, ValueBy):
        return _value_by(aggregate)
    if isinstance(aggregate, CountDistinct) and streaming:
        return F.size(F.collect_set(aggregate.column))
    functions: dict[type, Callable[[str], Column]] = {
        Sum: F.sum,
        Mean: F.avg,
        Min: F.min,
        Max: F.max,
        CountDistinct: F.count_distinct,
        CollectSet: lambda column: F.array_sort(F.collect_set(column)),
        AnyOf: F.bool_or,
        All: F.bool_and,
    }
    assert aggregate.column is not None
    return functions[type(aggregate)](aggregate.column)


def _value_by(aggregate: ValueBy) -> Column:
    """`MinBy`/`MaxBy` as the min/max of `struct(by, value)` over the rows with a `by`:
    structs compare field by field, None least (Spark's `min_by` picks any of the rows
    that tie on `by`; this picks by `value`, as the model does)."""
    by = F.col(aggregate.by)
    pair = F.when(by.isNotNull(), F.struct(by.alias("by"), F.col(aggregate.value).alias("value")))
    best = F.min(pair) if isinstance(aggregate, MinBy) else F.max(pair)
    return best.getField("value")


@translates(CombinePerKey)
def combine_or_update(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """Each group's aggregate; with `emit="update"`, its pane rows (`update_panes`)."""
    aggregated = combine_per_key(translation, node, inputs)
    if not isinstance(node.transform, CombinePerKey) or not node.transform.updates:
        return Made(aggregated)
    return Made(update_panes.pane_rows(translation.nodes, translation.frames, node, aggregated))


def combine_per_key(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    (frame,) = inputs
    keys = list(transform.keys)
    out_schema = update_panes.aggregated_schema(node)
    if not all(isinstance(a, AggregateFn) for _, a in transform.aggregates):
        function = combine_groups(
            transform.keys,
            transform.aggregates,
            input_schema(translation, node),
            out_schema,
            node.label,
        )
        return frame.groupBy(*keys).applyInArrow(function, spark_schema(out_schema, node.label))
    aggregates = [_aggregate(a).alias(name) for name, a in transform.aggregates]
    if keys:
        return frame.groupBy(*keys).agg(*aggregates)
    # A global aggregate over no rows is one row in SQL but no group in the model.
    counted = frame.agg(*aggregates, F.count(F.lit(1)).alias("__sparkbeam_rows"))
    return counted.filter(F.col("__sparkbeam_rows") > 0).drop("__sparkbeam_rows")


def _combined_keys(run: StreamingContext, node: Node) -> tuple[list[str], list[str]]:
    """A `CombinePerKey`'s watermarked keys and, of those, the ones whose judges are exact."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    judges = run.input_judges(node)
    watermarked = [k for k in transform.keys if k in judges]
    # A group is emitted when the watermark of any of its keys passes it; a held key's judge
    # may close late, so the exact ones decide where there are any (after a Session,
    # window_end's always closes first: a session's rows come out once it has closed).
    return watermarked, [k for k in watermarked if not judges[k].held]


def _with_session(run: StreamingContext, node: Node) -> bool:
    """A `CombinePerKey` translated with the `Session` it reads (`session_then_combine`)."""
    watermarked, exact = _combined_keys(run, node)
    source = run.nodes[node.inputs[0]]
    return not exact and isinstance(source.transform, Session) and WINDOW_START in watermarked


def _python_aggregates(transform: CombinePerKey) -> bool:
    """Spark refuses Python aggregates in streaming aggregations: keyed state instead."""
    return not all(isinstance(a, AggregateFn) for _, a in transform.aggregates)


def _keyed_combine(run: StreamingContext, node: Node) -> bool:
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    return transform.updates or _with_session(run, node) or _python_aggregates(transform)


@streaming(CombinePerKey, state_store=_keyed_combine)
def streaming_combine_per_key(
    translation: Translation, node: Node, inputs: Sequence[DataFrame]
) -> Made:
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    watermarked, exact = _combined_keys(run, node)
    if transform.updates:  # every watermarked key judges its groups (`update_groups`)
        judges = [run.exact_judge(node, k)(F.col(k)) for k in watermarked]
        in_schema = run.nodes[node.inputs[0]].info.schema
        return Made(update_stream(inputs[0], run.nodes, node, judges, in_schema))
    if _with_session(run, node):
        return Made(session_then_combine(run, run.nodes[node.inputs[0]], node))
    keyed = [run.exact_judge(node, k)(F.col(k)) for k in exact or watermarked[:1]]
    frame = stateful(inputs[0], keyed)
    if _python_aggregates(transform):
        in_schema = run.nodes[node.inputs[0]].info.schema
        return Made(
            combine_stream(
                frame,
                in_schema,
                node.info.schema,
                transform.keys,
                transform.aggregates,
                JUDGE,
                node.label,
            )
        )
    aggregates = [_aggregate(a, streaming=True).alias(name) for name, a in transform.aggregates]
    return Made(frame.groupBy(*transform.keys, JUDGE).agg(*aggregates).drop(JUDGE))


@translates(Finals)
def finals(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    return Made(update_panes.finals(inputs[0]))


@streaming(Finals)
def streaming_finals(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    return Made(update_finals(inputs[0], node))
