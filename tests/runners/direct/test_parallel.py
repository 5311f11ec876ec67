"""The direct runner with parallel units: exchange rules, schedules and properties.

Example tests pin the dispatcher, the merger, the layout (where exchanges go
and how many units each transform runs as), the global-watermark check, the
filter's one watermark per epoch across units (the issue 14 example) and the
per-unit watermark under `emit="event"`. Hypothesis properties, for random
inputs, parallelism 1 to 4 and fixed or random schedules:

(a) random pipelines of every transform over several sources, periodic
    watermarks, late rows at the filters and at `Union`s and `Join`s: every
    PCollection emits the same rows in the same epochs as the single-unit
    run (after a `Sort`, the same sort values within each key), with the
    same watermark at the end of each epoch, and the late and invalid counts
    are equal (`parallel_pipelines.assert_identical`);
(b) a wide pipeline with one filter under `emit="event"`: the final output
    equals the single-unit run's when no row is late there; otherwise it is
    exactly the single-unit result on the rows the units' filters passed,
    and those filters dropped no more rows (local watermarks are never above
    the single unit's); with both filters periodic, equal epoch by epoch;
(c) invariant W holds on every edge of every unit (the runner checks every
    unit's output and every merger's output; a probe after each unit checks
    again here, on the exact messages), and watermark values never decrease
    on any edge (same checks).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import sparkbeam as sb
from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.checks import GlobalWatermarkCheck
from sparkbeam.runners.direct.exchange import KeyRoute, Merger, owner_of, stable_hash
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.runners.direct.runner import OPERATORS
from sparkbeam.runners.direct.units import Barrier, Channel, Layout, Output
from tests.runners.direct.parallel_pipelines import (
    Plan,
    Scenario,
    assert_explained,
    assert_identical,
    build,
    observe,
    plans,
    run,
    scenarios,
)

# The merger


def test_merger_waits_for_every_input_then_emits_the_minimum() -> None:
    merger = Merger(2)
    assert merger.on_watermark(0, Watermark("t", 5)) is None
    assert merger.on_watermark(0, Watermark("t", 9)) is None
    # 5 is taken off input 0, then 7 (the minimum of 9 and 7) off input 1,
    # whose queue is then empty: 7 is emitted, 9 waits.
    assert merger.on_watermark(1, Watermark("t", 7)) == Watermark("t", 7)
    assert [[value for value, _ in q] for q in merger.queues["t"]] == [[9], []]
    assert merger.on_watermark(1, Watermark("t", 8)) == Watermark("t", 8)
    assert [[value for value, _ in q] for q in merger.queues["t"]] == [[9], []]


def test_merger_takes_the_minimum_off_every_queue_that_holds_it() -> None:
    merger = Merger(3)
    merger.on_watermark(0, Watermark("t", 4))
    merger.on_watermark(1, Watermark("t", 4))
    assert merger.on_watermark(2, Watermark("t", 6)) == Watermark("t", 4)
    assert [[value for value, _ in q] for q in merger.queues["t"]] == [[], [], [6]]
    merger.on_watermark(0, Watermark("t", 8))
    assert merger.on_watermark(1, Watermark("t", 6)) == Watermark("t", 6)
    assert [[value for value, _ in q] for q in merger.queues["t"]] == [[8], [], []]


def test_merger_keeps_columns_apart_and_never_goes_back() -> None:
    merger = Merger(2)
    merger.on_watermark(0, Watermark("a", 1))
    assert merger.on_watermark(1, Watermark("b", 1)) is None
    assert merger.on_watermark(1, Watermark("a", 3)) == Watermark("a", 1)
    merger.emitted["a"] = 10
    merger.on_watermark(0, Watermark("a", 4))
    assert merger.on_watermark(0, Watermark("a", 5)) is None  # 3 <= 10: not emitted


def test_merger_emits_only_the_last_minimum_of_a_cascade() -> None:
    merger = Merger(2)
    for value in (1, 2, 3):
        merger.on_watermark(0, Watermark("t", value))
    assert merger.on_watermark(1, Watermark("t", 3)) == Watermark("t", 3)
    assert [[value for value, _ in q] for q in merger.queues["t"]] == [[], []]


# The dispatcher


def test_key_route_sends_each_key_to_its_owner() -> None:
    chunk = Chunk({"k": ["a", "b", "a", "c", "b", "d"], "v": [1, 2, 3, 4, 5, 6]}, 6)
    parts = dict(KeyRoute(("k",), 3).split(chunk))
    rows = list(chunk.rows())
    for unit in range(3):
        expected = [row for row in rows if owner_of((row["k"],), 3) == unit]
        got = list(parts[unit].rows()) if unit in parts else []
        assert got == expected  # the unit's rows, in their order


def test_key_route_without_key_columns_gathers_into_one_unit() -> None:
    chunk = Chunk({"v": [1, 2]}, 2)
    assert KeyRoute((), 1).split(chunk) == [(0, chunk)]


def test_watermarks_and_barriers_are_broadcast_rows_are_routed() -> None:
    channels = [Channel(0, 0) for _ in range(3)]
    output = Output(KeyRoute(("k",), 3), channels)
    output.send(Chunk({"k": ["a"]}, 1))
    output.broadcast(Watermark("t", 1))
    output.broadcast(Barrier(0))
    kinds = [[type(m).__name__ for m in channel.queue] for channel in channels]
    owner = owner_of(("a",), 3)
    for unit, seen in enumerate(kinds):
        assert seen == (["Chunk"] if unit == owner else []) + ["Watermark", "Barrier"]


def test_numbers_that_are_equal_have_one_owner() -> None:
    assert stable_hash((1,)) == stable_hash((1.0,)) == stable_hash((True,))
    assert stable_hash((0.0,)) == stable_hash((-0.0,))
    owners = {owner_of((f"k{i}",), 4) for i in range(50)}
    assert owners == {0, 1, 2, 3}
    starts = {owner_of((60_000_000 * i,), 4) for i in range(50)}
    assert starts == {0, 1, 2, 3}  # aligned window starts spread over the units


def test_owners_are_the_same_in_every_process() -> None:
    code = (
        "from sparkbeam.runners.direct.exchange import owner_of;"
        "print([owner_of((f'k{i}', i, None, b'x'), 7) for i in range(20)])"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1


# The layout


def test_layout_puts_exchanges_before_keyed_transforms() -> None:
    p = sb.Pipeline()
    rows = (p | sb.TestStream(schema={"t": int, "k": str}).add_epoch([])).with_watermark("t", 1)
    by_key = rows.sort("t", keys="k")
    whole = rows.sort("t")
    after = whole.filter(lambda row: True)
    groups = rows.tumble("t", 5).combine_per_key(["window_start"], n=sb.Count())
    mixed = after.union(rows)
    layout = Layout.of(p.nodes, 3)
    units = {node.label: layout.units[node.id] for node in p.nodes}
    assert units == {
        "TestStream": 3,
        "WithWatermark(t)": 3,
        "Sort(t)": 3,
        "Sort(t)_2": 1,
        "Filter(<lambda>)": 1,
        "Tumble(t)": 3,
        "CombinePerKey(window_start)": 3,
        "Union": 3,
    }
    ids = {pc.node.label: pc.node.id for pc in (rows, by_key, whole, after, groups, mixed)}
    assert layout.exchange(ids["WithWatermark(t)"], ids["Sort(t)"])
    assert layout.exchange(ids["WithWatermark(t)"], ids["Sort(t)_2"])
    assert not layout.exchange(ids["Sort(t)_2"], ids["Filter(<lambda>)"])
    assert layout.exchange(ids["Filter(<lambda>)"], ids["Union"])  # 1 unit spread over 3
    assert not layout.exchange(ids["WithWatermark(t)"], ids["Union"])


# Watermark filters: one global watermark per epoch (periodic), local ones (event)


def _filter_run(runner: sb.DirectRunner, emit: str) -> tuple[int, list[int]]:
    """Round robin at parallelism 2: unit 0 sees t=100 then t=50, unit 1 sees t=1 then t=50."""
    epochs = [[{"t": 100}, {"t": 1}], [{"t": 50}, {"t": 50}]]
    p = sb.Pipeline(runner=runner)
    stream = sb.TestStream()
    for rows in epochs:
        stream.add_epoch(rows)
    filtered = (p | stream).with_watermark("t", 10, emit=emit)
    ordered = filtered.sort("t")
    result = p.run()
    return result.late_count(filtered), [row["t"] for row in result.collect(ordered)]


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_every_unit_filters_with_the_global_watermark(parallelism: int) -> None:
    """Periodic: the watermark of epoch 1 is 90 in every unit (the largest time of epoch 0 is
    100, seen by unit 0 only), so both 50s are late, as at parallelism 1 and on Spark."""
    runner = sb.DirectRunner(parallelism=parallelism, schedule="random", seed=parallelism)
    assert _filter_run(runner, "periodic") == (2, [1, 100])


FIVE_ROWS_T0 = datetime(2026, 4, 1, 10)


def _five_rows(runner: sb.DirectRunner) -> tuple[int, list[Any], list[Any]]:
    def at(minutes: int, seconds: int = 0, microseconds: int = 0) -> datetime:
        return FIVE_ROWS_T0 + timedelta(minutes=minutes, seconds=seconds, microseconds=microseconds)

    stream = (
        sb.TestStream()
        .add_epoch([{"ts": at(10, 0, 700)}])
        .add_epoch([{"ts": at(5, 0, 300)}, {"ts": at(4, 59, 999_700)}, {"ts": at(5)}])
    )
    p = sb.Pipeline(runner=runner)
    filtered = (p | stream).with_watermark("ts", "5 minutes")
    late = filtered.late_rows()
    result = p.run()
    return (
        result.late_count(filtered),
        [row["ts"] for row in result.collect(late)],
        result.watermarks(filtered),
    )


@pytest.mark.parametrize("schedule", ["fixed", "random"])
@pytest.mark.parametrize("parallelism", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", [0, 7])
def test_issue_14_five_rows_10_04_59_9997_is_late_at_any_parallelism(
    parallelism: int, schedule: str, seed: int
) -> None:
    """Epoch 0 is one row at 10:10:00.0007; epoch 1 brings 10:05:00.0003, 10:04:59.9997 and
    10:05:00.000 to three units. The watermark of epoch 1 is 10:05:00.000 in every unit
    (floor_to_ms(10:10:00.0007) - 5 minutes), so 10:04:59.9997 is late, as at parallelism 1
    and on Spark; before, the units that had seen no row had no watermark and kept it."""
    runner = sb.DirectRunner(parallelism=parallelism, schedule=schedule, seed=seed)
    wm = FIVE_ROWS_T0 + timedelta(minutes=5)
    assert _five_rows(runner) == (
        1,
        [FIVE_ROWS_T0 + timedelta(minutes=4, seconds=59, microseconds=999_700)],
        [Watermark("ts", wm)],
    )


def test_units_that_never_see_a_row_follow_the_global_watermark() -> None:
    """One row per epoch at parallelism 3: two units of the filter see no row at all, yet
    every epoch's watermark reaches the Sort behind the exchange, which releases rows
    epoch by epoch as at parallelism 1 (before, it waited for the end of input)."""

    def sorted_by_epoch(runner: sb.DirectRunner) -> tuple[list[list[int]], list[Any]]:
        p = sb.Pipeline(runner=runner)
        stream = sb.TestStream()
        for t in (10, 20, 30, 40):
            stream.add_epoch([{"t": t}])
        filtered = (p | stream).with_watermark("t", 5)
        ordered = filtered.sort("t")
        result = p.run()
        epochs = [[row["t"] for row in rows] for rows in result.collect_by_epoch(ordered)]
        return epochs, [mark.value for mark in result.watermarks(filtered)]

    expected = ([[], [10], [20], [30], [40]], [5, 15, 25, 35])
    assert sorted_by_epoch(sb.DirectRunner()) == expected
    for seed in range(3):
        runner = sb.DirectRunner(parallelism=3, schedule="random", seed=seed)
        assert sorted_by_epoch(runner) == expected


def test_with_emit_event_each_unit_keeps_its_local_watermark() -> None:
    """Event: the watermark rises within a unit, after each of its rows (docs/testing.md)."""
    assert _filter_run(sb.DirectRunner(), "event") == (3, [100])  # 1 after 100: late too
    assert _filter_run(sb.DirectRunner(parallelism=2), "event") == (1, [1, 50, 100])  # unit 1: -9


def test_units_behind_an_exchange_that_disagree_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Output.broadcast

    def skip_last_target(self: Output, signal: Any) -> None:
        if isinstance(signal, Watermark) and len(self.targets) > 1:
            for channel in self.targets[:-1]:
                channel.queue.append(signal)
            return
        original(self, signal)

    monkeypatch.setattr(Output, "broadcast", skip_last_target)
    p = sb.Pipeline(runner=sb.DirectRunner(parallelism=2))
    stream = sb.TestStream().add_epoch([{"t": 5, "k": "a"}, {"t": 6, "k": "b"}]).add_epoch([])
    (p | stream).with_watermark("t", 1).sort("t", keys="k")
    with pytest.raises(sb.InvariantViolation, match="global watermark broken"):
        p.run()


def test_global_watermark_check_compares_every_unit() -> None:
    check = GlobalWatermarkCheck("Sort(t), input 0", sb.Schema.of({"t": int}), 3)
    check.barrier(0, 0, {"t": 4})
    check.barrier(0, 2, {"t": 4})
    check.barrier(0, 1, {"t": 4})
    check.barrier(1, 0, {"t": 7})
    check.barrier(1, 1, {})
    with pytest.raises(sb.InvariantViolation, match="at barrier 1 unit 0 and unit 1"):
        check.barrier(1, 2, {"t": 7})


def test_a_broken_keeps_promise_is_a_data_error_on_units() -> None:
    p = sb.Pipeline(runner=sb.DirectRunner(parallelism=2))
    stream = sb.TestStream().add_epoch([{"t": 10}, {"t": 20}]).add_epoch([{"t": 30}, {"t": 40}])
    moved = (
        (p | stream)
        .with_watermark("t", 0)
        .map(lambda row: {"t": row["t"] - 25}, keeps=["t"])  # breaks its promise
    )
    del moved
    with pytest.raises(sb.DataError, match=r"^Map\(<lambda>\): keeps=\['t'\]"):
        p.run()


# Results merged over units


def test_results_are_merged_over_units() -> None:
    rows = [{"t": t, "k": "abc"[t % 3], "v": t} for t in range(30)]
    stream = sb.TestStream()
    for start in range(0, 30, 10):
        stream.add_epoch(rows[start : start + 10])
    outcomes = []
    for runner in (sb.DirectRunner(), sb.DirectRunner(parallelism=3, schedule="random", seed=4)):
        p = sb.Pipeline(runner=runner)
        filtered = (p | stream).with_watermark("t", 2)
        sums = filtered.tumble("t", 10).combine_per_key(["window_start", "k"], s=sb.Sum("v"))
        result = p.run()
        marks = [w.value for w in result.watermarks(sums) if w.column == "window_start"]
        assert marks == sorted(marks)
        assert result.state_size(sums) == 0
        assert result.peak_state_size(sums) > 0
        by_epoch = result.collect_by_epoch(sums)
        assert len(by_epoch) == 4
        outcomes.append(sorted(map(str, result.collect(sums))))
        assert result.late_count(filtered) == 0
    assert outcomes[0] == outcomes[1]


def test_datetimes_and_the_readme_pipeline_at_parallelism_3() -> None:
    start = datetime(2026, 4, 1, 10)
    orders = [
        {"order_id": f"o{i}", "amount": i, "event_time": start + timedelta(seconds=13 * i)}
        for i in range(40)
    ]

    def totals(runner: sb.DirectRunner) -> list[dict[str, Any]]:
        with sb.Pipeline(runner=runner) as p:
            per_minute = (
                (p | sb.Create(orders))
                .with_watermark("event_time", delay=timedelta(minutes=5))
                .tumble("event_time", size="1 minute")
                .combine_per_key(
                    ["window_start", "window_end"], n=sb.Count(), total=sb.Sum("amount")
                )
                .sort("window_start")
            )
        return p.result.collect(per_minute)  # type: ignore[union-attr]

    expected = totals(sb.DirectRunner())
    assert totals(sb.DirectRunner(parallelism=3, schedule="random", seed=1)) == expected


def test_files_are_read_by_every_unit_and_written_by_one(tmp_path: Any) -> None:
    rows = [{"t": i, "k": f"k{i % 4}"} for i in range(25)]
    source = tmp_path / "in"
    with sb.Pipeline() as p:
        p | sb.Create(rows) | sb.WriteFiles(str(source), format="json")
    with sb.Pipeline(runner=sb.DirectRunner(parallelism=3)) as p:
        read = p | sb.ReadFiles(str(source), format="json", schema={"t": int, "k": str})
        read | sb.WriteFiles(str(tmp_path / "out"), format="json")
    assert sorted(p.result.collect(read), key=lambda r: r["t"]) == rows  # type: ignore[union-attr]
    written = list((tmp_path / "out").iterdir())
    assert len(written) == 1 and len(written[0].read_text().splitlines()) == 25


def test_runner_arguments_are_checked() -> None:
    assert not sb.DirectRunner().parallel
    assert sb.DirectRunner(schedule="random").parallel
    for bad in (
        {"parallelism": 0},
        {"schedule": "round robin"},
        {"seed": "x"},
        {"checkpoint_every": 0},
        {"fail_at": -1},
        {"fail_at": [1, "2"]},
        {"rescale": [(1, 2)]},
        {"rescale": {1: 0}},
    ):
        with pytest.raises(sb.PipelineError, match="DirectRunner"):
            sb.DirectRunner(**bad)


# A probe after a unit: the exact messages on that unit's output edge.


@attrs.frozen(eq=False)
class Probe(PrimitiveTransform):
    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return inputs[0]

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))


class ProbeOperator(Operator):
    def __init__(self, node: Any, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.log: list[Message] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.log.append(chunk)
        return []

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        self.log.append(watermark)
        return []


@pytest.fixture(scope="module", autouse=True)
def _probe() -> Iterator[None]:
    OPERATORS[Probe] = ProbeOperator
    try:
        yield
    finally:
        OPERATORS.pop(Probe, None)


def assert_invariant_w(log: list[Message], where: str) -> None:
    marks: dict[str, Any] = {}
    for message in log:
        if isinstance(message, Watermark):
            last = marks.get(message.column)
            assert last is None or message.value >= last, f"{where}: watermark went back"
            marks[message.column] = message.value
        else:
            for column, mark in marks.items():
                assert all(v is not None and v >= mark for v in message.columns[column]), where


# Properties

parallelisms = st.integers(1, 4)
schedules = st.sampled_from(["fixed", "random"])


@given(plans(), parallelisms, schedules, st.integers(0, 2**16))
def test_random_pipelines_give_the_single_unit_result_epoch_by_epoch(
    plan: Plan, parallelism: int, schedule: str, seed: int
) -> None:
    """Periodic watermarks: parallelism, schedule and seed are invisible in every result."""
    single = observe(plan)
    filters = len(plan.sources) + sum(step.kind == "watermark" for step in plan.steps)
    event("late rows at a filter" if any(single.late[:filters]) else "no late rows at filters")
    event("late rows at a Union/Join" if any(single.late[filters:]) else "none at a merge")
    runner = sb.DirectRunner(parallelism=parallelism, schedule=schedule, seed=seed)
    assert_identical(observe(plan, runner), single)


@given(scenarios(), parallelisms, schedules, st.integers(0, 2**16))
def test_units_give_the_single_unit_result(
    sc: Scenario, parallelism: int, schedule: str, seed: int
) -> None:
    single = run(sc)
    event("no late rows" if single.late == (0, 0) else "late rows at parallelism 1")
    event(f"a: emit={sc.emit_a}")
    runner = sb.DirectRunner(parallelism=parallelism, schedule=schedule, seed=seed)
    assert_explained(sc, run(sc, runner), single)


@given(scenarios(max_epochs=4), parallelisms, st.integers(0, 2**16))
def test_every_edge_of_every_unit_keeps_invariant_w(
    sc: Scenario, parallelism: int, seed: int
) -> None:
    p = sb.Pipeline(runner=sb.DirectRunner(parallelism=parallelism, schedule="random", seed=seed))
    built = build(p, sc)
    watched = [built.a, built.b, *built.outputs.values()]
    probes = [pc | Probe() for pc in watched]
    result = p.run()
    for pc, probe in zip(watched, probes, strict=True):
        units = result.units[probe.node.id]
        assert len(units) in (1, parallelism)
        for index, operator in enumerate(units):
            assert isinstance(operator, ProbeOperator)
            assert_invariant_w(operator.log, f"{pc.node.label} unit {index}")
        marks = result.watermarks(pc)
        for column in {mark.column for mark in marks}:
            values = [mark.value for mark in marks if mark.column == column]
            assert values == sorted(values)
