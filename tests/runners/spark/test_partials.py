"""The fold before Spark's keyed Python operators, without Spark: each input partition's rows
become one partial row per group, and merging a group's partials gives the aggregate of its
rows (what the update-mode operator and the `CombineFn` operator then emit)."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from pyspark import cloudpickle

import sparkbeam as sb
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.exact.judges import JUDGE
from sparkbeam.runners.spark.parts.keyed_state import KEY, RELEASE
from sparkbeam.runners.spark.translate.partials import PARTIAL, fold_batches
from sparkbeam.schema import Schema

KEYS = (f"{KEY}_0", f"{KEY}_1")
CARRIED = (*KEYS, JUDGE, RELEASE)
IN_SCHEMA = Schema((("v", int), ("x", float)))
AGGREGATES = (
    ("n", sb.Count()),
    ("total", sb.Sum("v")),
    ("mean", sb.Mean("x")),
    ("top", sb.Max("x")),
    ("kinds", sb.CountDistinct("x")),
)
OUT_SCHEMA = Schema((("n", int), ("total", int), ("mean", float), ("top", float), ("kinds", int)))

rows = st.tuples(
    st.sampled_from([None, "a", "b", ""]),
    st.sampled_from([None, math.nan, -0.0, 0.0, 1.5]),
    st.none() | st.integers(-(2**40), 2**40),
    st.none() | st.sampled_from([math.nan, -1.0, 0.25, 3.0]),
)


def spark_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The group Spark puts a row in: NaN equals NaN, -0.0 equals 0.0."""
    k, f = row[0], row[1]
    return (k, "NaN" if f is not None and f != f else f)


def batch(part: list[tuple[Any, ...]], second_key: pa.DataType) -> pa.RecordBatch:
    second = [r[1] for r in part]
    if pa.types.is_list(second_key):
        second = [None if f is None else [f] for f in second]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r[2] for r in part], pa.int64()),
            pa.array([r[3] for r in part], pa.float64()),
            pa.array([r[0] for r in part], pa.string()),
            pa.array(second, second_key),
            pa.array([0] * len(part), pa.timestamp("us", tz="UTC")),
            pa.array([7] * len(part), pa.int64()),
        ],
        names=["v", "x", *CARRIED],
    )


def fold(partition: list[list[tuple[Any, ...]]], second_key: pa.DataType) -> pa.Table:
    run = fold_batches(KEYS, CARRIED, AGGREGATES, IN_SCHEMA, IN_SCHEMA, OUT_SCHEMA, "Combine")
    made = list(run(iter([batch(part, second_key) for part in partition])))
    return pa.Table.from_batches(made) if made else pa.table({})


def aggregate(saved_or_rows: list[Any], merge: bool) -> list[Any]:
    tables = [accumulators_for(a, IN_SCHEMA, OUT_SCHEMA.type_of(n), n) for n, a in AGGREGATES]
    for i, table in enumerate(tables):
        if merge:
            for saved in saved_or_rows:
                table.merge(0, saved[i])
        else:
            columns = {"v": [r[2] for r in saved_or_rows], "x": [r[3] for r in saved_or_rows]}
            table.add([0] * len(saved_or_rows), columns)
    return [table.current(0) for table in tables]


def same(a: list[Any], b: list[Any]) -> bool:
    return all(
        (x != x and y != y) or (x == y if not isinstance(x, float) else math.isclose(x, y))
        for x, y in zip(a, b, strict=True)
    )


@given(
    partitions=st.lists(st.lists(st.lists(rows, max_size=12), max_size=4), min_size=1, max_size=3),
    list_key=st.booleans(),
)
def test_partials_merged_per_group_give_the_aggregate_of_its_rows(
    partitions: list[list[list[tuple[Any, ...]]]], list_key: bool
) -> None:
    second_key = pa.list_(pa.float64()) if list_key else pa.float64()  # Arrow cannot group lists
    merged: dict[tuple[Any, ...], list[Any]] = {}
    for partition in partitions:
        table = fold(partition, second_key)
        groups = {spark_key(r) for part in partition for r in part}
        # one partial row per group and partition: Python's equality joins -0.0 and 0.0
        assert table.num_rows == len(groups)
        for row in table.to_pylist():
            assert (row[JUDGE].timestamp(), row[RELEASE]) == (0, 7)
            second = row[KEYS[1]][0] if list_key and row[KEYS[1]] is not None else row[KEYS[1]]
            key = spark_key((row[KEYS[0]], second))
            merged.setdefault(key, []).append(cloudpickle.loads(row[PARTIAL]))
    every = [r for partition in partitions for part in partition for r in part]
    assert set(merged) == {spark_key(r) for r in every}
    for key, partials in merged.items():
        of_group = [r for r in every if spark_key(r) == key]
        assert same(aggregate(partials, merge=True), aggregate(of_group, merge=False)), key
