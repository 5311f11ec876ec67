"""Where watermarks of different `WithWatermark`s meet (`Union`, `Join`): idle inputs,
`policy="max"` and what Spark's one watermark per query cannot separate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.exact.judges import Judge
from sparkbeam.runners.spark.exact.late_filter import late_against_current_watermark
from sparkbeam.runners.spark.exact.late_rows import not_late_at_merge
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.plan import merges as plan_merges
from sparkbeam.runners.spark.plan.keys import ROWS, Observation
from sparkbeam.runners.spark.plan.late_filters import LateFilters
from sparkbeam.runners.spark.plan.origins import merges_chained_origins
from sparkbeam.runners.spark.translate.context import (
    join_output,
)
from sparkbeam.schema import Schema
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import LATE_WATERMARK


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
    judges: list[dict[str, Judge]],
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
