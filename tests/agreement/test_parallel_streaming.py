"""The parallel direct runner agrees with the Spark runner epoch by epoch (issue 14).

Spark keeps one watermark per query, computed once per micro-batch from the
largest event time over all partitions; the direct runner's parallel units
share one per epoch the same way (`emit="periodic"`), so how rows are spread
over units changes neither which rows are late nor what each epoch emits.
Two small streams with late rows, one streaming query each, at parallelism 3
with the random schedule, against the Spark runner.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import orders_stream

pytestmark = pytest.mark.spark

T0 = datetime(2026, 4, 1, 10)
PARALLEL = sb.DirectRunner(parallelism=3, schedule="random", seed=7)


def at(minutes: int, seconds: int = 0, microseconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds, microseconds=microseconds)


def five_rows(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    """The issue's example: 10:04:59.9997 is below the watermark 10:05:00.000."""
    stream = (
        sb.TestStream()
        .add_epoch([{"ts": at(10, 0, 700)}])
        .add_epoch([{"ts": at(5, 0, 300)}, {"ts": at(4, 59, 999_700)}, {"ts": at(5)}])
    )
    w = (p | stream).with_watermark("ts", "5 minutes")
    return w, w


def windows(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    """Out of order rows with late and invalid ones, into 2-minute windows per key."""
    w = (p | orders_stream()).with_watermark("t", "5 minutes")
    counts = w.tumble("t", "2 minutes").combine_per_key(
        ["k", "window_start"], n=sb.Count(), total=sb.Sum("v")
    )
    return counts, w


def run(build: Any, runner: Any) -> tuple[list[Any], tuple[int, int]]:
    p = sb.Pipeline(runner=runner)
    output, w = build(p)
    result = p.run()
    epochs = [row_multiset(rows) for rows in result.collect_by_epoch(output)]
    return epochs, (result.late_count(w), result.invalid_count(w))


@pytest.mark.parametrize("build", [five_rows, windows], ids=["five_rows", "windows"])
def test_parallel_units_and_spark_agree_epoch_by_epoch(build: Any, spark_runner: Any) -> None:
    single = run(build, sb.DirectRunner())
    parallel = run(build, PARALLEL)
    assert parallel == single
    assert single[1][0] > 0  # rows are late
    spark = run(build, spark_runner)
    assert spark[1] == parallel[1]
    assert len(spark[0]) == len(parallel[0])
    for index, (want, got) in enumerate(zip(parallel[0], spark[0], strict=True)):
        assert got == want, index
