"""What every query counts as it runs (Spark's observed metrics): rows per transform and the
largest value of each watermarked column, read back for `metrics()` and `late_count`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import Judge
from sparkbeam.runners.spark.exact.late_filter import mark as mark_of
from sparkbeam.runners.spark.parts.units import units
from sparkbeam.runners.spark.plan.keys import ROWS, Observation, latest_field
from sparkbeam.time import MAX_MICROS, MIN_MICROS, ONE_MICROSECOND, from_micros, to_micros
from sparkbeam.transforms.watermark import WithWatermark


def observed(node: Node, frame: DataFrame) -> DataFrame:
    """`frame` counting its rows (`n_<id>.rows`) and the largest value of each watermarked
    column (`n_<id>.latest_<i>`, in the column's units, `i` in sorted column order)."""
    schema = node.info.schema
    fields = [F.count(F.lit(1)).alias(ROWS)]
    for i, column in enumerate(sorted(node.info.watermarked)):
        value = units(F.col(column), schema.type_of(column))
        fields.append(F.max(value).alias(latest_field(i)))
    return frame.observe(Observation("n", node.id).name(), *fields)


Derive = Callable[[Mapping[str, Any]], dict[str, Any]]
"""A node's counts (`n_<id>.rows`, `n_<id>.latest_<i>`) from the metrics of its input."""


def observed_fields(metric: Any) -> dict[str, Any]:
    """One observed metric of a `StreamingQueryProgress`, by field name.

    A classic session hands over the metric's `Row`. Spark Connect sends the
    progress as JSON, where the row is `{"values": [...], "schema": {...}}`,
    and PySpark (4.x, `StreamingQueryProgress.fromJson`) reads that as a
    `Row(values=..., schema=...)`: the names are then the schema's fields.
    """
    fields: dict[str, Any] = metric.asDict() if hasattr(metric, "asDict") else dict(metric)
    schema = fields.get("schema")
    if set(fields) == {"values", "schema"} and isinstance(schema, dict):
        names = [field["name"] for field in schema.get("fields", ())]
        return dict(zip(names, fields["values"], strict=True))
    return fields


def streaming_watermarks(
    node: Node, counts: Mapping[str, int], mark: tuple[int, Mapping[str, Judge]] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A node's watermark and lag per column from Spark's watermark `mark` (ms) and judges."""
    if mark is None:
        return {}, {}
    watermark_ms, judges = mark
    watermarks: dict[str, Any] = {}
    lags: dict[str, Any] = {}
    schema = node.info.schema
    for i, column in enumerate(sorted(node.info.watermarked)):
        judge = judges.get(column)
        if judge is None or judge.held:  # held: Spark does not know the model's value
            continue
        kind = schema.type_of(column)
        late = judge.late(column)
        spark = watermark_ms * 1000 if late.is_datetime else watermark_ms
        value = mark_of(spark - late.shift, late.steps)
        latest = counts.get(Observation("n", node.id).latest(i))
        if kind is _dt.datetime:
            watermarks[column] = from_micros(value)
            if latest is not None:
                lags[column] = (latest - value) * ONE_MICROSECOND
        else:
            watermarks[column] = value
            if latest is not None:
                lags[column] = latest - value
    return watermarks, lags


def derived_watermarks(
    node: Node, upstream: Mapping[str, Any], counts: Mapping[str, int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The watermark and lag of each column of a one-input `node` whose watermark its rule
    derives (not `held`) from its input's reported watermarks `upstream`, as the direct runner
    derives them. Spark keeps one watermark per query, the least of every `WithWatermark` the
    query reads: a transform on one branch of a `Join` or `Union`, run in the query that joins
    them, would otherwise report the other branch's when it is lower."""
    watermarks: dict[str, Any] = {}
    lags: dict[str, Any] = {}
    schema = node.info.schema
    columns = sorted(node.info.watermarked)
    for derived in node.rule.derived:
        given = upstream.get(derived.source)
        if derived.held or derived.column not in columns or given is None:
            continue
        is_datetime = isinstance(given, _dt.datetime)
        value = derived.apply(to_micros(given) if is_datetime else given)
        latest = counts.get(Observation("n", node.id).latest(columns.index(derived.column)))
        if schema.type_of(derived.column) is _dt.datetime:
            if not MIN_MICROS <= value <= MAX_MICROS:
                continue  # past the calendar (a window bound after 9999): Spark's value stays
            watermarks[derived.column] = from_micros(value)
            if latest is not None:
                lags[derived.column] = (latest - value) * ONE_MICROSECOND
        else:
            watermarks[derived.column] = value
            if latest is not None:
                lags[derived.column] = latest - value
    return watermarks, lags


def watermark_estimates(
    node: Node,
    watermarks: Mapping[str, Any],
    upstream: Mapping[str, Any],
    counts: Mapping[str, int],
) -> dict[str, Any]:
    """The estimate of each column of `node` whose estimate differs from its watermark (in
    `watermarks`), as the direct runner reports it. Spark's query carries the watermark only,
    so the estimate is made from it: at a `WithWatermark` with `allowed_lateness`, its
    watermark plus the lateness (`E = W + L`); further down, derived from the input's reported
    estimates (`upstream`) by the node's rule, as the value is."""
    transform = node.transform
    if isinstance(transform, WithWatermark):
        lateness = transform.lateness_units(node.info.schema)
        value = watermarks.get(transform.column)
        if not lateness or value is None:
            return {}
        if isinstance(value, _dt.datetime):
            if to_micros(value) + lateness > MAX_MICROS:
                return {}
            return {transform.column: value + lateness * ONE_MICROSECOND}
        return {transform.column: value + lateness}
    if not upstream or len(node.inputs) != 1:
        return {}
    derived, _ = derived_watermarks(node, upstream, counts)
    return {column: value for column, value in derived.items() if value != watermarks.get(column)}
