"""What each transform kind declares of itself, read by both runners: whether it holds state
from one epoch to the next, the columns its input is partitioned by, the order it promises."""

from __future__ import annotations

import pytest

import sparkbeam as sb
from sparkbeam.graph import Node
from sparkbeam.runners.direct.units import Layout

SCHEMA = {"k": str, "t": int, "v": int}
ROWS = [{"k": "a", "t": 1, "v": 1}]


def stream(p: sb.Pipeline, label: str = "a") -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch(ROWS)
    return p | label >> source


def ignore(rows: list[dict[str, object]], batch_id: int) -> None:
    """A sink (never called: nothing runs here)."""


def last(build: object) -> Node:
    """The node of the last transform `build` applies to a watermarked stream."""
    p = sb.Pipeline()
    assert callable(build)
    build(p, stream(p).with_watermark("t", 0))
    return p.nodes[-1]


KINDS = {
    "Map": (lambda p, s: s | sb.Map(lambda r: r), False, None),
    "Filter": (lambda p, s: s | sb.Filter(lambda r: True), False, None),
    "Select": (lambda p, s: s | sb.Select("k", "t"), False, None),
    "Tumble": (lambda p, s: s | sb.Tumble("t", 10), False, None),
    "WithWatermark": (lambda p, s: s, True, None),
    "CombinePerKey": (
        lambda p, s: s | sb.CombinePerKey(["k", "t"], n=sb.Count()),
        True,
        ("k", "t"),
    ),
    "Sort": (lambda p, s: s | sb.Sort("t", keys=["k"]), True, ("k",)),
    "Session": (lambda p, s: s | sb.Session("t", 5, keys=["k"]), True, ("k",)),
    "Join": (
        lambda p, s: s | sb.Join(stream(p, "b").with_watermark("t", 0), on=["k", "t"]),
        True,
        ("k", "t"),
    ),
    "Union": (lambda p, s: s | sb.Union(stream(p, "b").with_watermark("t", 0)), False, None),
    "ForEachBatch": (lambda p, s: s | sb.ForEachBatch(ignore), False, ()),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_traits_of_each_kind(kind: str) -> None:
    build, holds_state, keys = KINDS[kind]
    node = last(build)
    assert type(node.transform).__name__ == kind
    assert node.transform.holds_state() is holds_state
    assert node.transform.partition_keys() == keys


def test_only_sort_promises_an_order() -> None:
    orders = {kind: last(build).transform.output_order() for kind, (build, _, _) in KINDS.items()}
    assert orders.pop("Sort") == ("t", ("k",))
    assert set(orders.values()) == {None}


def test_direct_units_follow_partition_keys() -> None:
    """A keyed transform runs on every unit behind an exchange, a sink on one, a Map where
    its input runs."""
    p = sb.Pipeline()
    watermarked = stream(p).with_watermark("t", 0)
    (
        watermarked
        | sb.Map(lambda r: r, keeps=["t"])
        | sb.Sort("t", keys=["k"])
        | sb.ForEachBatch(ignore)
    )
    layout = Layout.of(p.nodes, 4)
    assert [type(n.transform).__name__ for n in p.nodes][-3:] == ["Map", "Sort", "ForEachBatch"]
    assert layout.units[-3:] == (4, 4, 1)
    assert layout.keys[-3:] == (None, ("k",), ())
