"""A micro-batch's rows folded per group before a keyed Python operator merges them.

Spark hands a `transformWithState` processor its rows one Python value per
cell, and that conversion, not the aggregation, is most of an update-mode
operator's time. So each input partition first folds its rows in an Arrow
function (`mapInArrow`, which keeps no state and so runs in any streaming
query): per group, the direct runner's accumulators over the partition's rows
of the micro-batch, saved as one binary value. The processor then merges a
few partials per group (`Accumulators.merge`) where it added every row. The
aggregate of a group's rows is the merge of the aggregates of any split of
them, so the result is the same; float sums may differ in their last bits
(another order of additions), as they do between any two runners.

A group may be split over several partial rows (over partitions, or where
Arrow and Spark group keys differently, as `-0.0` and `0.0`): the processor
merges them all. The key copies, the judge and the release time of a partial
row are its group's first row's; all rows of a group share them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from sparkbeam.arrow import from_arrow
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.exact.judges import JUDGE, with_watermark_metadata
from sparkbeam.runners.spark.parts.keyed_state import KEY, RELEASE
from sparkbeam.runners.spark.parts.python_functions import guarded
from sparkbeam.schema import Schema
from sparkbeam.transforms.combine import AggregateFn, ValueBy

PARTIAL = "__sparkbeam_partial"
"""The column of a partial row that holds its group's saved accumulators (pickled)."""


def folded(
    prepared: DataFrame,
    n_keys: int,
    aggregates: Sequence[tuple[str, Any]],
    in_schema: Schema,
    read: Schema,
    out_schema: Schema,
    label: str,
) -> DataFrame:
    """`prepared` (the `read` columns, `n_keys` key copies, `RELEASE` and maybe `JUDGE`) as
    partial rows: per input partition and group, the key copies, the judge, the release and
    `PARTIAL`, the accumulators of `aggregates` over its rows."""
    carried = [f"{KEY}_{i}" for i in range(n_keys)]
    carried += [name for name in (JUDGE, RELEASE) if name in prepared.columns]
    fields = [prepared.schema[name] for name in carried]
    output = T.StructType([*fields, T.StructField(PARTIAL, T.BinaryType(), False)])
    fold = fold_batches(carried[:n_keys], carried, aggregates, in_schema, read, out_schema, label)
    partials = prepared.mapInArrow(fold, output)
    if JUDGE in carried:  # a new column: Spark's stateful operators find their watermark here
        partials = with_watermark_metadata(partials, JUDGE)
    return partials


def read_columns(aggregates: Sequence[tuple[str, Any]], schema: Schema) -> Schema:
    """The columns of `schema` the aggregates read, in its order: a built-in aggregate's own
    (`MinBy`/`MaxBy`: value and `by`; `Count()`: none), every column for a `CombineFn`."""
    read: set[str] = set()
    for _, aggregate in aggregates:
        if isinstance(aggregate, ValueBy):
            read.update((aggregate.value, aggregate.by))
        elif isinstance(aggregate, AggregateFn):
            read.update([] if aggregate.column is None else [aggregate.column])
        else:
            return schema
    return Schema(tuple(field for field in schema.fields if field[0] in read))


def fold_batches(
    keys: Sequence[str],
    carried: Sequence[str],
    aggregates: Sequence[tuple[str, Any]],
    in_schema: Schema,
    read: Schema,
    out_schema: Schema,
    label: str,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The Arrow function of `folded`: a partition's batches in, one partial row per group."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        slots: dict[Any, int] = {}
        firsts: list[pa.RecordBatch] = []  # each group's first row, in slot order
        with guarded(label):
            tables = [
                accumulators_for(aggregate, in_schema, out_schema.type_of(name), f"{label} {name}")
                for name, aggregate in aggregates
            ]
        for batch in batches:
            if not batch.num_rows:
                continue
            with guarded(label):
                known = len(slots)
                at = [slots.setdefault(key, len(slots)) for key in _group_keys(batch, keys)]
                new, seen = [], known
                for row, slot in enumerate(at):
                    if slot == seen:
                        new.append(row)
                        seen += 1
                if new:
                    firsts.append(batch.select(list(carried)).take(pa.array(new, pa.int64())))
                columns = from_arrow(batch, read)
                for table in tables:
                    table.ensure(len(slots))
                    table.add(at, columns)
        if not slots:
            return
        with guarded(label):
            saved = [
                cloudpickle.dumps([table.save(slot) for table in tables])
                for slot in range(len(slots))
            ]
            groups = pa.Table.from_batches(firsts)
            partials = groups.append_column(PARTIAL, pa.array(saved, pa.binary()))
        yield from partials.combine_chunks().to_batches()

    return run


def _group_keys(batch: pa.RecordBatch, keys: Sequence[str]) -> Sequence[Any]:
    """Each row's key values as one hashable value (a running aggregate: all rows one group)."""
    if not keys:
        return [()] * batch.num_rows
    values = []
    for name in keys:
        column = batch.column(name)
        listed = column.to_pylist()
        if pa.types.is_list(column.type):
            listed = [None if value is None else tuple(value) for value in listed]
        values.append(listed)
    return list(zip(*values, strict=True))
