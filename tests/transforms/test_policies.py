"""Several watermarks: `policy="min"|"max"`, idle inputs and alignment (issue 8, items 2-4).

Rules under test:

- `Union(..., policy="max")` / `Join(..., policy="max")` follow the fastest
  input; rows of slower inputs below the output watermark are late there
  (`late_rows()` of the Union/Join). `min` stays the model's rule.
- `WithWatermark(idle_after=n)`: after `n` epochs without rows the input is
  idle and left out of the minimum; its rows below the combined watermark
  when it comes back are late at the Union/Join.
- `WithWatermark(max_drift=d)`: a source whose watermark runs more than `d`
  ahead of the slowest one it meets has its further epochs held back.
- On bounded input (one epoch) none of them changes the rows, on both runners.
"""

from __future__ import annotations

import functools
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.streams import outcome, side_by_side


def stream(*epochs: list[dict[str, Any]], schema: Any = None) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def marks(result: Any, pcoll: sb.PCollection, column: str = "t") -> list[Any]:
    return [w.value for w in result.watermarks(pcoll) if w.column == column]


def ts(rows: list[dict[str, Any]]) -> list[Any]:
    return [row["t"] for row in rows]


DIRECT = [
    sb.DirectRunner(),
    sb.DirectRunner(parallelism=3, schedule="random", seed=5),
    sb.DirectRunner(parallelism=2, checkpoint_every=1, fail_at=[9, 30]),
]
"""The single unit and parallel units: the same results, epoch by epoch (issue 14)."""
by_direct_runner = pytest.mark.parametrize(
    "direct", DIRECT, ids=["single", "parallel", "fail-over"]
)


# --- policy ------------------------------------------------------------------------------


@by_direct_runner
def test_union_policy_max_follows_the_fastest_input_and_drops_the_slower_ones_rows(
    direct: sb.DirectRunner,
) -> None:
    p = sb.Pipeline(runner=direct)
    fast = (p | "fast" >> stream([{"t": 100}], [{"t": 101}])).with_watermark("t", 0)
    slow = (p | "slow" >> stream([{"t": 1}], [{"t": 2}, {"t": 150}])).with_watermark("t", 0)
    merged = fast.union(slow, policy="max")
    late = merged.late_rows()
    result = p.run()
    assert [sorted(ts(rows)) for rows in result.collect_by_epoch(merged)] == [
        [1, 100],
        [101, 150],
        [],
    ]
    assert result.collect_by_epoch(late) == [[], [{"t": 2, "late_watermark": 100}], []]
    assert marks(result, merged) == [100, 101, 150]
    assert result.late_count(merged) == 1
    assert result.late_count(slow) == 0  # the slow input's own filter kept it


def test_union_policy_min_is_the_default_and_drops_nothing() -> None:
    p = sb.Pipeline()
    fast = (p | "fast" >> stream([{"t": 100}], [{"t": 101}])).with_watermark("t", 0)
    slow = (p | "slow" >> stream([{"t": 1}], [{"t": 2}, {"t": 150}])).with_watermark("t", 0)
    merged = fast.union(slow)
    late = merged.late_rows()
    result = p.run()
    assert sorted(ts(result.collect(merged))) == [1, 2, 100, 101, 150]
    assert result.collect(late) == []
    assert marks(result, merged) == [1, 101]


def test_policy_max_makes_more_rows_late_downstream_windows_close_earlier() -> None:
    def run(policy: str) -> tuple[list[list[Any]], int]:
        p = sb.Pipeline()
        a = (p | "a" >> stream([{"t": 10}], [{"t": 30}], [{"t": 50}])).with_watermark("t", 0)
        b = (p | "b" >> stream([{"t": 0}], [{"t": 5}], [{"t": 25}])).with_watermark("t", 0)
        merged = a.union(b, policy=policy)
        windows = merged.tumble("t", 10).combine_per_key(["window_start"], n=sb.Count())
        result = p.run()
        epochs = [
            sorted(r["window_start"] for r in rows) for rows in result.collect_by_epoch(windows)
        ]
        return epochs, result.late_count(merged)

    slowest, none_late = run("min")
    fastest, late = run("max")
    assert (none_late, late) == (0, 2)  # 5 (behind 10) and 25 (behind 30)
    assert slowest == [[], [], [0, 10], [20, 30, 50]]
    assert fastest == [[0], [10], [30], [50]]


@by_direct_runner
def test_join_policy_max_drops_slow_sides_rows_as_late_laid_out_unmatched(
    direct: sb.DirectRunner,
) -> None:
    p = sb.Pipeline(runner=direct)
    left = (p | "l" >> stream([{"t": 10, "a": "x"}], [{"t": 20, "a": "y"}])).with_watermark("t", 0)
    right = (
        p | "r" >> stream([{"t": 1, "b": 1}], [{"t": 5, "b": 2}, {"t": 20, "b": 3}])
    ).with_watermark("t", 0)
    joined = left.join(right, on="t", how="left", policy="max")
    late = joined.late_rows()
    result = p.run()
    assert sorted(result.collect(joined), key=lambda r: r["t"]) == [
        {"t": 10, "a": "x", "b": None},
        {"t": 20, "a": "y", "b": 3},
    ]
    assert result.collect(late) == [{"t": 5, "a": None, "b": 2, "late_watermark": 10}]
    assert marks(result, joined) == [10, 20]
    assert result.late_count(joined) == 1


def test_bounded_input_policy_idle_and_drift_change_nothing(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        a = (p | "a" >> sb.Create([{"t": 100, "k": 1}, {"t": 3, "k": 2}])).with_watermark(
            "t", 0, idle_after=1, max_drift=5
        )
        b = (p | "b" >> sb.Create([{"t": 1, "k": 1}])).with_watermark("t", 0, idle_after="1 second")
        merged = a.union(b, policy="max")
        joined = a.join(b, on="t", how="full", policy="max")
        late = merged.late_rows()
        joined_late = joined.late_rows()
    result = p.result
    assert Counter(ts(result.collect(merged))) == Counter([100, 3, 1])
    assert Counter(ts(result.collect(joined))) == Counter([100, 3, 1])
    assert result.collect(late) == result.collect(joined_late) == []
    assert result.late_count(merged) == result.late_count(joined) == 0


def test_bad_policy_is_refused_when_applied() -> None:
    p = sb.Pipeline()
    a, b = p | "a" >> sb.Create([{"t": 1}]), p | "b" >> sb.Create([{"t": 1}])
    with pytest.raises(sb.PipelineError, match=r"policy='avg'.*policy='min'"):
        a.union(b, policy="avg")
    with pytest.raises(sb.PipelineError, match="policy='mean'"):
        a.join(b, on="t", policy="mean")


# --- idle inputs ---------------------------------------------------------------------------


def silent_source_pipeline(idle_after: int | None, runner: Any = None) -> tuple[Any, Any, Any, Any]:
    p = sb.Pipeline(runner=runner)
    busy = p | "busy" >> stream(*[[{"t": 10 * i}] for i in range(1, 7)])
    silent = p | "silent" >> stream([{"t": 5}], [], [], [], [{"t": 6}, {"t": 70}], [])
    a = busy.with_watermark("t", 0)
    b = silent.with_watermark("t", 0, idle_after=idle_after)
    merged = a.union(b)
    windows = merged.tumble("t", 10).combine_per_key(["window_start"], n=sb.Count())
    return p, merged, windows, merged.late_rows()


def test_a_silent_source_holds_back_windows_without_idle_after() -> None:
    p, _, windows, late = silent_source_pipeline(None)
    result = p.run()
    emitted = [sorted(r["window_start"] for r in rows) for rows in result.collect_by_epoch(windows)]
    assert emitted[:4] == [[], [], [], []]  # held by the silent source's watermark of 5
    assert result.collect(late) == []


@by_direct_runner
def test_an_idle_source_no_longer_holds_back_windows_and_its_old_rows_come_back_late(
    direct: sb.DirectRunner,
) -> None:
    p, merged, windows, late = silent_source_pipeline(1, direct)
    result = p.run()
    emitted = [sorted(r["window_start"] for r in rows) for rows in result.collect_by_epoch(windows)]
    assert emitted == [[], [0, 10], [20], [30], [40], [50], [60, 70]]
    assert result.collect_by_epoch(late) == [
        [],
        [],
        [],
        [],
        [{"t": 6, "late_watermark": 40}],
        [],
        [],
    ]
    assert marks(result, merged) == [5, 20, 30, 40, 50, 60]


@by_direct_runner
def test_idle_after_counts_only_epochs_with_no_rows(direct: sb.DirectRunner) -> None:
    p = sb.Pipeline(runner=direct)
    a = (p | "a" >> stream(*[[{"t": 10 * i}] for i in range(1, 6)])).with_watermark("t", 0)
    b = (p | "b" >> stream([{"t": 1}], [], [{"t": 2}], [], [])).with_watermark("t", 0, idle_after=2)
    merged = a.union(b)
    result = p.run()
    # b's empty epochs: 1 (then rows in 2), then 3 and 4: idle only at the end of epoch 4.
    assert marks(result, merged) == [1, 2, 50]


@by_direct_runner
def test_a_stream_with_fewer_epochs_goes_idle_after_its_last(direct: sb.DirectRunner) -> None:
    p = sb.Pipeline(runner=direct)
    a = (p | "a" >> stream(*[[{"t": 10 * i}] for i in range(1, 5)])).with_watermark("t", 0)
    short = (p | "b" >> stream([{"t": 1}])).with_watermark("t", 0, idle_after=1)
    merged = a.union(short)
    result = p.run()
    assert marks(result, merged) == [1, 20, 30, 40]  # without idle_after: [1] until the end


@by_direct_runner
def test_an_idle_join_side_does_not_hold_back_the_window_key(direct: sb.DirectRunner) -> None:
    p = sb.Pipeline(runner=direct)
    left = (p | "l" >> stream(*[[{"w": 10 * i, "a": i}] for i in range(4)])).with_watermark("w", 0)
    right = (p | "r" >> stream([{"w": 0, "b": 0}], [], [], [{"w": 5, "b": 5}])).with_watermark(
        "w", 0, idle_after=1
    )
    joined = left.join(right, on="w", how="left")
    late = joined.late_rows()
    result = p.run()
    unmatched = [
        sorted(r["w"] for r in rows if r["b"] is None) for rows in result.collect_by_epoch(joined)
    ]
    # Idle after epoch 1, the right side no longer holds the key's watermark: left 10 is
    # emitted unmatched in epoch 2. Back in epoch 3 it holds it again (min with 5).
    assert unmatched == [[], [], [10], [], [20, 30]]
    assert result.collect(late) == [{"w": 5, "a": None, "b": 5, "late_watermark": 20}]


def test_idle_after_as_processing_time_is_refused_on_the_direct_runner() -> None:
    p = sb.Pipeline()
    (p | stream([{"t": 1}])).with_watermark("t", 0, idle_after="30 seconds")
    with pytest.raises(sb.PipelineError, match=r"processing time.*number of epochs"):
        p.run()


@pytest.mark.parametrize(
    ("idle_after", "message"),
    [
        (0, "at least 1"),
        (-2, "at least 1"),
        (1.5, "neither a number of epochs nor a duration"),
        ("soon", "cannot read duration 'soon'"),
        ("0 seconds", "positive duration"),
    ],
)
def test_bad_idle_after_is_refused_when_applied(idle_after: Any, message: str) -> None:
    p = sb.Pipeline()
    pc = p | stream([{"t": 1}])
    with pytest.raises(sb.PipelineError, match=message):
        pc.with_watermark("t", 0, idle_after=idle_after)


# --- alignment ---------------------------------------------------------------------------


def racing_pipeline(max_drift: int | None, runner: Any = None) -> tuple[Any, Any, Any, Any]:
    p = sb.Pipeline(runner=runner)
    fast = p | "fast" >> stream(*[[{"t": 100 * i + j} for j in range(10)] for i in range(10)])
    slow = p | "slow" >> stream(*[[{"t": 20 * i}] for i in range(60)])
    f = fast.with_watermark("t", 0, max_drift=max_drift)
    s = slow.with_watermark("t", 0)
    merged = f.union(s)
    ordered = merged.sort("t")
    return p, f, merged, ordered


@by_direct_runner
def test_a_racing_source_is_held_back_so_state_stays_bounded(direct: sb.DirectRunner) -> None:
    p, _, free_merged, free_ordered = racing_pipeline(None)
    free = p.run()
    p, f, merged, ordered = racing_pipeline(50, direct)
    held = p.run()
    assert ts(held.collect(ordered)) == ts(free.collect(free_ordered))  # the same rows, in order
    assert held.late_count(merged) == free.late_count(free_merged) == 0
    assert free.peak_state_size(free_ordered) >= 80  # most of the fast source's 100 rows
    assert held.peak_state_size(ordered) <= 30
    fast_epochs = [len(rows) for rows in held.collect_by_epoch(f)]
    assert fast_epochs[:3] == [10, 10, 0]  # after epoch 1 (wm 109 against 20) it waits
    assert sum(1 for n in fast_epochs if n) == 10
    slow_marks = [m for m in marks(held, merged)]
    assert slow_marks == sorted(slow_marks)


def test_max_drift_is_in_the_column_units_and_checked_when_applied() -> None:
    p = sb.Pipeline()
    pc = p | stream([{"t": 1, "s": "x"}])
    with pytest.raises(sb.PipelineError, match="max_drift '5 minutes' is not an integer"):
        pc.with_watermark("t", 0, max_drift="5 minutes")
    with pytest.raises(sb.PipelineError, match="max_drift must be zero or positive"):
        pc.with_watermark("t", 0, max_drift=-1)
    with pytest.raises(sb.PipelineError, match="'s' is str, not an event time"):
        pc.with_watermark("s", 0, max_drift=1)


def test_max_drift_between_watermarks_of_different_types_is_refused() -> None:
    p = sb.Pipeline()
    a = (p | "a" >> stream([{"t": datetime(2026, 1, 1), "n": 1}])).with_watermark(
        "t", "1 minute", max_drift="1 hour"
    )
    b = (p | "b" >> stream([{"t": datetime(2026, 1, 1), "n": 1}])).with_watermark("n", 0)
    a.union(b)
    with pytest.raises(sb.PipelineError, match=r"max_drift compares.*cannot be compared"):
        p.run()


@by_direct_runner
@pytest.mark.parametrize("sort_first", [False, True])
def test_rows_released_at_an_epochs_end_are_judged_against_the_epoch_before(
    direct: sb.DirectRunner, sort_first: bool
) -> None:
    """The Sort releases t=5 at the end of epoch 1 (its watermark rises to 20), when the
    fast input's watermark rises to 100: the Union judges it against the output watermark
    of epoch 0 (5: kept), whichever input ends the epoch first, at any parallelism."""
    p = sb.Pipeline(runner=direct)

    def sorted_slow() -> sb.PCollection:
        rows = p | "slow" >> stream([{"t": 5}], [{"t": 20}], [])
        return rows.with_watermark("t", 0).sort("t")

    slow = sorted_slow() if sort_first else None
    fast = (p | "fast" >> stream([{"t": 0}], [{"t": 100}])).with_watermark("t", 0)
    merged = fast.union(slow if slow is not None else sorted_slow(), policy="max")
    result = p.run()
    assert [sorted(ts(rows)) for rows in result.collect_by_epoch(merged)] == [
        [0],
        [5, 100],
        [],
        [],
    ]
    assert result.late_count(merged) == 1  # 20, released at the end, below 100


@by_direct_runner
def test_policy_max_with_parallel_units_judges_as_parallelism_1(direct: sb.DirectRunner) -> None:
    p = sb.Pipeline(runner=direct)
    fast = (p | "fast" >> stream([{"t": 100}, {"t": 100}], [{"t": 101}])).with_watermark("t", 0)
    slow = (p | "slow" >> stream([{"t": 1}, {"t": 1}], [{"t": 2}, {"t": 2}])).with_watermark("t", 0)
    merged = fast.union(slow, policy="max")
    late = merged.late_rows()
    result = p.run()
    assert result.late_count(merged) == len(result.collect(late)) == 2
    assert sorted(ts(result.collect(merged))) == [1, 1, 100, 100, 101]


# --- Spark streaming ------------------------------------------------------------------------


def by_epoch(result: Any, pcoll: sb.PCollection) -> list[list[tuple[Any, ...]]]:
    """Each epoch's rows in a fixed order (the runners may emit an epoch's rows in any)."""
    return [sorted(tuple(row.values()) for row in rows) for rows in result.collect_by_epoch(pcoll)]


def policy_max_run(runner: Any) -> dict[str, Any]:
    """Policy max at a union and a join: late rows, windows, joined rows, late counts."""
    p = sb.Pipeline(runner=runner)
    a = (p | "a" >> stream([{"t": 10}], [{"t": 30}], [{"t": 50}])).with_watermark("t", 0)
    b = (p | "b" >> stream([{"t": 0}], [{"t": 5}], [{"t": 25}])).with_watermark("t", 0)
    merged = a.union(b, policy="max")
    windows = merged.tumble("t", 10).combine_per_key(["window_start"], n=sb.Count())
    left = a.tumble("t", 10).select("window_start", left=sb.col("t"))
    right = b.tumble("t", 10).select("window_start", right=sb.col("t"))
    joined = left.join(right, on="window_start", how="full", policy="max")
    # the union's rows are checked through its windows (and its late rows), one query less
    outputs = [merged.late_rows(), windows, joined, joined.late_rows()]
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        result.prepare(*outputs)
    return {
        "epochs": [by_epoch(result, pcoll) for pcoll in outputs],
        "counts": (result.late_count(merged), result.late_count(a), result.late_count(b)),
    }


@pytest.mark.spark
def test_policy_max_on_spark_streaming_is_the_direct_runners(spark_runs: dict[str, Any]) -> None:
    direct, spark = policy_max_run(sb.DirectRunner()), outcome(spark_runs, "policy_max")
    assert spark == direct
    late, windows, joined, joined_late = direct["epochs"]
    assert late == [[], [(5, 10)], [(25, 30)], []]
    assert windows == [[(0, 1)], [(10, 1)], [(30, 1)], [(50, 1)]]
    assert direct["counts"] == (2, 0, 0)
    # window_start 0 of b's t=5 is below the join's watermark on it (10, a's): late, unmatched
    assert joined_late == [[], [(0, None, 5, 10)], [(20, None, 25, 30)], []]
    assert sorted(row for rows in joined for row in rows) == [
        (0, None, 0),
        (10, 10, None),
        (30, 30, None),
        (50, 50, None),
    ]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda a, b: a.join(b, on="k", times=("t", "t"), within=(0, 5), policy="max"),
            r"policy='max' or an idle input .* at a Join with no window key",
        ),
        (
            lambda a, b: a.union(b, policy="max").union(b.union(a)),
            "policy='(min|max)' meets policy='(max|min)' of another",
        ),
        (
            lambda a, b: a.select(t=sb.col("t") + 5, k="k").union(b, policy="max"),
            "'t' is derived differently on its inputs",
        ),
    ],
    ids=["join", "two-policies", "derived-apart"],
)
def test_spark_streaming_refuses_what_one_watermark_per_query_cannot_judge(
    spark_runner: Any, build: Any, message: str
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    a = (p | "a" >> stream([{"t": 1, "k": 1}])).with_watermark("t", 0)
    b = (p | "b" >> stream([{"t": 1, "k": 1}])).with_watermark("t", 0)
    build(a, b)
    with pytest.raises(sb.PipelineError, match=message):
        p.run()


def idle_inputs_run(runner: Any) -> dict[str, Any]:
    """A silent source idle after one epoch at a union and an idle join side."""
    p, merged, windows, late = silent_source_pipeline(1, runner)
    left = (p | "l" >> stream(*[[{"w": 10 * i, "a": i}] for i in range(4)])).with_watermark("w", 0)
    right = (p | "r" >> stream([{"w": 0, "b": 0}], [], [], [{"w": 5, "b": 5}])).with_watermark(
        "w", 0, idle_after=1
    )
    joined = left.join(right, on="w", how="left")
    outputs = [windows, late, joined, joined.late_rows()]
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        result.prepare(*outputs)
        # Four WithWatermarks meet in twos: one stage each serves all four outputs
        # (the runner's internals: `SparkStreamingResult.runs`, `StreamingRun.stages`).
        stages = {id(s): s for o in outputs for s in result.runs[o.node.id].stages[:-1]}
        assert len(stages) == 4
        # Each reads its source straight: the runner judges its epochs, with no query
        # (`queries.FedStage`).
        assert all(stage.query is None for stage in stages.values())
    return {
        "epochs": [by_epoch(result, pcoll) for pcoll in outputs],
        "late": (result.late_count(merged), result.late_count(joined)),
    }


@pytest.mark.spark
def test_idle_inputs_on_spark_streaming_are_the_direct_runners(spark_runs: dict[str, Any]) -> None:
    direct, spark = idle_inputs_run(sb.DirectRunner()), outcome(spark_runs, "idle_inputs")
    assert spark == direct
    windows, late, _, joined_late = direct["epochs"]
    # The silent source is idle after one empty epoch: windows close on the busy one's watermark
    assert windows[:3] == [[], [(0, 1), (10, 1)], [(20, 1)]]
    assert late[4] == [(6, 40)]
    assert joined_late == [[], [], [], [(5, None, 5, 20)], [], [], []]
    assert direct["late"] == (1, 1)


@pytest.mark.spark
def test_spark_streaming_refuses_idle_after_as_processing_time(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    (p | stream([{"t": 1}])).with_watermark("t", 0, idle_after="30 seconds")
    with pytest.raises(sb.PipelineError, match=r"idle_after='30 seconds' is processing time"):
        p.run()


def max_drift_run(runner: Any) -> list[Any]:
    """A fast source held back by max_drift against a slow one."""
    p = sb.Pipeline(runner=runner)
    fast = p | "fast" >> stream(*[[{"t": 100 * i + j} for j in range(3)] for i in range(3)])
    slow = p | "slow" >> stream(*[[{"t": 40 * i}] for i in range(6)])
    f = fast.with_watermark("t", 0, max_drift=50)
    merged = f.union(slow.with_watermark("t", 0))
    outputs = [f, merged]
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        result.prepare(*outputs)
    return [by_epoch(result, pcoll) for pcoll in outputs]


@pytest.mark.spark
def test_max_drift_on_spark_streaming_is_the_direct_runners(spark_runs: dict[str, Any]) -> None:
    direct, spark = max_drift_run(sb.DirectRunner()), outcome(spark_runs, "max_drift")
    assert spark == direct
    fast_epochs = [len(rows) for rows in direct[0]]
    # after epoch 1 (fast's watermark 102 against slow's 40) the fast source waits
    assert fast_epochs[:3] == [3, 3, 0]
    assert sum(1 for n in fast_epochs if n) == 3


@pytest.mark.spark
def test_spark_streaming_refuses_max_drift_over_a_live_source(
    spark_runner: Any, tmp_path: Any
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    sources = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "0.json").write_text('{"t": 1}\n')
        source = sb.ReadFiles(str(tmp_path / name), "json", schema={"t": int}, streaming=True)
        sources.append(p | name >> source)
    a = sources[0].with_watermark("t", 0, max_drift=5)
    a.union(sources[1].with_watermark("t", 0))
    a.for_each_batch(lambda rows, batch: None)
    with pytest.raises(sb.PipelineError, match=r"max_drift holds back .* read by Spark itself"):
        p.run()


SPARK_STREAMING_RUNS = {
    "policy_max": policy_max_run,
    "idle_inputs": idle_inputs_run,
    "max_drift": max_drift_run,
}
"""The Spark streaming runs this module compares with the direct runner's, by name."""


@pytest.fixture(scope="module")
def spark_runs(spark_runner: Any) -> dict[str, Any]:
    """Each of `SPARK_STREAMING_RUNS` on Spark, side by side (`SIDE_BY_SIDE` at once): its
    result, or the error it raised."""
    return side_by_side(
        {name: functools.partial(run, spark_runner) for name, run in SPARK_STREAMING_RUNS.items()}
    )
