"""Both runners emit the same rows in the same epochs for unbounded input (TestStream)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import (
    STREAM_BUILDERS,
    file_epochs,
    orders_stream,
    outcome,
    side_by_side,
)


def run(
    builder: Any, runner: Any, results: list[Any] | None = None
) -> tuple[dict[str, list[list[dict[str, Any]]]], list[Any]]:
    """Each output's rows by epoch, and each watermark's late and invalid counts (the
    result goes into `results` when given)."""
    p = sb.Pipeline(runner=runner)
    outputs, watermarked = builder(p)
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        result.prepare(*outputs.values())  # the outputs' queries side by side
    by_epoch = {name: result.collect_by_epoch(pcoll) for name, pcoll in outputs.items()}
    counts = [(result.late_count(w), result.invalid_count(w)) for w in watermarked]
    if results is not None:
        results.append(result)
    return by_epoch, counts


WITH_METRICS = ("joins",)
"""Streams whose `metrics()` are compared too, every transform's watermarks and lags: a
`Tumble` on one input of a window join ran in the join's query, where Spark's watermark is
the least of both inputs', and reported that one."""


Run = tuple[dict[str, list[list[dict[str, Any]]]], list[Any], Any]
"""One run of a stream: each output's rows by epoch, the watermarks' counts, its result."""


def run_fully(builder: Any, runner: Any, metrics: bool) -> Run:
    """`run`, and (with `metrics`) the result's `metrics()` read while its queries are warm."""
    results: list[Any] = []
    by_epoch, counts = run(builder, runner, results)
    if metrics:
        results[0].metrics()
    return by_epoch, counts, results[0]


@pytest.fixture(scope="module")
def spark_runs(spark_runner: Any) -> dict[str, Run | BaseException]:
    """Every shared stream run on Spark, `SIDE_BY_SIDE` pipelines at once (each stream's own
    test compares its run, or raises the error it ended with)."""
    return side_by_side(
        {
            name: functools.partial(run_fully, builder, spark_runner, name in WITH_METRICS)
            for name, builder in sorted(STREAM_BUILDERS.items())
        }
    )


@pytest.mark.parametrize("name", sorted(STREAM_BUILDERS))
def test_runners_agree_epoch_by_epoch(name: str, spark_runs: dict[str, Any]) -> None:
    spark = outcome(spark_runs, name)
    with_metrics = name in WITH_METRICS
    direct = run_fully(STREAM_BUILDERS[name], sb.DirectRunner(), with_metrics)
    assert_runs_agree(direct, spark, with_metrics, with_metrics)


def assert_agree_epoch_by_epoch(
    builder: Any, spark_runner: Any, metrics: bool = False, every_watermark: bool = False
) -> None:
    """The Spark runner on `spark_runner`'s session emits the direct runner's rows in the same
    epochs for the stream `builder` makes, and drops the same late and invalid rows (with
    `metrics`, `metrics()` agrees too: rows in and out, and each `WithWatermark`'s drops,
    watermark and estimate; with `every_watermark`, every transform's watermarks, lags and
    estimates)."""
    direct = run_fully(builder, sb.DirectRunner(), metrics)
    spark = run_fully(builder, spark_runner, metrics)
    assert_runs_agree(direct, spark, metrics, every_watermark)


def assert_runs_agree(
    direct_run: Run, spark_run: Run, metrics: bool, every_watermark: bool
) -> None:
    """The Spark run emits the direct run's rows in the same epochs and drops the same late
    and invalid rows (with `metrics` and `every_watermark`: as `assert_agree_epoch_by_epoch`)."""
    direct, direct_counts, direct_result = direct_run
    spark, spark_counts, spark_result = spark_run
    assert spark_counts == direct_counts
    if metrics:
        direct_metrics, spark_metrics = (
            {
                label: (m.rows_in, m.rows_out, m.invalid_rows)
                + (
                    (m.late_rows, m.watermarks, m.watermark_estimates)
                    if "WithWatermark" in label
                    else ()
                )
                + (
                    (m.watermarks, m.watermark_lag, m.watermark_estimates)
                    if every_watermark
                    else ()
                )
                for label, m in result.metrics().items()
            }
            for result in (direct_result, spark_result)
        )
        assert spark_metrics == direct_metrics
    for output, epochs in direct.items():
        assert len(spark[output]) == len(epochs), output
        for index, (want, got) in enumerate(zip(epochs, spark[output], strict=True)):
            assert row_multiset(got) == row_multiset(want), (output, index)
            if output == "sorted":  # the order of the sort column is part of the contract
                # (ties: arrival order on the direct runner, unspecified on Spark; docs: Decisions)
                assert [row["t"] for row in got] == [row["t"] for row in want], (output, index)


def test_stream_outputs_are_not_trivial() -> None:
    """The shared streams drop late and invalid rows and emit before the final flush."""
    direct, counts = run(STREAM_BUILDERS["windows"], sb.DirectRunner())
    assert counts == [(2, 1)]  # at(5, -1) in epoch 1 and at(14) in epoch 4 are late
    assert any(direct["tumble"][:-1]) and direct["tumble"][-1]


def test_a_directory_of_files_is_a_stream_of_epochs(spark_runner: Any, tmp_path: Any) -> None:
    """`ReadFiles(..., streaming=True)`: both runners take one file per epoch, in name order."""
    epochs = orders_stream().epochs
    for index, rows in enumerate(epochs):
        with open(tmp_path / f"part-{index:03d}.json", "w") as handle:
            for row in rows:
                record = {**row, "t": None if row["t"] is None else row["t"].isoformat() + "Z"}
                handle.write(json.dumps(record) + "\n")

    def build(p: sb.Pipeline) -> Any:
        return file_epochs(p, str(tmp_path))

    direct, direct_counts = run(build, sb.DirectRunner())
    spark, spark_counts = run(build, spark_runner)
    assert direct_counts == spark_counts == [(2, 1)]
    assert len(direct["windows"]) == len(epochs) + 1
    for want, got in zip(direct["windows"], spark["windows"], strict=True):
        assert row_multiset(got) == row_multiset(want)
