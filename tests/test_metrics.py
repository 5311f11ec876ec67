"""`result.metrics()`: per transform rows in and out, drops, watermarks, lag and state (item 5).

Both runners on bounded input (where they must agree on the rows and, for a
`WithWatermark`, on its watermark and lag); the direct runner over epochs.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 4, 1, 10, minute, second)


def test_metrics_of_a_bounded_pipeline_agree_on_both_runners(runner: Any) -> None:
    rows = [
        {"t": at(1, 30), "v": 1},
        {"t": at(3), "v": 2},
        {"t": None, "v": 3},
        {"t": at(2, 10), "v": 4},
    ]
    with sb.Pipeline(runner=runner) as p:
        source = p | "orders" >> sb.Create(rows)
        w = source | "wm" >> sb.WithWatermark("t", "1 minute")
        invalid = w.invalid_rows()
        sums = w.tumble("t", "1 minute").combine_per_key(["window_start"], total=sb.Sum("v"))
    metrics = p.result.metrics()
    assert list(metrics)[:3] == ["orders", "wm", invalid.node.label]
    assert isinstance(metrics["wm"], sb.TransformMetrics)
    assert (metrics["orders"].rows_in, metrics["orders"].rows_out) == (0, 4)
    wm = metrics["wm"]
    assert (wm.rows_in, wm.rows_out, wm.late_rows, wm.invalid_rows) == (4, 3, 0, 1)
    assert wm.rows_in == wm.rows_out + wm.late_rows + wm.invalid_rows
    assert wm.watermarks == {"t": at(2)}
    assert wm.watermark_lag == {"t": timedelta(minutes=1)}
    assert (metrics[invalid.node.label].rows_in, metrics[invalid.node.label].rows_out) == (1, 1)
    assert metrics[sums.node.label].rows_out == 3
    assert metrics[sums.node.label].rows_in == 3


def test_metrics_over_epochs_on_the_direct_runner() -> None:
    stream = (
        sb.TestStream()
        .add_epoch([{"t": 10, "k": "a"}, {"t": 12, "k": "b"}])
        .add_epoch([{"t": 3, "k": "a"}, {"t": None, "k": "b"}, {"t": 15, "k": "a"}])
        .add_epoch([{"t": 30, "k": "b"}])
    )
    p = sb.Pipeline()
    w = (p | "events" >> stream) | "wm" >> sb.WithWatermark("t", 2)
    ordered = w | "sorted" >> sb.Sort("t")
    result = p.run()
    metrics = result.metrics()
    wm = metrics["wm"]
    assert (wm.rows_in, wm.rows_out, wm.late_rows, wm.invalid_rows) == (6, 4, 1, 1)
    assert wm.watermarks == {"t": 28}
    assert wm.watermark_lag == {"t": 2}
    assert wm.state_size == 0
    sort = metrics["sorted"]
    assert (sort.rows_in, sort.rows_out) == (4, 4)
    assert sort.watermarks == {"t": 28}
    assert sort.watermark_lag == {"t": 30 - 28}
    assert sort.peak_state_size == result.peak_state_size(ordered) == 3  # 10, 12 and 15 held
    assert sort.state_size == 0  # flushed at the end


def test_metrics_count_the_late_rows_of_a_union() -> None:
    p = sb.Pipeline()
    fast = (
        p | "fast" >> sb.TestStream().add_epoch([{"t": 9}]).add_epoch([{"t": 10}])
    ).with_watermark("t", 0)
    slow = (
        p | "slow" >> sb.TestStream().add_epoch([{"t": 1}]).add_epoch([{"t": 2}])
    ).with_watermark("t", 0)
    merged = fast | "merged" >> sb.Union(slow, policy="max")
    metrics = p.run().metrics()
    assert (metrics["merged"].rows_in, metrics["merged"].rows_out) == (4, 3)
    assert metrics["merged"].late_rows == 1
    assert merged.watermarked_columns == frozenset({"t"})


def test_metrics_with_parallel_units_and_fail_over_count_each_row_once() -> None:
    epochs = [[{"t": 10 * i + j} for j in range(5)] for i in range(5)]
    found = []
    for runner in (
        sb.DirectRunner(),
        sb.DirectRunner(parallelism=3, checkpoint_every=2, fail_at=[7, 25]),
    ):
        p = sb.Pipeline(runner=runner)
        stream = sb.TestStream()
        for rows in epochs:
            stream.add_epoch(rows)
        w = (p | "events" >> stream) | "wm" >> sb.WithWatermark("t", 100)
        w | "sorted" >> sb.Sort("t")
        metrics = p.run().metrics()
        found.append(
            (metrics["wm"].rows_out, metrics["sorted"].rows_in, metrics["sorted"].rows_out)
        )
    assert found[0] == found[1] == (25, 25, 25)


@pytest.mark.spark
def test_metrics_of_spark_streaming_are_the_direct_runners(spark_runner: Any) -> None:
    def run(runner: Any) -> dict[str, Any]:
        p = sb.Pipeline(runner=runner)
        events = p | "events" >> sb.TestStream().add_epoch(
            [{"t": at(10), "k": "a"}, {"t": at(12), "k": "b"}]
        ).add_epoch([{"t": at(3), "k": "a"}, {"t": None, "k": "b"}, {"t": at(15), "k": "a"}])
        w = events | "wm" >> sb.WithWatermark("t", "2 minutes")
        sums = w.tumble("t", "5 minutes") | "per window" >> sb.CombinePerKey(
            ["window_start", "k"], n=sb.Count()
        )
        sink = sums.for_each_batch(lambda rows, batch: None)
        ordered = w | "sorted" >> sb.Sort("t")
        late = w.late_rows()
        result = p.run()
        metrics = result.metrics()
        if isinstance(runner, sb.SparkRunner):
            # The sink's query (run by p.run()) counted the windows: metrics() ran one query
            # for each last PCollection it did not read, and runs none again.
            assert set(result.sinks) == {sink.node.id}
            assert set(result.runs) == {ordered.node.id, late.node.id}
            ran = dict(result.runs)
            assert result.metrics() == metrics
            assert result.collect(ordered) and result.runs == ran
        # state sizes: None on Spark (its state operators are not one per transform)
        return {
            label: dataclasses.replace(m, state_size=None, peak_state_size=None)
            for label, m in metrics.items()
        }

    direct, spark = run(sb.DirectRunner()), run(spark_runner)
    assert spark == direct
    wm = direct["wm"]
    assert (wm.rows_in, wm.rows_out, wm.late_rows, wm.invalid_rows) == (5, 3, 1, 1)
    assert (wm.watermarks, wm.watermark_lag) == ({"t": at(13)}, {"t": timedelta(minutes=2)})
    assert (direct["per window"].rows_in, direct["per window"].rows_out) == (3, 3)
    assert direct["per window"].watermarks == {"window_start": at(10)}
    assert direct["sorted"].watermarks == {"t": at(13)}


@pytest.mark.spark
def test_metrics_of_a_live_spark_query_start_no_query(spark: Any, tmp_path: Any) -> None:
    """A transform only a live sink's query reads is reported as that query counted it so
    far, before its first micro-batch too: metrics() starts no query of its own."""
    source = tmp_path / "in"
    source.mkdir()
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    files = sb.ReadFiles(str(source), format="json", schema={"k": str, "v": int}, streaming=True)
    (p | "files" >> files) | "sink" >> sb.ForEachBatch(lambda rows, batch: None)
    result = p.run()
    try:
        assert result.metrics()["files"].rows_out == 0
        (source / "part-000.json").write_text('{"k": "a", "v": 1}\n{"k": "b", "v": 2}\n')
        result.process_all_available()
        metrics = result.metrics()
        assert (metrics["files"].rows_out, metrics["sink"].rows_in) == (2, 2)
        assert result.runs == {}
    finally:
        result.stop()
