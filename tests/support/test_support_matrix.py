"""Every feature on every mode does what the support matrix declares (`matrix.FEATURES`).

- `Runs`: on the direct runner, the pipeline gives the rows worked out by
  hand (`expected.py`); elsewhere it gives the direct runner's rows on the same
  input (epoch by epoch on Spark streaming; `metrics()` counts too where the
  feature is metrics); on live sources, `p.run()` plans and starts the sinks'
  queries without a refusal (Spark's start itself is stubbed: the live
  queries run in `tests/runners/spark/test_streaming_production.py`).
- `Refused`: a `PipelineError` whose message is the catalogue entry's
  (`sparkbeam/runners/*/limits.py`), naming a node, raised before any query,
  Spark job or direct run starts; those the Spark runner decides from the graph alone
  (its plan's phases, and Spark's column types) come before any session exists, at
  `p.run()` or, for a collected PCollection of a run with no sink, when it is collected
  (`at="collect"`), checked on a runner that fails if it asks for one (`sessionless`):
  these cells are not Spark-marked.

The Spark streaming cases that run are collected side by side, three
queries at a time, once for the module (`streaming_rows`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql.streaming import DataStreamWriter

import sparkbeam as sb
from sparkbeam.runners.direct import limits as direct_limits
from sparkbeam.runners.direct.executor import Executor
from sparkbeam.runners.direct.parallel import ParallelExecutor
from sparkbeam.runners.shared.refusals import BATCH, DIRECT, LIVE, MODES, PARALLEL, STREAMING
from sparkbeam.runners.spark import limits as spark_limits
from sparkbeam.runners.spark import plan
from sparkbeam.runners.spark.results.streaming_results import SIDE_BY_SIDE
from sparkbeam.runners.spark.runner import SparkRunner
from tests.support.expected import DIRECT_ROWS
from tests.support.matrix import FEATURES, Feature, Mode, Refused, Runs

SPARK_MODES = (BATCH, STREAMING, LIVE)
BEFORE_SESSION = frozenset(plan.DECIDED) | {spark_limits.OBJECT_COLUMN}
"""The Spark runner's refusals decided before it gets or starts a session: at `p.run()`, or,
for a collected PCollection of a run with no sink (which starts no session), when it is
collected."""


def needs_spark(feature: Feature, mode: str) -> bool:
    """Whether the cell needs a Spark session: a Spark mode, but for a refusal raised before
    any session exists."""
    outcome = feature.outcomes[mode]
    if isinstance(outcome, Refused) and outcome.refusal in BEFORE_SESSION:
        return False
    return mode in SPARK_MODES


def sessionless(monkeypatch: pytest.MonkeyPatch) -> SparkRunner:
    """A Spark runner that fails if it gets or starts a session."""

    def session(runner: SparkRunner) -> None:
        raise AssertionError("the Spark runner asked for a session before the refusal")

    monkeypatch.setattr(SparkRunner, "spark", property(session))
    return SparkRunner()


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as a sorted list, comparable whatever their order and types."""
    return sorted(repr(sorted(row.items())) for row in rows)


def counts(result: Any) -> dict[str, tuple[int, int, int, int]]:
    return {
        label: (m.rows_in, m.rows_out, m.late_rows, m.invalid_rows)
        for label, m in result.metrics().items()
    }


def observe(feature: Feature, result: Any, outputs: list[sb.PCollection], by_epoch: bool) -> Any:
    """What is compared: each output's rows (by epoch, or all), and `metrics()` counts."""
    if by_epoch:
        rows: list[Any] = [[canonical(e) for e in result.collect_by_epoch(o)] for o in outputs]
    else:
        rows = [canonical(result.collect(o)) for o in outputs]
    return rows, counts(result) if feature.metrics else None


def runner_for(mode: str, request: pytest.FixtureRequest) -> Any:
    if mode == DIRECT:
        return sb.DirectRunner()
    if mode == PARALLEL:
        return sb.DirectRunner(parallelism=2)
    return request.getfixturevalue("spark_runner")


def reference(feature: Feature, mode: str, directory: str, by_epoch: bool) -> Any:
    """The direct runner's observation of `feature` over `mode`'s kind of input."""
    p = sb.Pipeline(runner=sb.DirectRunner())
    outputs = feature.build(p, Mode(mode, directory, reference=True))
    return observe(feature, p.run(), outputs, by_epoch)


def ignore(rows: list[dict[str, Any]], batch_id: int) -> None:
    """A sink for the live cases (never called: their queries are not started)."""


class StubQuery:
    """What `DataStreamWriter.start` returns on live sources here: a query that never runs."""

    def __init__(self) -> None:
        self.id = uuid.uuid4()

    def stop(self) -> None:
        pass


@contextlib.contextmanager
def nothing_runs(
    mode: str, runner: Any, monkeypatch: pytest.MonkeyPatch, session: bool
) -> Iterator[None]:
    """Fail if a direct run, a Spark streaming query or a Spark job starts inside (with no
    `session`, the runner fails itself if it asks for one: `sessionless`)."""

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"{mode}: something ran before the refusal")

    if mode not in SPARK_MODES or not session:
        monkeypatch.setattr(Executor, "run", started)
        monkeypatch.setattr(ParallelExecutor, "run", started)
        yield
        return
    monkeypatch.setattr(DataStreamWriter, "start", started)
    context = runner.spark.sparkContext
    group = f"support-matrix-{id(monkeypatch)}"
    context.setJobGroup(group, "a refused pipeline")
    try:
        yield
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert not context.statusTracker().getJobIdsForGroup(group), f"{mode}: a Spark job ran"


def assert_refused(
    feature: Feature,
    mode: str,
    outcome: Refused,
    runner: Any,
    directory: str,
    monkeypatch: pytest.MonkeyPatch,
    session: bool,
) -> None:
    p = sb.Pipeline(runner=runner)
    outputs = feature.build(p, Mode(mode, directory))
    if mode == LIVE and outcome.at == "run":
        for output in outputs:
            output.for_each_batch(ignore)
    with nothing_runs(mode, runner, monkeypatch, session):
        if outcome.at == "collect":
            result = p.run()
            with pytest.raises(sb.PipelineError) as info:
                result.collect(outputs[0])
        else:
            with pytest.raises(sb.PipelineError) as info:
                p.run()
    message = str(info.value)
    assert outcome.refusal.matches(message), f"not {outcome.refusal.name}: {message}"
    assert any(message.startswith(f"{node.label}: ") for node in p.nodes), message


def assert_planned(feature: Feature, runner: Any, directory: str, monkeypatch: Any) -> None:
    """Live sources: `p.run()` plans every sink's queries and starts them, refusing nothing."""

    started: list[Any] = []

    def start(writer: Any, *args: Any, **kwargs: Any) -> StubQuery:
        started.append(writer)
        return StubQuery()

    monkeypatch.setattr(DataStreamWriter, "start", start)
    p = sb.Pipeline(runner=runner)
    outputs = feature.build(p, Mode(LIVE, directory))
    for output in outputs:
        output.for_each_batch(ignore)
    result = p.run()
    result.stop()
    assert len(started) >= len(outputs)


@pytest.fixture(scope="module")
def streaming_rows(spark_runner: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each feature that runs on Spark streaming: its observation (or the error it raised)."""
    runs = [f for f in FEATURES if isinstance(f.outcomes[STREAMING], Runs)]
    built: dict[str, tuple[Any, list[sb.PCollection]]] = {}
    observed: dict[str, Any] = {}
    for feature in runs:
        p = sb.Pipeline(runner=spark_runner)
        try:
            outputs = feature.build(p, Mode(STREAMING, str(tmp_path_factory.mktemp("s"))))
            built[feature.name] = (p.run(), outputs)
        except Exception as exc:  # reported by the feature's own test
            observed[feature.name] = exc

    def settle(result: Any, outputs: list[sb.PCollection], metrics: bool) -> None:
        """Run every query the observation reads, its outputs' together (`prepare`)."""
        result.prepare(*outputs)
        if metrics:
            result.metrics()

    wanted = {feature.name: feature.metrics for feature in runs}
    with concurrent.futures.ThreadPoolExecutor(max_workers=SIDE_BY_SIDE) as pool:
        futures = [
            (name, pool.submit(settle, result, outputs, wanted[name]))
            for name, (result, outputs) in built.items()
        ]
        failed = {name: f.exception() for name, f in futures if f.exception() is not None}
    for feature in runs:
        if feature.name in observed:
            continue
        if feature.name in failed:
            observed[feature.name] = failed[feature.name]
            continue
        result, outputs = built[feature.name]
        observed[feature.name] = observe(feature, result, outputs, by_epoch=True)
    return observed


CASES = [
    pytest.param(
        feature,
        mode,
        id=f"{index:02d}-{mode}",
        marks=[pytest.mark.spark] if needs_spark(feature, mode) else [],
    )
    for (index, feature), mode in itertools.product(enumerate(FEATURES), MODES)
]


@pytest.mark.parametrize(("feature", "mode"), CASES)
def test_feature_on_mode(
    feature: Feature,
    mode: str,
    request: pytest.FixtureRequest,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = feature.outcomes[mode]
    directory = str(tmp_path)
    if isinstance(outcome, Refused):
        session = needs_spark(feature, mode)
        if session or mode not in SPARK_MODES:
            runner = runner_for(mode, request)
        else:
            runner = sessionless(monkeypatch)
        assert_refused(feature, mode, outcome, runner, directory, monkeypatch, session)
        return
    if mode == LIVE:
        assert_planned(feature, runner_for(mode, request), directory, monkeypatch)
        return
    if mode == STREAMING:
        got = request.getfixturevalue("streaming_rows")[feature.name]
        if isinstance(got, Exception):
            raise got
    else:
        p = sb.Pipeline(runner=runner_for(mode, request))
        outputs = feature.build(p, Mode(mode, directory))
        got = observe(feature, p.run(), outputs, by_epoch=False)
    if mode == DIRECT:
        rows, _ = got
        assert rows == [canonical(output) for output in DIRECT_ROWS[feature.name]]
    elif outcome.compared:
        assert got == reference(feature, mode, directory, by_epoch=mode == STREAMING)


def test_every_refusal_is_in_the_matrix() -> None:
    """Each catalogue entry is declared by some feature, and only on modes it names."""

    declared = {
        (outcome.refusal.name, mode)
        for feature in FEATURES
        for mode, outcome in feature.outcomes.items()
        if isinstance(outcome, Refused)
    }
    catalogue = [*direct_limits.REFUSALS, *spark_limits.REFUSALS]
    by_name = {refusal.name: refusal for refusal in catalogue}
    assert len(by_name) == len(catalogue), "two refusals share a name"
    for name, mode in declared:
        assert mode in by_name[name].modes, f"{name} is declared on {mode}, not in its modes"
    unused = set(by_name) - {name for name, _ in declared}
    assert not unused, f"refusals no feature declares: {sorted(unused)}"
