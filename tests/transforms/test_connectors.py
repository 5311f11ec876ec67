"""`ForEachBatch` on the direct runner, and the application-time errors of the connectors."""

from __future__ import annotations

from typing import Any

import pytest

import sparkbeam as sb


def stream() -> sb.TestStream:
    return (
        sb.TestStream()
        .add_epoch([{"k": "a", "t": 1}, {"k": "b", "t": 12}])
        .add_epoch([])
        .add_epoch([{"k": "a", "t": 25}, {"k": "a", "t": 3}])  # t=3 is late
        .add_epoch([{"k": "b", "t": 31}])
    )


@pytest.mark.parametrize("parallelism", [1, 2])
def test_for_each_batch_calls_with_each_epochs_rows_then_the_flush(parallelism: int) -> None:
    calls: list[tuple[int, list[dict[str, Any]]]] = []
    p = sb.Pipeline(runner=sb.DirectRunner(parallelism=parallelism))
    counts = (
        (p | stream())
        .with_watermark("t", 5)
        .tumble("t", 10)
        .combine_per_key(["window_start"], n=sb.Count())
    )
    passed = counts.for_each_batch(lambda rows, batch: calls.append((batch, rows)))
    result = p.run()
    by_epoch = result.collect_by_epoch(counts)

    def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(rows, key=lambda row: row["window_start"])

    want = [(i, ordered(rows)) for i, rows in enumerate(by_epoch) if rows]
    assert [(batch, ordered(rows)) for batch, rows in calls] == want
    assert sorted(r["window_start"] for _, rows in calls for r in rows) == [0, 10, 20, 30]
    if parallelism == 1:  # (idle units hold the watermark back until the end: one call)
        assert len(calls) > 1 and by_epoch[-1]  # epoch by epoch, and in the flush
    assert sorted(map(str, result.collect(passed))) == sorted(map(str, result.collect(counts)))


def test_for_each_batch_needs_a_function() -> None:
    with pytest.raises(sb.PipelineError, match=r"ForEachBatch: 3 is not callable"):
        sb.ForEachBatch(3)  # type: ignore[arg-type]


def test_read_from_spark_runs_on_spark_only() -> None:
    p = sb.Pipeline()
    p | sb.ReadFromSpark("rate")
    with pytest.raises(sb.PipelineError, match=r"ReadFromSpark\(rate\).*Spark runner only"):
        p.run()
