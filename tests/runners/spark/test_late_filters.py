"""The plan's choice of late-row filter, without Spark: one pipeline per strategy, each query
described as the runner describes it before translating (`queries.StreamingRun`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sparkbeam as sb
from sparkbeam.graph import Node
from sparkbeam.runners.spark.plan.ancestry import ancestors
from sparkbeam.runners.spark.plan.late_filters import (
    LateFilter,
    LateFilters,
    Query,
    Role,
    Strategy,
    late_filters,
)
from sparkbeam.runners.spark.plan.queries import is_live, is_replayed, staged_origins

SCHEMA = {"k": str, "t": int, "v": int}


def stream(p: sb.Pipeline, label: str) -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch([{"k": "a", "t": 1, "v": 1}])
    return p | label >> source


def final(nodes: Sequence[Node], target: Node, live: bool = False) -> LateFilters:
    """The final query of `target`'s run: the origins staged as the runner stages them
    (`staged_origins`)."""
    upstream = ancestors(nodes, target)
    staged = staged_origins(nodes, target, live)
    selected = ancestors(nodes, target, stop=staged)
    return late_filters(nodes, query(nodes, selected, staged, live, Role.FINAL, upstream))


def query(
    nodes: Sequence[Node],
    selected: set[int],
    staged: set[int] = frozenset(),  # type: ignore[assignment]
    live: bool = False,
    role: Role = Role.FINAL,
    upstream: set[int] | None = None,
) -> Query:
    replayed = frozenset(n for n in selected if is_replayed(nodes[n], live))
    back_to_back = any(is_live(nodes[n], live) for n in (upstream or selected))
    return Query(frozenset(selected), frozenset(staged), replayed, live, back_to_back, role)


def test_a_watermark_on_a_replayed_source_compares_with_the_epochs_mark() -> None:
    p = sb.Pipeline()
    w = stream(p, "a").with_watermark("t", 5)
    source = w.node.inputs[0]
    chosen = final(p.nodes, w.node)
    assert chosen.filters == {
        w.node.id: LateFilter(Strategy.EPOCH_MARK, source, f"__sparkbeam_wm_{w.node.id}")
    }
    assert not chosen.one_watermark and chosen.merges is Strategy.DEDUP


def test_a_stage_of_a_replayed_source_alone_is_fed() -> None:
    p = sb.Pipeline()
    a = stream(p, "a").with_watermark("t", 5)
    b = stream(p, "b").with_watermark("t", 5)
    merged = a.union(b)
    assert final(p.nodes, merged.node).filters == {}  # both staged: read from their stages
    stage = query(p.nodes, ancestors(p.nodes, a.node), role=Role.STAGE)
    assert late_filters(p.nodes, stage).of(a.node.id).strategy is Strategy.FED
    assert late_filters(p.nodes, stage).fed(a.node.id)
    shadow = query(p.nodes, ancestors(p.nodes, a.node), role=Role.SHADOW)
    assert late_filters(p.nodes, shadow).of(a.node.id).strategy is Strategy.EPOCH_MARK


def test_a_watermark_on_a_computed_input_deduplicates() -> None:
    p = sb.Pipeline()
    w = stream(p, "a").filter(sb.col("v") > 0).with_watermark("t", 5)
    assert final(p.nodes, w.node).of(w.node.id) == LateFilter(Strategy.DEDUP)
    stage = query(p.nodes, ancestors(p.nodes, w.node), role=Role.STAGE)
    assert late_filters(p.nodes, stage).of(w.node.id).strategy is Strategy.DEDUP


def live_windows(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    read = sb.ReadFromSpark("json", {"path": "/nowhere"}, schema=SCHEMA)
    w = (p | read).with_watermark("t", 5)
    per_window = w.tumble("t", 10).combine_per_key(["k", "window_start"], total=sb.Sum("v"))
    return w, per_window.combine_per_key(["window_start"], total=sb.Sum("total"))


def test_live_sources_judge_by_the_current_batchs_watermark() -> None:
    p = sb.Pipeline()
    w, windows = live_windows(p)
    shallow = final(p.nodes, w.node, live=True)
    assert shallow.of(w.node.id) == LateFilter(Strategy.DEDUP)
    assert shallow.one_watermark  # the filter and at most one operator after it
    deep = final(p.nodes, windows.node, live=True)
    assert deep.of(w.node.id) == LateFilter(Strategy.CURRENT)
    assert not deep.one_watermark and deep.merges is Strategy.CURRENT
    stage = query(p.nodes, ancestors(p.nodes, w.node), live=True, role=Role.LIVE_STAGE)
    assert late_filters(p.nodes, stage).one_watermark
    assert late_filters(p.nodes, stage).of(w.node.id) == LateFilter(Strategy.DEDUP)


def live_parquet(p: sb.Pipeline, directory: Path, format: str = "parquet") -> sb.PCollection:
    directory.mkdir(exist_ok=True)
    return p | sb.ReadFiles(str(directory), format=format, schema=SCHEMA, streaming=True)


def production(nodes: Sequence[Node], target: Node) -> LateFilters:
    """The final query of `target` in a production run (its live sources read by Spark)."""
    return final(nodes, target, live=True)


def test_a_watermark_straight_on_a_live_parquet_source_reads_the_footers(tmp_path: Path) -> None:
    p = sb.Pipeline()
    w = live_parquet(p, tmp_path / "in").with_watermark("t", 5)
    per_window = w.tumble("t", 10).combine_per_key(["k", "window_start"], total=sb.Sum("v"))
    windows = per_window.combine_per_key(["window_start"], total=sb.Sum("total"))
    source = w.node.inputs[0]
    # nothing reads its late rows: the reader drops them (`in_reader`)
    footers = LateFilter(Strategy.FOOTERS, source, f"__sparkbeam_wm_{w.node.id}", in_reader=True)
    for target in (w, windows):  # stateless: Spark's own watermark per operator, however deep
        chosen = production(p.nodes, target.node)
        assert chosen.filters == {w.node.id: footers}
        assert not chosen.one_watermark
    assert final(p.nodes, w.node).of(w.node.id).strategy is Strategy.EPOCH_MARK  # collected
    stage = query(p.nodes, ancestors(p.nodes, w.node), live=True, role=Role.LIVE_STAGE)
    assert late_filters(p.nodes, stage).of(w.node.id) == LateFilter(Strategy.DEDUP)


def test_the_reader_drops_late_rows_only_where_nothing_reads_them(tmp_path: Path) -> None:
    p = sb.Pipeline()
    rows = live_parquet(p, tmp_path / "in")
    w = rows.with_watermark("t", 5)
    late = w.late_rows()
    both = w.union(late.select("k", "t", "v"))
    assert production(p.nodes, w.node).of(w.node.id).in_reader
    for target in (late, both):  # the late rows read in the same query
        chosen = production(p.nodes, target.node).of(w.node.id)
        assert chosen.strategy is Strategy.FOOTERS and not chosen.in_reader, target.node.label
    other = rows.with_watermark("t", 10)  # two watermarks on one source: each its column
    merged = w.union(other)
    chosen = production(p.nodes, merged.node)
    assert chosen.of(w.node.id).strategy is chosen.of(other.node.id).strategy is Strategy.FOOTERS
    assert not chosen.of(w.node.id).in_reader and not chosen.of(other.node.id).in_reader


def test_live_sources_the_footers_cannot_judge_keep_the_stateful_filters(tmp_path: Path) -> None:
    p = sb.Pipeline()
    computed = live_parquet(p, tmp_path / "a").filter(sb.col("v") > 0).with_watermark("t", 5)
    text = live_parquet(p, tmp_path / "b", format="json").with_watermark("t", 5)
    (tmp_path / "c" / "_spark_metadata").mkdir(parents=True)
    written = live_parquet(p, tmp_path / "c").with_watermark("t", 5)
    for w in (computed, text, written):
        chosen = production(p.nodes, w.node)
        assert chosen.of(w.node.id) == LateFilter(Strategy.DEDUP), w.node.label
        assert chosen.one_watermark


def test_a_live_merge_of_sources_their_readers_judge_runs_in_the_sinks_query(
    tmp_path: Path,
) -> None:
    """Both `WithWatermark`s straight on live parquet sources: no stage, each filter compares
    with its own source's marks. One source the readers cannot judge (another format, a
    transform before its `WithWatermark`): every origin of the merge is a stage, as is every
    one when the graph alone decides (the refusals, before anything runs) or the merge is
    collected (its sources replayed)."""
    p = sb.Pipeline()
    a = live_parquet(p, tmp_path / "a").with_watermark("t", 5)
    b = live_parquet(p, tmp_path / "b").with_watermark("t", 10)
    text = live_parquet(p, tmp_path / "c", format="json").with_watermark("t", 10)
    filtered = live_parquet(p, tmp_path / "d").filter(sb.col("v") > 0).with_watermark("t", 10)
    union = a.union(b)
    assert staged_origins(p.nodes, union.node, live=True) == set()
    chosen = production(p.nodes, union.node)
    assert [chosen.of(w.node.id).strategy for w in (a, b)] == [Strategy.FOOTERS] * 2
    assert staged_origins(p.nodes, union.node) == {a.node.id, b.node.id}
    for other in (text, filtered):
        merged = a.union(other)
        assert staged_origins(p.nodes, merged.node, live=True) == {a.node.id, other.node.id}
