"""The Spark runner's plan phases, without Spark: a pipeline's nodes in, a refusal out.

Every refusal the phases decide (`plan.DECIDED`) is raised here from the nodes alone, and on
a machine with no Java (a subprocess whose `JAVA_HOME` points nowhere) by `SparkRunner.run`,
or, for one raised when a PCollection is collected (`COLLECTED`), by `collect`.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache

import pytest

import sparkbeam as sb
from sparkbeam.runners.shared.refusals import Refusal
from sparkbeam.runners.spark import limits, plan
from tests.support.matrix import Unknown

SCHEMA = {"k": str, "t": int, "v": int}
ROWS = [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 6, "v": 2}]


def stream(p: sb.Pipeline, label: str = "a") -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch(ROWS)
    return p | label >> source


@cache
def json_directory() -> str:
    """A directory of one JSON file of `ROWS`, for live sources."""
    path = tempfile.mkdtemp(prefix="test-plan-")
    atexit.register(shutil.rmtree, path, True)
    with open(os.path.join(path, "part-000.json"), "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in ROWS)
    return path


def live(p: sb.Pipeline, label: str) -> sb.PCollection:
    """A live source (Spark's file source) where the pipeline runs with sinks."""
    return p | label >> sb.ReadFiles(json_directory(), "json", schema=SCHEMA, streaming=True)


def ignore(rows: list[dict[str, object]], batch_id: int) -> None:
    """A sink (never called: the pipelines here are refused)."""


def two_watermarked(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    return stream(p, "a").with_watermark("t", 0), stream(p, "b").with_watermark("t", 0)


def emit_event_bounded(p: sb.Pipeline) -> None:
    p | sb.Create(ROWS, SCHEMA) | sb.WithWatermark("t", 0, emit="event")


def emit_event(p: sb.Pipeline) -> None:
    stream(p).with_watermark("t", 0, emit="event")


def update_without_watermark(p: sb.Pipeline) -> None:
    stream(p).combine_per_key("k", emit="update", n=sb.Count())


def update_lateness_apart(p: sb.Pipeline) -> None:
    a = stream(p, "a").with_watermark("t", 0, allowed_lateness=5)
    b = stream(p, "b").with_watermark("t", 3, allowed_lateness=2)
    windows = a.union(b).tumble("t", 10)
    windows.combine_per_key(["window_start"], emit="update", n=sb.Count())


def update_held_key(p: sb.Pipeline) -> None:
    sessions = stream(p).with_watermark("t", 0).session("t", 3, keys="k")
    sessions.combine_per_key(["k", "window_start"], emit="update", n=sb.Count())


def update_mode_bounded(p: sb.Pipeline) -> None:
    windows = (p | sb.Create(ROWS, SCHEMA)).with_watermark("t", 0).tumble("t", 10)
    windows.combine_per_key(["window_start"], emit="update", n=sb.Count()).finals()


def update_after_session(p: sb.Pipeline) -> None:
    sessions = (p | sb.Create(ROWS, SCHEMA)).with_watermark("t", 0).session("t", 3, keys="k")
    sessions.combine_per_key(["k"], emit="update", n=sb.Count())


def update_after_sort_stream(p: sb.Pipeline) -> None:
    ordered = stream(p).with_watermark("t", 0).sort("t")
    ordered.combine_per_key(["k"], emit="update", n=sb.Count())


def idle_processing_time(p: sb.Pipeline) -> None:
    stream(p).with_watermark("t", 0, idle_after="30 seconds")


def bounded_read(p: sb.Pipeline) -> None:
    read = sb.ReadFromSpark("json", {"path": "/nowhere"}, schema=SCHEMA, bounded=True)
    (p | "json" >> read).union(stream(p))


def chained(p: sb.Pipeline) -> None:
    stream(p).with_watermark("t", 0).with_watermark("t", 5)


def chained_union(p: sb.Pipeline) -> None:
    a = stream(p).with_watermark("t", 0)
    a.union(a.with_watermark("t", 5))


def chained_join(p: sb.Pipeline) -> None:
    a = stream(p).with_watermark("t", 0).tumble("t", 10)
    b = a.with_watermark("window_end", 0)
    a.join(b, on=["k", "window_start"])


def no_translation(p: sb.Pipeline) -> None:
    stream(p) | Unknown()


def no_translation_bounded(p: sb.Pipeline) -> None:
    p | sb.Create(ROWS, SCHEMA) | Unknown()


def interval_join_max(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    a.join(b, on="k", times=("t", "t"), within=(0, 10), policy="max")


def held_window_start(p: sb.Pipeline) -> None:
    stream(p).with_watermark("t", 0).session("t", 3, keys="k").sort("window_start")


def merged_derived_apart(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    windows = a.tumble("t", 10).union(b.tumble("t", 5))
    windows.combine_per_key(["window_end"], n=sb.Count())


def join_key_derived_apart(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    left = a.tumble("t", 10).select("window_start", left="v")
    right = b.tumble("t", 20).select("window_start", right="v")
    left.join(right, on="window_start")


def union_derived_apart(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    a.select("k", t=sb.col("t") + 5, v="v").union(b, policy="max")


def policies_meet(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    a.union(b, policy="max").union(b.union(a))


def dropped_rows_meet(p: sb.Pipeline) -> sb.PCollection:
    a, b = two_watermarked(p)
    return a.late_rows().select("k", "t", "v").union(a.union(b))


def dropped_rows_meet_sink(p: sb.Pipeline) -> None:
    dropped_rows_meet(p).for_each_batch(ignore)


def live_and_replayed(p: sb.Pipeline) -> None:
    live(p, "a").union(stream(p, "b")).for_each_batch(ignore)


def idle_live_merge(p: sb.Pipeline) -> None:
    a = live(p, "a").with_watermark("t", 0)
    b = live(p, "b").with_watermark("t", 0, idle_after=1)
    a.union(b).for_each_batch(ignore)


def update_live_merge(p: sb.Pipeline) -> None:
    a = live(p, "a").with_watermark("t", 0)
    windows = a.union(live(p, "b").with_watermark("t", 0)).tumble("t", 10)
    windows.combine_per_key(["window_start"], emit="update", n=sb.Count()).for_each_batch(ignore)


def update_live_join(p: sb.Pipeline) -> None:
    left = live(p, "a").with_watermark("t", 0).tumble("t", 10).select("k", "window_start", a="v")
    right = live(p, "b").with_watermark("t", 0).tumble("t", 10).select("k", "window_start", b="v")
    joined = left.join(right, on=["k", "window_start"])
    joined.combine_per_key(["window_start"], emit="update", n=sb.Count()).for_each_batch(ignore)


def max_drift_live(p: sb.Pipeline) -> None:
    fast = live(p, "fast").with_watermark("t", 0, max_drift=5)
    fast.union(live(p, "slow").with_watermark("t", 0))
    fast.for_each_batch(ignore)


def max_drift_with_idle(p: sb.Pipeline) -> sb.PCollection:
    fast = stream(p, "fast").with_watermark("t", 0, max_drift=5)
    fast.union(stream(p, "slow").with_watermark("t", 0, idle_after=1))
    return fast


def max_drift_with_idle_sink(p: sb.Pipeline) -> None:
    max_drift_with_idle(p).for_each_batch(ignore)


def collect_live(p: sb.Pipeline) -> sb.PCollection:
    read = sb.ReadFromSpark("json", {"path": json_directory()}, schema=SCHEMA)
    return (p | "json" >> read).with_watermark("t", 0)


REFUSED: dict[str, tuple[Callable[[sb.Pipeline], None], Refusal]] = {
    "emit-event-bounded": (emit_event_bounded, limits.EMIT_EVENT),
    "emit-event": (emit_event, limits.EMIT_EVENT),
    "update-without-watermark": (update_without_watermark, limits.UPDATE_WITHOUT_WATERMARK),
    "update-lateness-apart": (update_lateness_apart, limits.UPDATE_LATENESS_APART),
    "update-held-key": (update_held_key, limits.UPDATE_HELD_KEY),
    "update-after-held-rows": (update_after_session, limits.UPDATE_AFTER_HELD_ROWS),
    "update-after-held-rows-stream": (update_after_sort_stream, limits.UPDATE_AFTER_HELD_ROWS),
    "idle-processing-time": (idle_processing_time, limits.IDLE_PROCESSING_TIME),
    "bounded-read": (bounded_read, limits.BOUNDED_READ_IN_STREAM),
    "chained": (chained, limits.CHAINED_WATERMARKS),
    "chained-union": (chained_union, limits.CHAINED_WATERMARKS),
    "chained-join": (chained_join, limits.CHAINED_WATERMARKS),
    "no-translation": (no_translation, limits.NO_TRANSLATION),
    "no-translation-bounded": (no_translation_bounded, limits.NO_TRANSLATION),
    "interval-join-max": (interval_join_max, limits.INTERVAL_JOIN_MAX),
    "held-window-start": (held_window_start, limits.HELD_WINDOW_START),
    "merged-derived-apart": (merged_derived_apart, limits.MERGED_DERIVED_APART),
    "join-key-derived-apart": (join_key_derived_apart, limits.JOIN_KEY_DERIVED_APART),
    "union-derived-apart": (union_derived_apart, limits.UNION_DERIVED_APART),
    "policies-meet": (policies_meet, limits.POLICIES_MEET),
    "dropped-rows-meet": (dropped_rows_meet_sink, limits.DROPPED_ROWS_MEET),
    "live-and-replayed": (live_and_replayed, limits.LIVE_AND_REPLAYED),
    "idle-live-merge": (idle_live_merge, limits.IDLE_LIVE_MERGE),
    "update-live-merge": (update_live_merge, limits.UPDATE_LIVE_MERGE),
    "update-live-join": (update_live_join, limits.UPDATE_LIVE_MERGE),
    "max-drift-live": (max_drift_live, limits.MAX_DRIFT_LIVE),
    "max-drift-with-idle": (max_drift_with_idle_sink, limits.MAX_DRIFT_WITH_IDLE),
}
"""Pipelines `p.run()` refuses (sinks are planned when it runs): `plan.refuse` and
`plan.refuse_translation` raise their refusals."""

COLLECTED: dict[str, tuple[Callable[[sb.Pipeline], sb.PCollection], Refusal]] = {
    "collect-live": (collect_live, limits.COLLECT_LIVE),
    "dropped-rows-meet": (dropped_rows_meet, limits.DROPPED_ROWS_MEET),
    "max-drift-with-idle": (max_drift_with_idle, limits.MAX_DRIFT_WITH_IDLE),
}
"""Pipelines that run, whose PCollection returned is refused when collected:
`plan.refuse_query` raises its refusal when it is first asked for, before Spark starts (a
streaming run with no sink gets its session for its first query)."""


def independent_union(p: sb.Pipeline) -> None:
    stream(p, "a").with_watermark("t", 0).union(stream(p, "b").with_watermark("t", 3))


def periodic_windows(p: sb.Pipeline) -> None:
    windows = stream(p).with_watermark("t", 0, idle_after=2).tumble("t", 10)
    windows.combine_per_key(["window_start"], n=sb.Count())


def bounded_connector(p: sb.Pipeline) -> None:
    read = sb.ReadFromSpark("json", {"path": "/nowhere"}, schema=SCHEMA, bounded=True)
    (p | "json" >> read).with_watermark("t", 0)


def session_then_combine(p: sb.Pipeline) -> None:
    sessions = stream(p).with_watermark("t", 0).session("t", 3, keys="k")
    sessions.combine_per_key(["window_start"], n=sb.Count())


def alike_windows_max(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    windows = a.tumble("t", 10).union(b.tumble("t", 10), policy="max")
    windows.combine_per_key(["window_end"], n=sb.Count())


def window_join_max(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    left = a.tumble("t", 10).select("window_start", left="v")
    right = b.tumble("t", 10).select("window_start", right="v")
    left.join(right, on="window_start", policy="max").for_each_batch(ignore)


def late_rows_of_one(p: sb.Pipeline) -> None:
    a, b = two_watermarked(p)
    a.union(b)
    a.late_rows().for_each_batch(ignore)


def live_merge(p: sb.Pipeline) -> None:
    live(p, "a").with_watermark("t", 0).union(live(p, "b").with_watermark("t", 0))


def update_live_source(p: sb.Pipeline) -> None:
    """Update mode over one live source (`idle_after` changes nothing where no watermarks
    meet), and after a merge of replayed sources."""
    windows = live(p, "a").with_watermark("t", 0, idle_after=1).tumble("t", 10)
    windows.combine_per_key(["window_start"], emit="update", n=sb.Count()).for_each_batch(ignore)
    a, b = two_watermarked(p)
    merged = a.union(b).tumble("t", 10)
    merged.combine_per_key(["window_start"], emit="update", n=sb.Count()).for_each_batch(ignore)


PLANNED = [
    update_mode_bounded,
    independent_union,
    periodic_windows,
    bounded_connector,
    session_then_combine,
    alike_windows_max,
    window_join_max,
    late_rows_of_one,
    live_merge,
    update_live_source,
]


def nodes_of(build: Callable[[sb.Pipeline], object]) -> sb.Pipeline:
    p = sb.Pipeline(runner=sb.DirectRunner())
    build(p)
    return p


def refuse(p: sb.Pipeline) -> None:
    """What `SparkRunner.run` refuses before it gets a session, in its order (the column types
    checked between the two, not here)."""
    plan.refuse(p.nodes)
    plan.refuse_translation(p.nodes)


def test_every_decided_refusal_is_tested() -> None:
    tested = {refusal.name for _, refusal in [*REFUSED.values(), *COLLECTED.values()]}
    assert tested == {r.name for r in plan.DECIDED}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_phases_refuse(name: str) -> None:
    build, refusal = REFUSED[name]
    p = nodes_of(build)
    with pytest.raises(sb.PipelineError) as info:
        refuse(p)
    assert refusal.matches(str(info.value)), str(info.value)


@pytest.mark.parametrize("name", sorted(COLLECTED))
def test_query_phases_refuse_collected(name: str) -> None:
    build, refusal = COLLECTED[name]
    p = sb.Pipeline(runner=sb.DirectRunner())
    target = build(p)
    refuse(p)  # the pipeline runs: only collecting `target` is refused
    with pytest.raises(sb.PipelineError) as info:
        plan.refuse_query(p.nodes, target.node, sink=False, live=False)
    message = str(info.value)
    assert refusal.matches(message), message


def test_collected_dropped_rows_of_one_origin_are_not_refused() -> None:
    p = sb.Pipeline(runner=sb.DirectRunner())
    a, b = two_watermarked(p)
    late = a.late_rows()
    a.union(b)
    plan.refuse_query(p.nodes, late.node, sink=False, live=False)


@pytest.mark.parametrize("build", PLANNED, ids=lambda build: build.__name__)
def test_phases_refuse_nothing_spark_runs(build: Callable[[sb.Pipeline], None]) -> None:
    refuse(nodes_of(build))


REFUSED_NODES = {
    "no-translation": "Unknown",
    "interval-join-max": "Join(k)",
    "held-window-start": "Sort(window_start)",
    "merged-derived-apart": "CombinePerKey(window_end)",
    "join-key-derived-apart": "Join(window_start)",
    "union-derived-apart": "Union",
    "policies-meet": "Union_2",
    "dropped-rows-meet": "LateRows(WithWatermark(t))",
    "live-and-replayed": "ForEachBatch(ignore)",
    "idle-live-merge": "WithWatermark(t)_2",
    "update-live-merge": "CombinePerKey(window_start)",
    "update-live-join": "CombinePerKey(window_start)",
    "max-drift-live": "WithWatermark(t)",
    "max-drift-with-idle": "WithWatermark(t)",
}
"""The node each refusal names: the one the Spark runner named when its translation refused
it (the merge; the node keying state on the column; the second policy met)."""


@pytest.mark.parametrize("name", sorted(REFUSED_NODES))
def test_refusals_name_the_node(name: str) -> None:
    build, _ = REFUSED[name]
    with pytest.raises(sb.PipelineError) as info:
        refuse(nodes_of(build))
    assert str(info.value).startswith(f"{REFUSED_NODES[name]}: "), str(info.value)


@pytest.mark.parametrize("kind", [int, "datetime"])
def test_a_delay_beyond_spark_time_is_refused(kind: object) -> None:
    """The longest delay Spark holds (`plan.delays`), refused on a stream before any session."""
    p = sb.Pipeline(runner=sb.DirectRunner())
    if kind is int:
        stream(p).with_watermark("t", 2**62)
    else:
        source = sb.TestStream({"t": datetime.datetime})
        source.add_epoch([{"t": datetime.datetime(2026, 1, 1)}])
        (p | source).with_watermark("t", datetime.timedelta(days=999_999_999))
    with pytest.raises(sb.PipelineError, match=r"^WithWatermark\(t\): delay .* at most \d+ milli"):
        refuse(p)


def test_translators_have_the_plan_s_kinds() -> None:
    """The plan's translated transforms are the translators' (no transform refused that a
    translator takes, none let through that none takes)."""
    from sparkbeam.runners.spark.translate.families import STREAMING_TRANSLATORS, TRANSLATORS

    assert set(TRANSLATORS) == plan.phases.TRANSLATED
    assert set(STREAMING_TRANSLATORS) == plan.phases.STREAMING_TRANSLATED


def test_plan_imports_without_pyspark() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import sparkbeam.runners.spark.plan\n"
        "assert not [m for m in sys.modules if m.startswith('pyspark.')], 'pyspark imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())


NO_JAVA = """
import json, sys
import sparkbeam as sb
from tests.runners.spark import test_plan

outcome = {}
for name, (build, refusal) in test_plan.WITHOUT_JAVA.items():
    p = sb.Pipeline(runner=sb.SparkRunner())
    build(p)
    try:
        p.run()
        outcome[name] = "ran"
    except sb.PipelineError as exc:
        outcome[name] = refusal.name if refusal.matches(str(exc)) else str(exc)
for name, (build, refusal) in test_plan.COLLECTED.items():
    p = sb.Pipeline(runner=sb.SparkRunner())
    collected = build(p)
    result = p.run()
    try:
        result.collect(collected)
        outcome[name] = "collected"
    except sb.PipelineError as exc:
        outcome[name] = refusal.name if refusal.matches(str(exc)) else str(exc)
print(json.dumps(outcome))
"""


def object_column(p: sb.Pipeline) -> None:
    stream(p).map(lambda row: {"k": row["k"], "payload": [row["v"]]}, {"k": str, "payload": object})


WITHOUT_JAVA = {**REFUSED, "object-column": (object_column, limits.OBJECT_COLUMN)}
"""Every refusal of the catalogue that `p.run()` raises for its pipeline from the graph alone;
the subprocess also collects each of `COLLECTED` (a streaming run with no sink starts no
session: the collected PCollection's queries are refused before Spark starts). Not here:
`PARQUET_UINT64` and `PARQUET_LIVE_NANOSECONDS`, which the files' contents decide (read when
the query is translated, through Spark's file systems)."""


def test_refusals_without_java(tmp_path: object) -> None:
    """Each refused pipeline gets its refusal from `p.run()` where Java cannot start."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "JAVA_HOME")}
    env.update(JAVA_HOME="/nowhere/java", PATH="/nowhere/bin", PYTHONPATH=os.getcwd())
    done = subprocess.run(
        [sys.executable, "-c", NO_JAVA], env=env, capture_output=True, text=True, check=True
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    everything = {**WITHOUT_JAVA, **COLLECTED}
    assert outcome == {name: refusal.name for name, (_, refusal) in everything.items()}
