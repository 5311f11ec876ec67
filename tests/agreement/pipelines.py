"""Pipelines that both runners must agree on, row for row, over bounded input.

Each builder takes a pipeline and returns the PCollections to compare, by
name. `SORTED` names outputs whose order is part of the contract (after
`Sort`): there the sequence of sort keys must match exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import sparkbeam as sb

Builder = Callable[[sb.Pipeline], dict[str, sb.PCollection]]
T0 = datetime(1969, 12, 31, 23, 58)


def orders(n: int = 60) -> list[dict[str, Any]]:
    """Orders around the epoch (negative times), out of order, with a None time and amount."""
    rows: list[dict[str, Any]] = [
        {
            "order_id": f"o{i}",
            "customer": "abc"[i % 3],
            "amount": round(3.5 + (i * 7919 % 101) / 4, 2),
            "quantity": i % 4,
            "event_time": T0 + timedelta(seconds=(i * 37) % 300, microseconds=i * 1001),
        }
        for i in range(n)
    ]
    rows.append(
        {"order_id": "none-time", "customer": "a", "amount": 1.0, "quantity": 1, "event_time": None}
    )
    rows.append(
        {
            "order_id": "none-amount",
            "customer": "d",
            "amount": None,
            "quantity": None,
            "event_time": T0 + timedelta(seconds=5),
        }
    )
    return rows


def ticks(n: int = 50) -> list[dict[str, Any]]:
    """Integer time column, negative values included."""
    return [{"sensor": f"s{i % 4}", "t": (i * 13) % 97 - 40, "value": i % 7} for i in range(n)]


class Concat(sb.CombineFn):
    """A user CombineFn: the sorted order ids of the group, joined."""

    output_type = str

    def create_accumulator(self) -> list[str]:
        return []

    def add_input(self, accumulator: list[str], element: dict[str, Any]) -> list[str]:
        return [*accumulator, element["order_id"]]

    def merge_accumulators(self, accumulators: Any) -> list[str]:
        return [x for accumulator in accumulators for x in accumulator]

    def extract_output(self, accumulator: list[str]) -> str:
        return ",".join(sorted(accumulator))


class RowCount(sb.CombineFn):
    """A user CombineFn: the group's row count (next to it, built-in aggregates take the
    runners' Python path on Spark)."""

    output_type = int

    def create_accumulator(self) -> int:
        return 0

    def add_input(self, accumulator: int, element: dict[str, Any]) -> int:
        return accumulator + 1

    def merge_accumulators(self, accumulators: Any) -> int:
        return sum(accumulators)

    def extract_output(self, accumulator: int) -> int:
        return accumulator


def repeat(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A `FlatMap` function: `n` copies of the row, numbered in `i` (none for n = 0 or None)."""
    return [{"k": row["k"], "i": i, "t": row["t"]} for i in range(row["n"] or 0)]


def by_n(row: dict[str, Any], n: int) -> int:
    """A `Partition` function: the row's `n` (0 for None) modulo the number of outputs."""
    return (row["n"] or 0) % n


def windows(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    w = (p | sb.Create(orders())).with_watermark("event_time", "10 seconds")
    keys = ["customer", "window_start", "window_end"]
    return {
        "tumble": w.tumble("event_time", "1 minute", offset="-15 seconds").combine_per_key(
            keys,
            n=sb.Count(),
            amounts=sb.Count("amount"),
            total=sb.Sum("amount"),
            items=sb.Sum("quantity"),
            mean=sb.Mean("amount"),
            first=sb.Min("event_time"),
            last=sb.Max("order_id"),
        ),
        "hop": w.hop("event_time", "90 seconds", "30 seconds").combine_per_key(
            ["window_start", "window_end"], n=sb.Count(), total=sb.Sum("quantity")
        ),
        "hop_gaps": w.hop("event_time", "10 seconds", "45 seconds", offset="5 seconds"),
        "user_fn": w.tumble("event_time", "2 minutes").combine_per_key(
            ["window_start"], ids=Concat(), n=sb.Count()
        ),
        "global": w.combine_per_key([], n=sb.Count(), mean=sb.Mean("amount")),
    }


def integer_time(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    w = (p | sb.Create(ticks())).with_watermark("t", 3)
    return {
        "tumble": w.tumble("t", 10, offset=3).combine_per_key(
            ["sensor", "window_start"], n=sb.Count(), total=sb.Sum("value")
        ),
        "hop": w.hop("t", 20, 7).select("t", "window_start", "window_end"),
        "session": w.session("t", 9, keys="sensor").combine_per_key(
            ["sensor", "window_start", "window_end"], n=sb.Count()
        ),
        "sort_keys": w.sort("t", keys="sensor"),
        "shift": w.select("sensor", t2=sb.col("t") - 5, bucket=sb.col("t").truncate(8)),
    }


def mean_of_nothing(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    rows = [
        {"k": "a", "x": None, "t": 1},
        {"k": "a", "x": None, "t": 2},
        {"k": "b", "x": 2.5, "t": 3},
    ]
    src = p | sb.Create(rows, schema={"k": str, "x": float, "t": int})
    return {
        "aggregates": src.combine_per_key(
            "k", mean=sb.Mean("x"), total=sb.Sum("x"), n=sb.Count("x"), lo=sb.Min("x")
        ),
        "empty": src.filter(lambda row: False).combine_per_key("k", n=sb.Count()),
        "empty_global": src.filter(lambda row: False).combine_per_key([], n=sb.Count()),
    }


def sessions(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    base = datetime(2026, 4, 1, 16, 0)
    times = [0, 10, 20, 31, 60, 61, 75, 200, 190, 210]  # 10 s apart joins with gap 10 s
    rows = [
        {"user": "u1" if i % 3 else "u2", "t": base + timedelta(seconds=s)}
        for i, s in enumerate(times)
    ]
    w = (p | sb.Create(rows)).with_watermark("t", "1 minute")
    return {
        "rows": w.session("t", "10 seconds", keys="user"),
        "per_session": w.session("t", "10 seconds", keys="user").combine_per_key(
            ["user", "window_start", "window_end"], n=sb.Count()
        ),
        "unkeyed": w.session("t", "10 seconds"),
    }


def joins(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    base = datetime(2026, 4, 1, 12, 0)
    clicks = [
        {"user": u, "ad": f"ad{i}", "click_time": base + timedelta(minutes=m)}
        for i, (u, m) in enumerate([("a", 0), ("a", 5), ("b", 1), ("c", 30), (None, 2)])
    ]
    buys = [
        {"user": u, "item": f"i{i}", "buy_time": base + timedelta(minutes=m)}
        for i, (u, m) in enumerate([("a", 3), ("a", 16), ("b", 0), ("d", 4), (None, 3)])
    ]
    c = (p | "clicks" >> sb.Create(clicks)).with_watermark("click_time", "1 minute")
    b = (p | "buys" >> sb.Create(buys)).with_watermark("buy_time", "1 minute")
    out: dict[str, sb.PCollection] = {}
    for how in ("inner", "left", "right", "full"):
        out[f"interval_{how}"] = c.join(
            b,
            on="user",
            how=how,
            times=("click_time", "buy_time"),
            within=("0 minutes", "10 minutes"),
        )
    cw = c.tumble("click_time", "10 minutes").select("user", "ad", "window_start")
    bw = b.tumble("buy_time", "10 minutes").select("user", "item", "window_start")
    for how in ("inner", "full"):
        out[f"window_{how}"] = cw.join(bw, on=["user", "window_start"], how=how)
    out["clash"] = c.join(c, on="user")
    return out


def elementwise(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    w = (p | sb.Create(orders(30))).with_watermark("event_time", "5 seconds")
    doubled = w.map(
        lambda row: {**row, "amount": None if row["amount"] is None else row["amount"] * 2},
        keeps=["event_time"],
    )
    renamed = doubled.select(
        "order_id",
        ts=sb.col("event_time"),
        later=sb.col("event_time") + timedelta(minutes=5),
        minute=sb.col("event_time").truncate("1 minute") - "30 seconds",
    )
    return {
        "map": doubled,
        "filter": w.filter(lambda row: (row["quantity"] or 0) > 1),
        "select": renamed,
        "reshaped": w.map(
            lambda row: {"id": row["order_id"], "big": (row["amount"] or 0) > 20},
            schema={"id": str, "big": bool},
        ),
        "union": w.union(doubled, w.filter(lambda row: row["customer"] == "a")),
        "sorted": w.sort("event_time"),
    }


BUILDERS: dict[str, Builder] = {
    "windows": windows,
    "integer_time": integer_time,
    "mean_of_nothing": mean_of_nothing,
    "sessions": sessions,
    "joins": joins,
    "elementwise": elementwise,
}
SORTED = {
    ("integer_time", "sort_keys"): ("t", ("sensor",)),
    ("elementwise", "sorted"): ("event_time", ()),
}


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.12g}")
    if isinstance(value, float) and value != value:
        return "NaN"  # one NaN equals another, as in Spark
    if isinstance(value, list):  # a list column (`CollectSet`)
        return tuple(_canonical(item) for item in value)
    return value


def row_multiset(rows: list[dict[str, Any]]) -> Counter[tuple[tuple[str, Any], ...]]:
    """Rows as a multiset; floats to 12 significant digits (Spark adds in another order),
    NaNs equal, lists as tuples."""
    return Counter(tuple(sorted((k, _canonical(v)) for k, v in row.items())) for row in rows)


def order_within_keys(
    rows: list[dict[str, Any]], column: str, keys: tuple[str, ...]
) -> dict[tuple[Any, ...], list[Any]]:
    by_key: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        by_key.setdefault(tuple(row[k] for k in keys), []).append(row[column])
    return by_key
