"""Unbounded pipelines in production on Spark: sinks, live sources, checkpoints and restarts.

A live query's output is compared with the direct runner's over the same
files: every row emitted before the end-of-input flush (a live source has no
end, so Spark never flushes).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.plan.late_filters import judged_by_footers
from tests.agreement.pipelines import row_multiset
from tests.files import publish_parquet
from tests.runners.spark.drivers import kill_during_batch
from tests.tracebacks import assert_short_as_direct

pytestmark = pytest.mark.spark

T0 = datetime(2026, 4, 1, 10)
SCHEMA = {"k": str, "v": int, "t": datetime}


def epoch_rows(index: int) -> list[dict[str, Any]]:
    """Epoch `index`: rows 20 s further on, out of order, and one late row from the start."""
    rows = [
        {"k": f"k{j % 3}", "v": 10 * index + j, "t": T0 + timedelta(seconds=20 * index + 3 * j)}
        for j in range(6)
    ]
    rows.reverse()
    if index:
        rows.append({"k": "k0", "v": -index, "t": T0})  # late once the watermark has moved
    return rows


def write_epoch(directory: Any, index: int) -> None:
    """One parquet file per epoch, modification times in name order (Spark's file order)."""
    columns = {name: [row[name] for row in epoch_rows(index)] for name in SCHEMA}
    table = pa.table(
        {
            "k": pa.array(columns["k"], pa.string()),
            "v": pa.array(columns["v"], pa.int64()),
            "t": pa.array(columns["t"], pa.timestamp("us", tz="UTC")),
        }
    )
    path = os.path.join(directory, f"epoch-{index:03d}.parquet")
    publish_parquet(table, path, 1_700_000_000 + index)


def per_window(
    p: sb.Pipeline, source: str, slow: str | None = None, watermarked: list[Any] | None = None
) -> sb.PCollection:
    rows = p | sb.ReadFiles(source, schema=SCHEMA, streaming=True)
    w = rows.with_watermark("t", "5 seconds")  # straight on the source: judged by the footers
    if watermarked is not None:
        watermarked.append(w)
    if slow is not None:
        marker = slow

        def hold_up(row: dict[str, Any]) -> bool:
            if os.path.exists(marker):
                open(marker + ".started", "w").close()
                time.sleep(60)  # stopped from outside long before this ends
            return True

        w = w.filter(hold_up)
    return w.tumble("t", "15 seconds").combine_per_key(
        ["k", "window_start"], n=sb.Count(), total=sb.Sum("v")
    )


def direct_before_flush(source: str, sort: bool = False) -> list[dict[str, Any]]:
    """What the direct runner emits over the files before the end-of-input flush."""
    p = sb.Pipeline()
    out = per_window(p, source)
    if sort:
        out = out.sort("window_start")
    epochs = p.run().collect_by_epoch(out)
    assert epochs[-1], "the flush must hold rows, or the comparison proves little"
    return [row for epoch in epochs[:-1] for row in epoch]


def read_sink(path: str) -> list[dict[str, Any]]:
    """The committed rows of a Spark file sink's directory, read by the direct runner."""
    p = sb.Pipeline()
    rows = p | sb.ReadFiles(path)
    return p.run().collect(rows)


def replayed_stream_writes_files_and_calls_back(spark_runner: Any, tmp_path: Any) -> None:
    """A TestStream with sinks: Spark runs every epoch and the flush, then stops."""

    def build(runner: Any, out: str, calls: list[tuple[int, list[dict[str, Any]]]]) -> None:
        stream = sb.TestStream(schema=SCHEMA)
        for index in range(3):
            stream.add_epoch(epoch_rows(index))
        p = sb.Pipeline(runner=runner)
        windows = (
            (p | stream)
            .with_watermark("t", "5 seconds")
            .tumble("t", "15 seconds")
            .combine_per_key(["k", "window_start"], n=sb.Count(), total=sb.Sum("v"))
        )
        windows.write_files(out).for_each_batch(lambda rows, batch: calls.append((batch, rows)))
        p.run()

    direct_calls: list[tuple[int, list[dict[str, Any]]]] = []
    spark_calls: list[tuple[int, list[dict[str, Any]]]] = []
    build(sb.DirectRunner(), str(tmp_path / "direct"), direct_calls)
    build(spark_runner, str(tmp_path / "spark"), spark_calls)

    written = read_sink(str(tmp_path / "spark"))
    assert row_multiset(written) == row_multiset(read_sink(str(tmp_path / "direct")))
    assert len(written) > 3
    # Spark's file sink writes the direct runner's types: the two outputs merge in pandas
    outputs = [tmp_path / "direct", tmp_path / "spark"]
    schemas = [pq.read_schema(next(d.glob("part-*"))) for d in outputs]
    assert schemas[0].equals(schemas[1]), schemas
    assert str(schemas[1].field("window_start").type) == "timestamp[us, tz=UTC]"
    frames = [pd.read_parquet(d) for d in outputs]
    merged = pd.merge(*frames, on=["k", "window_start"], suffixes=("", "_spark"))
    assert len(merged) == len(written) and merged["n"].equals(merged["n_spark"])
    called = [row for _, rows in spark_calls for row in rows]
    assert row_multiset(called) == row_multiset(row for _, rows in direct_calls for row in rows)
    batches = [batch for batch, _ in spark_calls]
    assert batches == sorted(set(batches)) and len(batches) > 1  # one call per non-empty batch


def test_live_files_survive_a_stop_between_batches_and_a_stop_during_one(
    spark: Any, tmp_path: Any
) -> None:
    """Spark's own file source over a growing directory, a file sink and a checkpoint:
    stopped after two epochs, started again, stopped in the middle of a micro-batch,
    started again; the sink holds every row once, as the direct runner emits them."""
    source, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))
    slow = str(tmp_path / "slow")
    os.makedirs(source)

    watermarked: list[Any] = []

    def start() -> Any:
        runner = sb.SparkRunner(spark=spark, checkpoint_location=checkpoints)
        p = sb.Pipeline(runner=runner)
        per_window(p, source, slow, watermarked).write_files(out)
        return p.run()

    write_epoch(source, 0)
    write_epoch(source, 1)
    first = start()
    assert len(first.queries) == 1
    assert judged_by_footers(first.pipeline.nodes[watermarked[-1].node.inputs[0]])
    first.process_all_available()
    first.stop()
    assert first.late_count(watermarked[-1]) == 1  # epoch 1's row from the start
    after_two = read_sink(out)
    assert after_two  # windows closed by the second epoch's watermark

    open(slow, "w").close()
    write_epoch(source, 2)
    second = start()  # goes on from the checkpoint: epoch 2 is its first batch
    query = second.queries[0]
    held_up = slow + ".started"  # written by the filter's task: epoch 2's batch is under way
    deadline = time.monotonic() + 120
    while not os.path.exists(held_up) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.exists(held_up), "epoch 2's micro-batch never reached the filter"
    assert query.status["isTriggerActive"]
    stopper = threading.Thread(target=second.stop)
    stopper.start()
    stopper.join(timeout=120)
    assert not stopper.is_alive()
    os.remove(slow)
    assert row_multiset(read_sink(out)) == row_multiset(after_two)  # nothing half-written

    write_epoch(source, 3)
    third = start()
    third.process_all_available()
    third.stop()
    assert row_multiset(read_sink(out)) == row_multiset(direct_before_flush(source))


KILLED_DRIVER = """
import sparkbeam as sb
from tests.runners.spark.test_streaming_production import per_window
p = sb.Pipeline(runner=sb.SparkRunner(spark=spark, checkpoint_location={checkpoints!r}))
per_window(p, {source!r}, {slow!r}).write_files({out!r})
p.run().process_all_available()
"""
"""What the killed driver runs (`drivers.kill_during_batch`: its session is `spark`)."""


@pytest.mark.killed_driver
def test_live_files_survive_a_driver_killed_during_a_batch(spark: Any, tmp_path: Any) -> None:
    """The driver (Python and its JVM) killed with SIGKILL in the middle of the first
    micro-batch; a new one started on the same checkpoint writes every row once."""
    source, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))
    slow = str(tmp_path / "slow")
    os.makedirs(source)
    for index in range(3):
        write_epoch(source, index)
    open(slow, "w").close()
    script = KILLED_DRIVER.format(checkpoints=checkpoints, source=source, slow=slow, out=out)
    kill_during_batch(script, slow, 120)
    assert os.listdir(checkpoints)  # the killed query left its checkpoint

    runner = sb.SparkRunner(spark=spark, checkpoint_location=checkpoints)
    p = sb.Pipeline(runner=runner)
    per_window(p, source, slow).write_files(out)  # the same query, the marker gone
    result = p.run()
    result.process_all_available()
    result.stop()
    assert row_multiset(read_sink(out)) == row_multiset(direct_before_flush(source))


def callback_sink_replays_a_failed_batch(spark: Any, tmp_path: Any) -> None:
    """ForEachBatch is at least once: a batch whose callback failed runs again after the
    restart with the same id, so a callback keyed on the id loses and repeats nothing.
    (With a Sort after the windows, the late-row filter is the pass-through one.)"""
    source, checkpoints = str(tmp_path / "in"), str(tmp_path / "ckpt")
    os.makedirs(source)
    for index in range(3):
        write_epoch(source, index)
    by_batch: dict[int, list[dict[str, Any]]] = {}
    failures: list[int] = []

    def keep(rows: list[dict[str, Any]], batch: int) -> None:
        if not failures and by_batch:  # the second non-empty batch fails, once
            failures.append(batch)
            raise RuntimeError("the sink's store is down")
        by_batch[batch] = rows

    def start() -> Any:
        runner = sb.SparkRunner(spark=spark, checkpoint_location=checkpoints)
        p = sb.Pipeline(runner=runner)
        per_window(p, source).sort("window_start").for_each_batch(keep)
        return p.run()

    first = start()
    with pytest.raises(sb.PipelineError, match="the sink's store is down") as caught:
        first.process_all_available()
    first.stop()
    assert failures and failures[0] not in by_batch

    # printed, as short as the direct runner's error for a callback failing the same way
    def store_down(rows: list[dict[str, Any]], batch: int) -> None:
        raise RuntimeError("the sink's store is down")

    direct = sb.Pipeline()
    (direct | sb.Create([{"k": "a"}])).for_each_batch(store_down)
    with pytest.raises(sb.PipelineError) as on_direct:
        direct.run()
    assert_short_as_direct(caught.value, on_direct.value)

    second = start()
    second.process_all_available()
    second.stop()
    assert failures[0] in by_batch  # run again, under the same id
    rows = [row for batch in sorted(by_batch) for row in by_batch[batch]]
    want = direct_before_flush(source, sort=True)
    assert row_multiset(rows) == row_multiset(want)
    assert [row["window_start"] for row in rows] == [row["window_start"] for row in want]


def read_from_spark_through_a_connector(spark: Any, tmp_path: Any) -> None:
    """`ReadFromSpark` with Spark's parquet connector gives what ReadFiles gives."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    for index in range(2):
        write_epoch(source, index)
    seen: list[dict[str, Any]] = []
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    read = sb.ReadFromSpark(
        "parquet", {"path": source, "maxFilesPerTrigger": 1}, schema={"t": datetime, "v": int}
    )
    (p | read).for_each_batch(lambda rows, batch: seen.extend(rows))
    result = p.run()
    result.process_all_available()
    result.stop()
    want = [{"t": row["t"], "v": row["v"]} for i in range(2) for row in epoch_rows(i)]
    assert row_multiset(seen) == row_multiset(want)


def a_failed_sink_stops_the_run(spark: Any, tmp_path: Any) -> None:
    """Two sinks over a live directory, the second a callback that fails: waiting on the run
    (as a `spark-submit` job does) raises the callback's error, naming its transform, and
    leaves none of the run's queries running, where it waited on the first sink for good."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    for index in range(3):  # windows close: the callback gets rows
        write_epoch(source, index)

    def alert(rows: list[dict[str, Any]], batch: int) -> None:
        raise RuntimeError("the alert service is down")

    runner = sb.SparkRunner(spark=spark, checkpoint_location=str(tmp_path / "ckpt"))
    p = sb.Pipeline(runner=runner)
    windows = per_window(p, source)
    windows.write_files(str(tmp_path / "out"))
    windows | "Alert" >> sb.ForEachBatch(alert)
    running = p.run()
    queries = running.queries
    try:
        assert len(queries) == 2 and all(query.isActive for query in queries)
        with pytest.raises(sb.PipelineError, match=r"^Alert: .*the alert service is down"):
            running.await_termination(timeout=120)  # the old wait returned False after 120 s
        assert not any(query.isActive for query in queries)
    finally:
        running.stop()


SIDE_BY_SIDE_SCENARIOS: dict[str, Any] = {
    "replayed stream": replayed_stream_writes_files_and_calls_back,
    "callback replays": lambda runner, tmp: callback_sink_replays_a_failed_batch(runner.spark, tmp),
    "connector": lambda runner, tmp: read_from_spark_through_a_connector(runner.spark, tmp),
    "failed sink": lambda runner, tmp: a_failed_sink_stops_the_run(runner.spark, tmp),
}
"""The module's streaming runs with no timed step, by name: each takes the suite's Spark
runner and a directory of its own, and asserts (the stop and kill tests run alone)."""


@pytest.fixture(scope="module")
def scenarios(spark_runner: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each of `SIDE_BY_SIDE_SCENARIOS` run at once, in threads: None, or the error it raised
    (its own test raises it)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(SIDE_BY_SIDE_SCENARIOS)) as pool:
        futures = {
            name: pool.submit(scenario, spark_runner, tmp_path_factory.mktemp("run"))
            for name, scenario in SIDE_BY_SIDE_SCENARIOS.items()
        }
        return {name: future.exception() for name, future in futures.items()}


def raise_failure(scenarios: dict[str, Any], name: str) -> None:
    if scenarios[name] is not None:
        raise scenarios[name]


def test_replayed_stream_writes_files_and_calls_back_as_the_direct_runner(
    scenarios: dict[str, Any],
) -> None:
    """`replayed_stream_writes_files_and_calls_back`, beside the other scenarios."""
    raise_failure(scenarios, "replayed stream")


def test_callback_sink_replays_a_failed_batch_with_the_same_id(scenarios: dict[str, Any]) -> None:
    """`callback_sink_replays_a_failed_batch`, beside the other scenarios."""
    raise_failure(scenarios, "callback replays")


def test_read_from_spark_reads_through_a_connector(scenarios: dict[str, Any]) -> None:
    """`read_from_spark_through_a_connector`, beside the other scenarios."""
    raise_failure(scenarios, "connector")


def test_a_failed_sink_stops_the_run_and_waiting_on_it_raises(scenarios: dict[str, Any]) -> None:
    """`a_failed_sink_stops_the_run`, beside the other scenarios."""
    raise_failure(scenarios, "failed sink")


def test_collect_refuses_a_live_source(spark_runner: Any, tmp_path: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.ReadFromSpark("rate", {"rowsPerSecond": 10})
    result = p.run()
    with pytest.raises(sb.PipelineError, match=r"cannot replay for collect.*WriteFiles"):
        result.collect(rows)


def test_a_live_and_a_replayed_source_cannot_share_a_query(
    spark_runner: Any, tmp_path: Any
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    live = p | sb.ReadFromSpark("rate", {"rowsPerSecond": 10})
    replayed = p | sb.TestStream().add_epoch([{"timestamp": T0, "value": 1}])
    live.union(replayed).write_files(str(tmp_path / "out"))
    with pytest.raises(sb.PipelineError, match="cannot line their epochs up"):
        p.run()


def test_a_refused_sink_leaves_the_other_sinks_unstarted(spark_runner: Any, tmp_path: Any) -> None:
    """Every sink is planned before any query starts: a refusal in one starts none."""
    p = sb.Pipeline(runner=spark_runner)
    calls: list[Any] = []
    replayed = p | sb.TestStream().add_epoch([{"timestamp": T0, "value": 1}])
    replayed.for_each_batch(lambda rows, batch: calls.append(rows))
    live = p | sb.ReadFromSpark("rate", {"rowsPerSecond": 10})
    live.union(replayed).write_files(str(tmp_path / "out"))
    with pytest.raises(sb.PipelineError, match="cannot line their epochs up"):
        p.run()
    assert calls == []
    assert not spark_runner.spark.streams.active


def test_read_from_spark_errors_name_the_source_and_what_to_do(spark_runner: Any) -> None:
    with pytest.raises(sb.PipelineError, match=r"ReadFromSpark\(delta\).*give schema="):
        sb.Pipeline() | sb.ReadFromSpark("delta", {"path": "/tmp/x"})

    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.ReadFromSpark("no-such-connector", schema={"a": int})
    rows.for_each_batch(lambda rows, batch: None)
    with pytest.raises(sb.PipelineError, match=r"no-such-connector.*classpath"):
        p.run()

    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.ReadFromSpark("rate", schema={"value": int, "price": float})
    rows.for_each_batch(lambda rows, batch: None)
    with pytest.raises(sb.PipelineError, match=r"no column\(s\) \['price'\].*fix schema="):
        p.run()

    p = sb.Pipeline()
    p | sb.ReadFromSpark("kafka", {"subscribe": "orders"})
    with pytest.raises(sb.PipelineError, match=r"Spark runner only.*TestStream or ReadFiles"):
        p.run()


def test_bounded_read_from_spark_and_for_each_batch_in_a_batch_job(
    spark_runner: Any, tmp_path: Any
) -> None:
    """Bounded input: ReadFromSpark(bounded=True) is `spark.read`; ForEachBatch gets one call."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    for index in range(2):
        write_epoch(source, index)
    calls: list[tuple[int, list[dict[str, Any]]]] = []
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.ReadFromSpark("parquet", {"path": source}, schema=SCHEMA, bounded=True)
    assert rows.bounded
    rows.for_each_batch(lambda batch_rows, batch: calls.append((batch, batch_rows)))
    result = p.run()
    want = [row for index in range(2) for row in epoch_rows(index)]
    assert row_multiset(result.collect(rows)) == row_multiset(want)
    assert [batch for batch, _ in calls] == [0]
    assert row_multiset(calls[0][1]) == row_multiset(want)
