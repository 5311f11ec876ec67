"""One streaming query's plan, without Spark: a pipeline's nodes in, the query as data out
(`plan.streaming_query.query_plan`): its feed's channels, its epoch marks, the nodes counted
inside another's observation and the settings its plan alone decides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.plan.keys import ChannelKey
from sparkbeam.runners.spark.plan.late_filters import Role, Strategy
from sparkbeam.runners.spark.plan.settings import NO_EXCHANGE_REUSE, ONE_WATERMARK
from sparkbeam.runners.spark.plan.streaming_query import query_plan

SCHEMA = {"k": str, "t": int, "v": int}


def watermarked(p: sb.Pipeline, label: str = "a") -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch([{"k": "a", "t": 1, "v": 1}])
    return (p | label >> source).with_watermark("t", 0)


def test_a_watermark_on_a_replayed_source_reads_the_epoch_marks() -> None:
    p = sb.Pipeline()
    rows = watermarked(p)
    source, node = rows.node.inputs[0], rows.node.id
    plan = query_plan(p.nodes)
    assert plan.late_filters.of(node).strategy is Strategy.EPOCH_MARK
    (mark,) = plan.marks[ChannelKey("source", source).name()]
    assert dict(plan.epoch_marks) == {node: (source, mark)}
    assert plan.marked_sources == {source}
    assert dict(plan.counts_source) == {source: node}
    assert plan.counted_inside == {source, node}
    assert [channel.key for channel in plan.channels] == [
        ChannelKey("source", source),
        ChannelKey("sentinel", node),
    ]
    assert dict(plan.settings) == {}


def test_a_staged_origin_is_a_channel_unless_a_file_sink_holds_it() -> None:
    p = sb.Pipeline()
    merged = watermarked(p, "a").union(watermarked(p, "b"))
    origins = {p.nodes[i].id for i in merged.node.inputs}
    staged = query_plan(p.nodes, staged=origins)
    kinds = [(channel.key.kind, channel.key.node_id) for channel in staged.channels]
    assert [key for key in kinds if key[0] == "staged"] == [("staged", i) for i in sorted(origins)]
    assert staged.counted_inside == set()  # a staged origin is read, not judged, here
    assert dict(staged.settings) == {NO_EXCHANGE_REUSE[0]: NO_EXCHANGE_REUSE[1]}
    paths = {origin: f"/rows/{origin}" for origin in origins}
    files = query_plan(p.nodes, staged=origins, live=True, staged_paths=paths)
    assert not [channel for channel in files.channels if channel.key.kind == "staged"]


def test_a_query_over_live_sources_only_has_no_feed(tmp_path: Path) -> None:
    """Nothing writes into a live query's feed (no end of input, no idle input's marks), so it
    has none; collected, the same pipeline's sources are replayed through it."""
    p = sb.Pipeline()
    rows = p | sb.ReadFiles(str(tmp_path), schema=SCHEMA, streaming=True)
    watermark = rows.with_watermark("t", 0).node.id
    assert query_plan(p.nodes, live=True).channels == ()
    replayed = query_plan(p.nodes, live=False)
    assert [channel.key for channel in replayed.channels] == [
        ChannelKey("source", rows.node.id),
        ChannelKey("sentinel", watermark),
    ]


def test_a_live_stage_starts_with_one_watermark() -> None:
    p = sb.Pipeline()
    watermarked(p)
    plan = query_plan(p.nodes, live=True, role=Role.LIVE_STAGE)
    assert dict(plan.settings) == {ONE_WATERMARK[0]: ONE_WATERMARK[1]}


def test_the_plan_is_frozen() -> None:
    p = sb.Pipeline()
    watermarked(p)
    plan = query_plan(p.nodes)
    with pytest.raises(TypeError):
        plan.settings["spark.sql.shuffle.partitions"] = "1"  # type: ignore[index]
    with pytest.raises(AttributeError):
        plan.marked_sources.add(0)  # type: ignore[attr-defined]


def test_the_query_plan_imports_without_pyspark() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import sparkbeam.runners.spark.plan.streaming_query\n"
        "assert not [m for m in sys.modules if m.startswith('pyspark.')], 'pyspark imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())
