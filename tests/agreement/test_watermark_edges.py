"""Rows exactly at the watermark, one microsecond below and one above, through every late-row
filter the Spark runner chooses (`runners/spark/plan/late_filters.py`, the filters in
`runners/spark/exact/`), fed and live."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.execute.queries import StreamingRun
from sparkbeam.runners.spark.execute.streaming import StreamingTranslation
from sparkbeam.runners.spark.plan.late_filters import Strategy
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import StreamOutputs
from tests.agreement.test_streaming import assert_agree_epoch_by_epoch
from tests.agreement.test_streaming import run as run_streaming
from tests.files import publish_parquet

pytestmark = pytest.mark.spark

T0 = datetime(2026, 4, 1, 10)
US = timedelta(microseconds=1)
SCHEMA = {"k": str, "v": int, "n": int, "t": datetime}


def edge_epochs() -> list[list[dict[str, Any]]]:
    """After epoch 0 the watermarks are 10:00:08 (`t`, delay 2 s) and 8000 (`n`, delay 2000);
    epoch 1 holds a row at each, one just below and one just above; epoch 2 moves them on."""
    wm = T0 + timedelta(seconds=8)
    return [
        [{"k": "first", "v": 1, "n": 10_000, "t": T0 + timedelta(seconds=10)}],
        [
            {"k": "at", "v": 2, "n": 8_000, "t": wm},
            {"k": "below", "v": 4, "n": 7_999, "t": wm - US},
            {"k": "above", "v": 8, "n": 8_001, "t": wm + US},
        ],
        [{"k": "later", "v": 16, "n": 30_000, "t": T0 + timedelta(seconds=30)}],
    ]


def fed(p: sb.Pipeline) -> StreamOutputs:
    """A `WithWatermark` straight on the source (the stateless filter on the epoch's
    watermark), one on a computed input (the deduplication), and one on an integer time."""
    stream = sb.TestStream(schema=SCHEMA)
    for rows in edge_epochs():
        stream.add_epoch(rows)
    source = p | stream
    direct = source.with_watermark("t", "2 seconds")
    computed = source.filter(sb.col("v") > 0).with_watermark("t", "2 seconds")
    integer = source.with_watermark("n", 2_000)
    outputs = {
        "direct": direct,
        "direct late": direct.late_rows(),
        "computed": computed,
        "computed late": computed.late_rows(),
        "integer late": integer.late_rows(),
    }
    return outputs, [direct, computed, integer]


def test_the_fed_filters_agree_at_the_watermark(spark: Any, spark_runner: Any) -> None:
    p = sb.Pipeline()
    _, (direct, _computed, integer) = fed(p)
    with tempfile.TemporaryDirectory() as scratch:  # the feed and its `.incoming` inside it
        feed = os.path.join(scratch, "feed")
        translation = StreamingTranslation(spark, p.nodes, feed, set(range(len(p.nodes))))
    # the stateless filter where the source feeds the WithWatermark, a stateful one elsewhere
    assert set(translation.epoch_marks) == {direct.node.id, integer.node.id}
    assert_agree_epoch_by_epoch(fed, spark_runner)


def fed_with_lateness(p: sb.Pipeline) -> StreamOutputs:
    """`allowed_lateness` on the Spark runner: delay 1 s with 1 s of lateness is the 2 s delay
    above, so the rows at, below and above the watermark are judged alike, and `emit="close"`
    windows close on the watermark."""
    stream = sb.TestStream(schema=SCHEMA)
    for rows in edge_epochs():
        stream.add_epoch(rows)
    marked = (p | stream).with_watermark("t", "1 second", allowed_lateness="1 second")
    windows = marked.tumble("t", "5 seconds").combine_per_key(
        ["k", "window_start"], total=sb.Sum("v")
    )
    return {"kept": marked, "late": marked.late_rows(), "windows": windows}, [marked]


def test_lateness_is_part_of_the_watermark_delay_on_spark(spark_runner: Any) -> None:
    direct, _ = run_streaming(fed_with_lateness, sb.DirectRunner())
    assert [row["k"] for epoch in direct["late"] for row in epoch] == ["below"]
    assert_agree_epoch_by_epoch(fed_with_lateness, spark_runner, metrics=True, every_watermark=True)
    rows = [row for epoch in edge_epochs() for row in epoch]

    def bounded(p: sb.Pipeline) -> dict[str, sb.PCollection]:
        marked = (p | sb.Create(rows, schema=SCHEMA)).with_watermark(
            "t", "1 second", allowed_lateness="1 second"
        )
        windows = marked.tumble("t", "5 seconds").combine_per_key(
            ["k", "window_start"], total=sb.Sum("v")
        )
        return {"kept": marked, "windows": windows}

    outputs = {}
    for runner in (sb.DirectRunner(), spark_runner):
        p = sb.Pipeline(runner=runner)
        made = bounded(p)
        result = p.run()
        counted = result.metrics()[made["kept"].node.label]
        outputs[type(runner).__name__] = {
            name: row_multiset(result.collect(pcoll)) for name, pcoll in made.items()
        } | {"marks": (counted.watermarks, counted.watermark_estimates)}
    assert outputs["SparkRunner"] == outputs["DirectRunner"]
    marks, estimates = outputs["SparkRunner"]["marks"]
    assert estimates == {"t": marks["t"] + timedelta(seconds=1)}


def write_epochs(directory: str) -> None:
    """One parquet file per epoch, modification times in name order (Spark's file order)."""
    for index, rows in enumerate(edge_epochs()):
        table = pa.table(
            {
                "k": pa.array([row["k"] for row in rows], pa.string()),
                "v": pa.array([row["v"] for row in rows], pa.int64()),
                "n": pa.array([row["n"] for row in rows], pa.int64()),
                "t": pa.array([row["t"] for row in rows], pa.timestamp("us", tz="UTC")),
            }
        )
        path = os.path.join(directory, f"epoch-{index:03d}.parquet")
        publish_parquet(table, path, 1_700_000_000 + index)


def live(p: sb.Pipeline, source: str) -> dict[str, sb.PCollection]:
    """Spark's file source: a sink right after the filter (one watermark: the deduplication),
    its late rows, and a sink three stateful operators down (the pass-through
    `transformWithState` on the current watermark)."""
    w = (p | sb.ReadFiles(source, schema=SCHEMA, streaming=True)).with_watermark("t", "2 seconds")
    per_window = w.tumble("t", "5 seconds").combine_per_key(
        ["k", "window_start"], total=sb.Sum("v")
    )
    windows = per_window.combine_per_key(["window_start"], total=sb.Sum("total"))
    return {"kept": w, "late": w.late_rows(), "windows": windows}


def test_the_live_filters_agree_at_the_watermark(spark: Any, tmp_path: Any) -> None:
    source = str(tmp_path / "in")
    os.makedirs(source)
    write_epochs(source)

    direct = sb.Pipeline()
    outputs = live(direct, source)
    result = direct.run()
    want = {  # Spark never flushes a live source: what the direct runner emits before that
        name: [row for epoch in result.collect_by_epoch(pcoll)[:-1] for row in epoch]
        for name, pcoll in outputs.items()
    }
    assert {row["k"] for row in want["kept"]} == {"first", "at", "above", "later"}
    assert [row["k"] for row in want["late"]] == ["below"]
    # [10:00:05, 10): at + above; [10:00:10, 15): first (both closed by epoch 2's watermark)
    assert sorted(row["total"] for row in want["windows"]) == [1, 10]

    got: dict[str, list[dict[str, Any]]] = {name: [] for name in want}
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    sinks = {}
    for name, pcoll in live(p, source).items():
        sinks[name] = pcoll.for_each_batch(lambda rows, batch, name=name: got[name].extend(rows))
    chosen = {}
    for name in ("kept", "windows"):
        run = StreamingRun(spark, p.nodes, sinks[name].node, sink=lambda frame: None, live=True)
        translation = run.final.translation
        (origin,) = translation.late_filters.filters.values()
        chosen[name] = (origin.strategy, dict(translation.settings))
        run.stop()
    assert chosen["kept"] == (Strategy.FOOTERS, {})
    assert chosen["windows"] == (Strategy.FOOTERS, {})
    running = p.run()
    try:
        running.process_all_available()
    finally:
        running.stop()
    for name, rows in want.items():
        assert row_multiset(got[name]) == row_multiset(rows), name
