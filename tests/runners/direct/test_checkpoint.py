"""Checkpoints, fail-over and rescale on the direct runner's parallel units.

Properties, for random inputs, parallelism 1 to 4, schedules, checkpoint
intervals, failure points (mid-epoch included) and rescales:

- Fail-over without rescale gives exactly the fault-free run at the same
  parallelism, late rows included: the same rows (nothing lost, nothing
  duplicated) in the same epochs, and the same counters.
- With periodic watermarks, rescales and failures change nothing: random
  pipelines (every transform, several sources, idle and held-back sources)
  give the fault-free single-unit result epoch by epoch, late rows and
  watermarks included (restored and rescaled filters restart from the global
  watermark saved at the checkpoint; sources from their saved offsets).
- With a filter under `emit="event"` and rescales, the output is the
  single-unit output when no row is late there; otherwise it is exactly the
  single-unit result on the rows the filters passed, and the filters dropped
  no more rows than the single unit (they restart from the largest saved
  local watermark, never above the single unit's watermark).
- Invariant W holds throughout, right after each restore included: the
  runner's checks restart from the checkpoint's (or, after a rescale, from
  what every old unit had promised), so a restored unit that emitted a row
  or watermark below the saved promise would raise.

Example tests pin each operator's snapshot, restore and rescale.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import sparkbeam as sb
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.combine import CombineOperator
from sparkbeam.runners.direct.exchange import owner_of
from sparkbeam.runners.direct.join import JoinOperator
from sparkbeam.runners.direct.operator import Chunk
from sparkbeam.runners.direct.runner import operator_for
from sparkbeam.runners.direct.session import SessionOperator
from sparkbeam.runners.direct.sort import SortOperator
from sparkbeam.runners.direct.union import UnionOperator
from sparkbeam.runners.direct.watermark import WatermarkFilter
from tests.runners.direct.parallel_pipelines import (
    Plan,
    Scenario,
    assert_explained,
    assert_identical,
    assert_same,
    observe,
    plans,
    run,
    scenarios,
)

# Properties

fractions = st.lists(st.one_of(st.floats(0, 0.999), st.floats(0.6, 0.999)), min_size=1, max_size=3)


@given(
    scenarios(),
    st.integers(1, 4),
    st.sampled_from(["fixed", "random"]),
    st.integers(0, 2**16),
    st.sampled_from([None, 1, 1, 2]),
    fractions,
)
def test_fail_over_gives_the_fault_free_run(
    sc: Scenario,
    parallelism: int,
    schedule: str,
    seed: int,
    every: int | None,
    where: list[float],
) -> None:
    settings = {
        "parallelism": parallelism,
        "schedule": schedule,
        "seed": seed,
        "checkpoint_every": every,
    }
    fault_free = run(sc, sb.DirectRunner(**settings))
    steps = fault_free.result.steps
    fail_at = [int(fraction * steps) for fraction in where]
    failed = run(sc, sb.DirectRunner(**settings, fail_at=fail_at))
    recoveries = failed.result.recoveries
    assert recoveries and recoveries[0].step == min(fail_at)
    for recovery in recoveries:
        event("restored a checkpoint" if recovery.checkpoint is not None else "restarted")
    assert_same(failed, fault_free)
    assert failed.late == fault_free.late
    assert failed.invalid == fault_free.invalid
    # Every filter passed the same rows, and every output emitted the same rows, epoch by epoch.
    for side in (0, 1):
        assert bags(failed.passed[side]) == bags(fault_free.passed[side])
    assert failed.by_epoch == fault_free.by_epoch


def bags(epochs: list[list[dict[str, Any]]]) -> list[Counter[str]]:
    return [Counter(map(str, rows)) for rows in epochs]


@st.composite
def rescales(draw: st.DrawFn, epochs: int, parallelism: int) -> dict[int, int]:
    """One to three changes of parallelism, each to another number of units."""
    chosen = draw(st.lists(st.integers(0, epochs - 1), min_size=1, max_size=3, unique=True))
    plan, units = {}, parallelism
    for epoch in sorted(chosen):
        units = draw(st.sampled_from([n for n in range(1, 5) if n != units]))
        plan[epoch] = units
    return plan


@given(st.data(), scenarios(), st.integers(1, 4), st.integers(0, 2**16))
def test_rescale_and_fail_over_keep_the_single_unit_result(
    data: st.DataObject, sc: Scenario, parallelism: int, seed: int
) -> None:
    rescale = data.draw(rescales(sc.epochs, parallelism), label="rescale")
    every = data.draw(st.sampled_from([None, 1, 2, 3]), label="checkpoint_every")
    schedule = data.draw(st.sampled_from(["fixed", "random"]), label="schedule")
    settings = {
        "parallelism": parallelism,
        "schedule": schedule,
        "seed": seed,
        "checkpoint_every": every,
        "rescale": rescale,
    }
    planned = run(sc, sb.DirectRunner(**settings))
    where = data.draw(st.lists(st.floats(0, 0.999), max_size=2), label="fail at")
    fail_at = [int(fraction * planned.result.steps) for fraction in where]
    outcome = run(sc, sb.DirectRunner(**settings, fail_at=fail_at))
    causes = [r.cause for r in outcome.result.recoveries]
    event(f"{causes.count('rescale')} rescales, {causes.count('failure')} failures")
    assert causes.count("failure") >= (1 if fail_at else 0)
    single = run(sc)
    event("no late rows" if single.late == (0, 0) else "late rows at parallelism 1")
    assert_explained(sc, outcome, single)
    assert_explained(sc, planned, single)


@given(st.data(), plans(), st.integers(1, 4), st.integers(0, 2**16))
def test_random_pipelines_with_failures_and_rescales_give_the_single_unit_result(
    data: st.DataObject, plan: Plan, parallelism: int, seed: int
) -> None:
    """Periodic watermarks: restored and rescaled filters restart from the global watermark
    saved at the checkpoint, so every result is parallelism 1's, epoch by epoch."""
    rescale = data.draw(st.none() | rescales(plan.epochs, parallelism), label="rescale")
    settings = {
        "parallelism": parallelism,
        "schedule": data.draw(st.sampled_from(["fixed", "random"]), label="schedule"),
        "seed": seed,
        "checkpoint_every": data.draw(st.sampled_from([None, 1, 2]), label="checkpoint_every"),
        "rescale": rescale,
    }
    planned = observe(plan, sb.DirectRunner(**settings))
    where = data.draw(st.lists(st.floats(0, 0.999), min_size=1, max_size=2), label="fail at")
    fail_at = [int(fraction * planned.result.steps) for fraction in where]
    outcome = observe(plan, sb.DirectRunner(**settings, fail_at=fail_at))
    causes = [r.cause for r in outcome.result.recoveries]
    event(f"{causes.count('rescale')} rescales, {causes.count('failure')} failures")
    assert causes.count("failure") >= 1
    single = observe(plan)
    assert_identical(planned, single)
    assert_identical(outcome, single)


# Examples


def _epochs(p: sb.Pipeline, epochs: list[list[dict[str, Any]]]) -> sb.PCollection:
    stream = sb.TestStream()
    for rows in epochs:
        stream.add_epoch(rows)
    return p | stream


def test_a_failure_before_any_checkpoint_restarts_from_scratch() -> None:
    epochs = [[{"t": 10 * e + j, "k": "ab"[j % 2]} for j in range(4)] for e in range(4)]
    p = sb.Pipeline(runner=sb.DirectRunner(parallelism=2, fail_at=3))
    counts = (
        _epochs(p, epochs)
        .with_watermark("t", 5)
        .tumble("t", 10)
        .combine_per_key(["window_start", "k"], n=sb.Count())
    )
    result = p.run()
    assert [(r.cause, r.checkpoint) for r in result.recoveries] == [("failure", None)]
    assert sorted(row["n"] for row in result.collect(counts)) == [2] * 8


def test_a_failure_restores_the_last_complete_checkpoint_even_twice_in_a_row() -> None:
    epochs = [[{"t": 10 * e + j, "k": "ab"[j % 2]} for j in range(4)] for e in range(6)]

    def counts(runner: sb.DirectRunner) -> tuple[Any, list[Any]]:
        p = sb.Pipeline(runner=runner)
        out = (
            _epochs(p, epochs)
            .with_watermark("t", 5)
            .tumble("t", 10)
            .combine_per_key(["window_start", "k"], n=sb.Count())
        )
        result = p.run()
        return result, [sorted(map(str, rows)) for rows in result.collect_by_epoch(out)]

    fault_free, expected = counts(sb.DirectRunner(parallelism=3, checkpoint_every=2))
    late = fault_free.steps * 2 // 3
    result, got = counts(sb.DirectRunner(parallelism=3, checkpoint_every=2, fail_at=[late] * 3))
    assert [r.checkpoint for r in result.recoveries] == [3, 3, 3]
    assert got == expected


def test_rescale_starts_filters_from_the_saved_global_watermark() -> None:
    """Every unit's watermark is 90 after epoch 0 (the largest time seen by any unit is 100):
    both 50s of epoch 1 are late whatever the parallelism before or after the rescale."""
    epochs = [[{"t": 100}, {"t": 1}], [{"t": 50}, {"t": 50}]]

    def late(runner: sb.DirectRunner) -> tuple[int, list[Any]]:
        p = sb.Pipeline(runner=runner)
        filtered = _epochs(p, epochs).with_watermark("t", 10)
        result = p.run()
        return result.late_count(filtered), [r.parallelism_after for r in result.recoveries]

    assert late(sb.DirectRunner(parallelism=2)) == (2, [])
    assert late(sb.DirectRunner(parallelism=2, rescale={0: 1})) == (2, [1])
    assert late(sb.DirectRunner(parallelism=2, rescale={0: 3})) == (2, [3])


def test_rescale_with_emit_event_starts_filters_from_the_largest_saved_watermark() -> None:
    """Unit 0's local watermark is 90 and unit 1's -9 after epoch 0; new units take 90."""
    epochs = [[{"t": 100}, {"t": 1}], [{"t": 50}, {"t": 50}]]

    def late(runner: sb.DirectRunner) -> int:
        p = sb.Pipeline(runner=runner)
        filtered = _epochs(p, epochs).with_watermark("t", 10, emit="event")
        return p.run().late_count(filtered)

    assert late(sb.DirectRunner(parallelism=2)) == 1
    assert late(sb.DirectRunner(parallelism=2, rescale={0: 1})) == 2
    assert late(sb.DirectRunner(parallelism=2, rescale={0: 3})) == 2


def test_rescale_two_to_three_to_one() -> None:
    epochs = [[{"t": 10 * e + j, "k": "abcd"[j % 4]} for j in range(8)] for e in range(6)]

    def outputs(runner: sb.DirectRunner) -> tuple[Any, dict[str, list[str]]]:
        p = sb.Pipeline(runner=runner)
        filtered = _epochs(p, epochs).with_watermark("t", 5)
        groups = filtered.tumble("t", 10).combine_per_key(["window_start", "k"], n=sb.Count())
        ordered = filtered.sort("t", keys="k")
        sessions = filtered.session("t", 3, keys="k")
        result = p.run()
        return result, {
            "groups": sorted(map(str, result.collect(groups))),
            "ordered": [str(row) for row in result.collect(ordered) if row["k"] == "a"],
            "sessions": sorted(map(str, result.collect(sessions))),
        }

    _, expected = outputs(sb.DirectRunner())
    result, got = outputs(sb.DirectRunner(parallelism=2, rescale={1: 3, 3: 1}, schedule="random"))
    assert [
        (r.cause, r.checkpoint, r.parallelism_before, r.parallelism_after)
        for r in result.recoveries
    ] == [
        ("rescale", 1, 2, 3),
        ("rescale", 3, 3, 1),
    ]
    assert all(len(units) == 1 for units in result.units)
    assert got == expected


def test_a_restore_that_forgets_the_watermark_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after recovery the edge still carries the checkpoint's promise."""
    epochs = [[{"t": 100}], [{"t": 95}], [{"t": 5}]]

    def build_and_run(fail_at: int) -> Any:
        p = sb.Pipeline(runner=sb.DirectRunner(checkpoint_every=1, fail_at=fail_at))
        _epochs(p, epochs).with_watermark("t", 10).tumble("t", 10)
        return p.run()

    restored_first = next(
        point for point in range(1, 40) if build_and_run(point).recoveries[0].checkpoint == 1
    )
    original = WatermarkFilter.restore

    def forget(self: WatermarkFilter, state: tuple[Any, ...]) -> None:
        original(self, state)
        self.wm = self.max_time = None

    monkeypatch.setattr(WatermarkFilter, "restore", forget)
    with pytest.raises(sb.InvariantViolation, match="below the watermark"):
        build_and_run(restored_first)


# Each operator's snapshot, restore and rescale


def _node(pc: sb.PCollection) -> tuple[Node, list[EdgeInfo]]:
    nodes = pc.pipeline.nodes
    return pc.node, [nodes[i].info for i in pc.node.inputs]


def _fresh(pc: sb.PCollection) -> Any:
    return operator_for(*_node(pc))


def test_combine_groups_move_to_their_owners() -> None:
    p = sb.Pipeline()
    rows = p | sb.TestStream(schema={"k": str, "t": int}).add_epoch([])
    combined = rows.with_watermark("t", 0).combine_per_key(["k", "t"], n=sb.Count())
    old = [_fresh(combined), _fresh(combined)]
    old[0].on_chunk(0, Chunk({"k": ["a", "b", "a"], "t": [1, 2, 1]}, 3))
    old[1].on_chunk(0, Chunk({"k": ["c"], "t": [3]}, 1))
    fresh = [_fresh(combined) for _ in range(3)]
    states = fresh[0].rescale([op.snapshot() for op in old], 3, lambda key: owner_of(key, 3))
    for index, (operator, state) in enumerate(zip(fresh, states, strict=True)):
        operator.restore(state)
        assert all(owner_of(key, 3) == index for key in operator.groups)
    emitted = [row for op in fresh for chunk in op.on_end() for row in chunk.rows()]
    assert sorted((r["k"], r["t"], r["n"]) for r in emitted) == [
        ("a", 1, 2),
        ("b", 2, 1),
        ("c", 3, 1),
    ]
    restored = _fresh(combined)
    restored.restore(old[0].snapshot())
    assert isinstance(restored, CombineOperator)
    assert restored.on_watermark(0, Watermark("t", 2))[0].columns["n"] == [2]  # type: ignore[union-attr]
    assert restored.heaps["t"] == [2]


def test_sort_session_and_join_state_survive_restore_and_rescale() -> None:
    p = sb.Pipeline()
    schema = {"k": str, "t": int}
    left = (p | "l" >> sb.TestStream(schema=schema).add_epoch([])).with_watermark("t", 0)
    right = (p | "r" >> sb.TestStream(schema=schema).add_epoch([])).with_watermark("t", 0)
    first = Chunk({"k": ["a", "b", "a", "c"], "t": [5, 1, 3, 3]}, 4)
    second = Chunk({"k": ["d"], "t": [4]}, 1)
    cases = [
        (left.sort("t", keys="k"), [("b", 1), ("a", 3), ("c", 3), ("d", 4), ("a", 5)]),
        (left.session("t", 2, keys="k"), None),
        (left.join(right, on=["k", "t"], how="left"), None),  # every left row, unmatched
    ]
    for pc, order in cases:
        old = [_fresh(pc), _fresh(pc)]
        old[0].on_chunk(0, first)
        old[1].on_chunk(0, second)
        (state,) = _fresh(pc).rescale([op.snapshot() for op in old], 1, lambda key: 0)
        fresh, again = _fresh(pc), _fresh(pc)
        fresh.restore(state)
        again.restore(state)  # one saved state restores twice
        assert fresh.state_size() == again.state_size() == 5
        out = [(row["k"], row["t"]) for chunk in fresh.on_end() for row in chunk.rows()]
        assert sorted(out) == sorted([("a", 5), ("b", 1), ("a", 3), ("c", 3), ("d", 4)])
        if order is not None:
            assert out == order  # by time, ties by old unit then arrival
        assert again.state_size() == 5  # the flush of one did not touch the other
        assert isinstance(fresh, (SortOperator, SessionOperator, JoinOperator))


def test_union_and_filter_rescale_take_the_common_floor_and_the_maximum() -> None:
    p = sb.Pipeline()
    a = (p | "a" >> sb.TestStream(schema={"t": int}).add_epoch([])).with_watermark("t", 1)
    b = (p | "b" >> sb.TestStream(schema={"t": int}).add_epoch([])).with_watermark("t", 1)
    union = a.union(b)
    old_unions = [_fresh(union), _fresh(union)]
    old_unions[0].on_watermark(0, Watermark("t", 5))
    old_unions[0].on_watermark(1, Watermark("t", 7))
    old_unions[1].on_watermark(0, Watermark("t", 6))
    for union_unit in old_unions:
        union_unit.on_barrier(0)  # the epoch's watermarks are applied at its end
    fresh_union = _fresh(union)
    assert isinstance(fresh_union, UnionOperator)
    old_unions[1].late_count = 2
    states = fresh_union.rescale([u.snapshot() for u in old_unions], 3, lambda key: 0)
    assert [state["latest"] for state in states] == [{"t": [5, None]}] * 3
    assert [state["idle"] for state in states] == [[False, False]] * 3
    assert [state["late"] for state in states] == [2, 0, 0]  # the total, once

    filters = [_fresh(a), _fresh(a)]
    filters[0].on_chunk(0, Chunk({"t": [10, 3]}, 2))
    filters[0].on_barrier(0)
    filters[0].on_chunk(0, Chunk({"t": [1]}, 1))  # late: 1 < 9
    filters[1].on_chunk(0, Chunk({"t": [4, None]}, 2))
    filters[1].on_barrier(0)
    states = _fresh(a).rescale([f.snapshot() for f in filters], 2, lambda key: 0)
    assert states == [(9, None, 10, 1, 1, 0), (9, None, 10, 0, 0, 0)]
