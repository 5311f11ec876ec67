"""Merging saved accumulators: the aggregate of any split of a group's rows, merged, is the
aggregate of all of them (what the Spark runner relies on when it folds each input
partition's rows before its update-mode operator merges the parts)."""

from __future__ import annotations

import itertools
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pyspark import cloudpickle

import sparkbeam as sb
from sparkbeam.errors import DataError
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.schema import Schema

SCHEMA = Schema((("i", int), ("x", float), ("s", str), ("b", bool)))


class Spread(sb.CombineFn):
    """A user aggregate: the least and greatest `i` and the number of rows."""

    def create_accumulator(self) -> tuple[Any, Any, int]:
        return (None, None, 0)

    def add_input(self, acc: tuple[Any, Any, int], row: dict[str, Any]) -> tuple[Any, Any, int]:
        low, high, n = acc
        value = row["i"]
        if value is not None:
            low = value if low is None else min(low, value)
            high = value if high is None else max(high, value)
        return (low, high, n + 1)

    def merge_accumulators(self, accs: Any) -> tuple[Any, Any, int]:
        lows = [a[0] for a in accs if a[0] is not None]
        highs = [a[1] for a in accs if a[1] is not None]
        return (min(lows, default=None), max(highs, default=None), sum(a[2] for a in accs))

    def extract_output(self, acc: tuple[Any, Any, int]) -> str:
        return f"{acc[0]}..{acc[1]} of {acc[2]}"


AGGREGATES: dict[str, Any] = {
    "rows": sb.Count(),
    "count_x": sb.Count("x"),
    "sum_i": sb.Sum("i"),
    "sum_x": sb.Sum("x"),
    "mean_x": sb.Mean("x"),
    "min_x": sb.Min("x"),
    "max_x": sb.Max("x"),
    "min_s": sb.Min("s"),
    "distinct_x": sb.CountDistinct("x"),
    "set_x": sb.CollectSet("x"),
    "min_by": sb.MinBy("s", "x"),
    "max_by": sb.MaxBy("i", "x"),
    "any_b": sb.Any("b"),
    "all_b": sb.All("b"),
    "spread": Spread(),
}
OUTPUT_TYPES = {"rows": int, "count_x": int, "distinct_x": int, "sum_i": int, "spread": str}

rows = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-(2**63), 2**63 - 1),
        "x": st.none() | st.sampled_from([math.nan, math.inf, -0.0, 0.0]) | st.floats(-1e6, 1e6),
        "s": st.none() | st.sampled_from(["", "fig", "pear", "Äpfel"]),
        "b": st.none() | st.booleans(),
    }
)


def aggregate(name: str, parts: list[list[dict[str, Any]]]) -> Any:
    """`name` over `parts`: each part added to its own accumulators, saved through pickle (as
    a partial row carries it), then merged into one fresh table."""
    kind = OUTPUT_TYPES.get(name, float)
    merged = accumulators_for(AGGREGATES[name], SCHEMA, kind, name)
    for part in parts:
        table = accumulators_for(AGGREGATES[name], SCHEMA, kind, name)
        columns = {column: [row[column] for row in part] for column in SCHEMA.names}
        table.add([0] * len(part), columns)
        merged.merge(0, cloudpickle.loads(cloudpickle.dumps(table.save(0))))
    try:
        return merged.current(0)
    except DataError as exc:  # an integer sum outside 64 bits: the same error either way
        return str(exc)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@given(
    name=st.sampled_from(sorted(AGGREGATES)),
    data=st.lists(rows, min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
)
def test_merged_parts_give_the_aggregate_of_all_rows(
    name: str, data: list[dict[str, Any]], cuts: list[int]
) -> None:
    bounds = sorted({0, len(data), *(cut for cut in cuts if cut < len(data))})
    parts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    whole, merged = aggregate(name, [data]), aggregate(name, parts)
    assert same(merged, whole), (name, parts, merged, whole)


def test_nan_sets_merge_to_one_nan() -> None:
    """A NaN unpickled is another object: the merged set still counts NaN once."""
    parts = [[{"i": 1, "x": math.nan, "s": "a", "b": True}]] * 3
    assert aggregate("distinct_x", parts) == 1
    assert len(aggregate("set_x", parts)) == 1
