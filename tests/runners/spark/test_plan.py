"""The Spark runner's plan phases, without Spark: a pipeline's nodes in, a refusal out.

Every refusal the phases decide (`plan.DECIDED`) is raised here from the nodes alone, and by
`SparkRunner.run` on a machine with no Java (a subprocess whose `JAVA_HOME` points nowhere).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

import sparkbeam as sb
from sparkbeam.runners.shared.refusals import Refusal
from sparkbeam.runners.spark import limits, plan

SCHEMA = {"k": str, "t": int, "v": int}
ROWS = [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 6, "v": 2}]


def stream(p: sb.Pipeline, label: str = "a") -> sb.PCollection:
    source = sb.TestStream(SCHEMA)
    source.add_epoch(ROWS)
    return p | label >> source


def emit_event_bounded(p: sb.Pipeline) -> None:
    p | sb.Create(ROWS, SCHEMA) | sb.WithWatermark("t", 0, emit="event")


def emit_event(p: sb.Pipeline) -> None:
    stream(p).with_watermark("t", 0, emit="event")


def update_mode(p: sb.Pipeline) -> None:
    windows = stream(p).with_watermark("t", 0).tumble("t", 10)
    windows.combine_per_key(["window_start"], emit="update", n=sb.Count())


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


REFUSED: dict[str, tuple[Callable[[sb.Pipeline], None], Refusal]] = {
    "emit-event-bounded": (emit_event_bounded, limits.EMIT_EVENT),
    "emit-event": (emit_event, limits.EMIT_EVENT),
    "update-mode": (update_mode, limits.UPDATE_MODE),
    "idle-processing-time": (idle_processing_time, limits.IDLE_PROCESSING_TIME),
    "bounded-read": (bounded_read, limits.BOUNDED_READ_IN_STREAM),
    "chained": (chained, limits.CHAINED_WATERMARKS),
    "chained-union": (chained_union, limits.CHAINED_WATERMARKS),
    "chained-join": (chained_join, limits.CHAINED_WATERMARKS),
}


def independent_union(p: sb.Pipeline) -> None:
    stream(p, "a").with_watermark("t", 0).union(stream(p, "b").with_watermark("t", 3))


def periodic_windows(p: sb.Pipeline) -> None:
    windows = stream(p).with_watermark("t", 0, idle_after=2).tumble("t", 10)
    windows.combine_per_key(["window_start"], n=sb.Count())


def bounded_connector(p: sb.Pipeline) -> None:
    read = sb.ReadFromSpark("json", {"path": "/nowhere"}, schema=SCHEMA, bounded=True)
    (p | "json" >> read).with_watermark("t", 0)


PLANNED = [independent_union, periodic_windows, bounded_connector]


def nodes_of(build: Callable[[sb.Pipeline], None]) -> sb.Pipeline:
    p = sb.Pipeline(runner=sb.DirectRunner())
    build(p)
    return p


def test_every_decided_refusal_is_tested() -> None:
    assert {refusal.name for _, refusal in REFUSED.values()} == {r.name for r in plan.DECIDED}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_phases_refuse(name: str) -> None:
    build, refusal = REFUSED[name]
    p = nodes_of(build)
    with pytest.raises(sb.PipelineError) as info:
        plan.refuse(p.nodes)
    assert refusal.matches(str(info.value)), str(info.value)


@pytest.mark.parametrize("build", PLANNED, ids=lambda build: build.__name__)
def test_phases_refuse_nothing_spark_runs(build: Callable[[sb.Pipeline], None]) -> None:
    plan.refuse(nodes_of(build).nodes)


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
for name, (build, refusal) in test_plan.REFUSED.items():
    p = sb.Pipeline(runner=sb.SparkRunner())
    build(p)
    try:
        p.run()
        outcome[name] = "ran"
    except sb.PipelineError as exc:
        outcome[name] = refusal.name if refusal.matches(str(exc)) else str(exc)
print(json.dumps(outcome))
"""


def test_refusals_without_java(tmp_path: object) -> None:
    """Each refused pipeline gets its refusal from `p.run()` where Java cannot start."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "JAVA_HOME")}
    env.update(JAVA_HOME="/nowhere/java", PATH="/nowhere/bin", PYTHONPATH=os.getcwd())
    done = subprocess.run(
        [sys.executable, "-c", NO_JAVA], env=env, capture_output=True, text=True, check=True
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {name: refusal.name for name, (_, refusal) in REFUSED.items()}
