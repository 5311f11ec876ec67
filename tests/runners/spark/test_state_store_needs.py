"""Which nodes need Spark's RocksDB state store, from the needs their streaming translators
declare (`streaming(kind, state_store=...)`), without Spark: the query's `STATE_STORE`
settings follow from them (end to end: `test_state_store.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import sparkbeam as sb
from sparkbeam.graph import Node
from sparkbeam.runners.spark import translate
from sparkbeam.runners.spark.plan.ancestry import ancestors
from sparkbeam.runners.spark.plan.late_filters import LateFilters, Query, late_filters
from sparkbeam.runners.spark.translate.context import needs_state_store
from sparkbeam.runners.spark.translate.families import STATE_STORE_NEEDS, STREAMING_TRANSLATORS
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.windows import Session

SCHEMA = {"k": str, "t": int, "v": int}


@dataclass
class Planned:
    """What a query knows before translating (the parts the declared needs read)."""

    late_filters: LateFilters
    staged: frozenset[int] = frozenset()
    origins: dict[int, frozenset[int]] = field(default_factory=dict)


def needing(p: sb.Pipeline, target: sb.PCollection, replayed: bool = True) -> list[str]:
    """The kinds of the nodes of `target`'s query that need the state store."""
    selected = frozenset(ancestors(p.nodes, target.node))
    sources = frozenset(n.id for n in p.nodes if not n.inputs) if replayed else frozenset()
    run = Planned(late_filters(p.nodes, Query(selected, replayed=sources)))
    nodes: list[Node] = [p.nodes[i] for i in sorted(selected)]
    return [type(n.transform).__name__ for n in nodes if needs_state_store(run, n)]  # type: ignore[arg-type]


def watermarked(p: sb.Pipeline) -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch([{"k": "a", "t": 1, "v": 1}])
    return (p | source).with_watermark("t", 0)


def test_a_sort_needs_the_state_store_a_map_does_not() -> None:
    p = sb.Pipeline()
    mapped = watermarked(p).map(lambda r: r, keeps=["t"])
    assert needing(p, mapped) == []
    assert needing(p, mapped.sort("t", keys="k")) == ["Sort"]


def test_sessions_always_builtin_combines_never() -> None:
    p = sb.Pipeline()
    w = watermarked(p)
    assert needing(p, w.session("t", 3, keys="k")) == ["Session"]
    assert set(STATE_STORE_NEEDS) >= {Sort, Session}


def test_an_update_stream_needs_it_its_finals_do_not() -> None:
    p = sb.Pipeline()
    windows = watermarked(p).tumble("t", 10)
    updates = windows.combine_per_key(["window_start"], emit="update", n=sb.Count())
    assert needing(p, updates.finals()) == ["CombinePerKey"]


def test_a_staged_node_only_reads() -> None:
    p = sb.Pipeline()
    sorted_rows = watermarked(p).sort("t")
    selected = frozenset(ancestors(p.nodes, sorted_rows.node))
    run = Planned(late_filters(p.nodes, Query(selected)), staged=frozenset({sorted_rows.node.id}))
    assert not needs_state_store(run, sorted_rows.node)  # type: ignore[arg-type]


def test_a_filter_judging_by_the_current_watermark_needs_it() -> None:
    """Over live sources, a final query deeper than the filter and one stateful operator
    filters late rows with a `transformWithState`; fed from a replayed source, by the marks
    in its epochs (no state)."""
    p = sb.Pipeline()
    twice = watermarked(p).sort("t", keys="k").sort("t", keys="k")
    selected = frozenset(ancestors(p.nodes, twice.node))
    live = Planned(late_filters(p.nodes, Query(selected, back_to_back=True)))
    kinds = [type(p.nodes[i].transform).__name__ for i in sorted(selected)]
    needs = [needs_state_store(live, p.nodes[i]) for i in sorted(selected)]  # type: ignore[arg-type]
    assert list(zip(kinds, needs, strict=True)) == [
        ("TestStreamSource", False),
        ("WithWatermark", True),
        ("Sort", True),
        ("Sort", True),
    ]
    assert needing(p, twice) == ["Sort", "Sort"]


def test_needs_come_from_declarations_alone() -> None:
    """Whether a query needs the state store is read from its kinds' declared needs, each
    of a kind with a streaming translator, never recorded while translating (no context
    variable in the Spark runner)."""
    assert set(STATE_STORE_NEEDS) <= set(STREAMING_TRANSLATORS)
    runner = Path(translate.__file__).parent.parent
    recording = [
        path.relative_to(runner).as_posix()
        for path in sorted(runner.rglob("*.py"))
        if "ContextVar" in path.read_text()
    ]
    assert recording == []
