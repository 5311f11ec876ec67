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
merges them all. A partial row carries the judge and release time of one of
its group's rows, which depend on the group's keys only, so every row of the
group has them; the processor takes the key values from Spark's grouping key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from sparkbeam.arrow import from_arrow
from sparkbeam.runners.shared.accumulators import Accumulators, accumulators_for
from sparkbeam.runners.spark.exact.judges import JUDGE, with_watermark_metadata
from sparkbeam.runners.spark.parts.keyed_state import KEY, RELEASE
from sparkbeam.runners.spark.parts.python_functions import guarded
from sparkbeam.schema import Schema, one_nan
from sparkbeam.transforms.combine import AggregateFn, ValueBy

PARTIAL = "__sparkbeam_partial"
"""The column of a partial row that holds its group's saved accumulators (pickled)."""

ROW = "__sparkbeam_row"
"""The row numbers Arrow lists per group (`_slots`)."""


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


def merge_partials(tables: Sequence[Accumulators], partials: Sequence[Any]) -> None:
    """Merge a group's partial rows (`folded`) into its accumulators `tables` (slot 0)."""
    for partial in partials:
        for table, saved in zip(tables, cloudpickle.loads(partial[PARTIAL]), strict=True):
            table.merge(0, saved)


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
        firsts: list[pa.RecordBatch] = []  # a row of each group, in slot order
        with guarded(label):
            tables = [
                accumulators_for(aggregate, in_schema, out_schema.type_of(name), f"{label} {name}")
                for name, aggregate in aggregates
            ]
        for batch in batches:
            if not batch.num_rows:
                continue
            with guarded(label):
                at, new = _slots(batch, keys, slots)
                if len(new):
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


def _slots(
    batch: pa.RecordBatch, keys: Sequence[str], slots: dict[Any, int]
) -> tuple[list[int], Sequence[int]]:
    """Each row's slot, giving groups new to `slots` the next ones, and a row of each new
    group in the order of their slots. Arrow groups the rows (`-0.0` apart from `0.0`, where
    Python's equality then joins them); keys Arrow cannot group by (lists) go row by row."""
    rows = batch.num_rows
    if not keys:  # a running aggregate: one group
        new = [] if slots else [0]
        slots.setdefault((), 0)
        return [0] * rows, new
    table = pa.Table.from_batches([batch.select(list(keys))])
    try:
        grouped = table.append_column(ROW, pa.array(np.arange(rows))).group_by(
            list(keys), use_threads=False
        )
        listed = grouped.aggregate([(ROW, "list")])
    except pa.ArrowNotImplementedError:
        return _slots_by_row(batch, keys, slots)
    lists = listed.column(f"{ROW}_list").combine_chunks()
    members, starts = lists.values.to_numpy(), lists.offsets.to_numpy()
    known = len(slots)
    values = [one_nan(listed.column(name).to_pylist()) for name in keys]
    slot_of = np.array([slots.setdefault(key, len(slots)) for key in zip(*values, strict=True)])
    at = np.empty(rows, np.int64)
    at[members] = np.repeat(slot_of, np.diff(starts))
    ids, first_group = np.unique(slot_of, return_index=True)
    new = members[starts[first_group[ids >= known]]]
    return at.tolist(), new


def _slots_by_row(
    batch: pa.RecordBatch, keys: Sequence[str], slots: dict[Any, int]
) -> tuple[list[int], list[int]]:
    """`_slots`, one row at a time (list keys become tuples)."""
    values = []
    for name in keys:
        column = batch.column(name)
        listed = column.to_pylist()
        if pa.types.is_list(column.type):
            listed = [None if value is None else tuple(one_nan(value)) for value in listed]
        values.append(one_nan(listed))
    known = len(slots)
    at = [slots.setdefault(key, len(slots)) for key in zip(*values, strict=True)]
    new, seen = [], known
    for row, slot in enumerate(at):
        if slot == seen:
            new.append(row)
            seen += 1
    return at, new
