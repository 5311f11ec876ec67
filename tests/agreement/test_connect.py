"""The agreement pipelines on Spark Connect (issue 13): `SparkRunner(spark=<a Connect session>)`.

A Spark Connect server started from pyspark's own `sbin/start-connect-server.sh`
on 127.0.0.1 (`tests/connect_server.py`, through the module-scoped
`connect_spark` fixture: `local[2,3]`, two shuffle partitions, no UI) runs a
few of the shared pipelines, batch and streaming, which must give the direct
runner's rows, and a file sink with a checkpoint, stopped and started again.
Few, to keep the suite's budget: the classic session runs all of them.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import pyarrow.parquet as pq
import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.execute import live_progress
from sparkbeam.runners.spark.plan.late_filters import Strategy
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import essentials
from tests.agreement.test_bounded import assert_runners_agree
from tests.agreement.test_streaming import assert_agree_epoch_by_epoch
from tests.runners.spark.test_streaming_production import (
    T0,
    direct_before_flush,
    per_window,
    read_sink,
    write_epoch,
)
from tests.tracebacks import assert_short_as_direct

pytestmark = pytest.mark.spark


def test_the_session_is_spark_connect(connect_spark: Any) -> None:
    assert type(connect_spark).__module__.startswith("pyspark.sql.connect")


def test_the_executors_import_sparkbeam_from_the_clients_artifact(connect_runner: Any) -> None:
    """The server's workers run a Python with pyspark, pandas and pyarrow only; a sparkbeam
    installed beside it (for the `transformWithState` planning process) comes after the
    artifact the runner added, so the executors run the client's sparkbeam."""

    def where_sparkbeam_is(row: dict[str, Any]) -> dict[str, Any]:  # by value: a local
        return {"where": sb.__file__}

    with sb.Pipeline(runner=connect_runner) as p:
        where = (p | sb.Create([{"k": 1}])).map(where_sparkbeam_is, schema={"where": str})
    [row] = p.result.collect(where)
    assert ".zip" in row["where"] and "sparkbeam-" in row["where"], row


def test_an_error_on_connect_prints_as_short_as_on_the_direct_runner(connect_runner: Any) -> None:
    """A function raising in the server's workers: sparkbeam's `DataError`, Spark Connect's
    exception kept as its `spark_error`, not chained (no server-side JVM stack printed)."""

    def halves(row: dict[str, Any]) -> dict[str, Any]:  # by value: a local
        return {"k": 10 // (row["k"] - 2)}

    errors = []
    for runner in (sb.DirectRunner(), connect_runner):
        p = sb.Pipeline(runner=runner)
        out = (p | sb.Create([{"k": 1}, {"k": 2}])) | "Halves" >> sb.Map(halves)
        with pytest.raises(sb.DataError, match="Halves: the function raised") as caught:
            p.run().collect(out)
        errors.append(caught.value)
    direct, connect = errors
    assert_short_as_direct(connect, direct)
    assert connect.spark_error is not None


@pytest.mark.parametrize("name", ["windows", "sessions", "joins"])
def test_bounded_pipelines_agree(name: str, connect_runner: Any) -> None:
    assert_runners_agree(name, connect_runner)


def test_streaming_essentials_agree_epoch_by_epoch(connect_runner: Any) -> None:
    """Watermark (late and invalid rows), tumble + sum, Sort, Session, a window Join and
    late_rows(), and metrics(): the two failures issue 13 reported (a window sum without its
    watermark, observed metrics as JSON) are in here."""
    assert_agree_epoch_by_epoch(essentials, connect_runner, metrics=True)


def test_sinks_go_on_from_their_checkpoints(connect_spark: Any, tmp_path: Any) -> None:
    """A live parquet directory (read by the runner's footers source, a Python data source
    that Spark Connect's server runs) into a file sink and a `ForEachBatch`, with checkpoints,
    stopped after two epochs and started again on them: the file sink holds every row once,
    as the direct runner emits them; the callback (run by Spark Connect in the server's
    Python, here on this machine) saw the same rows."""
    source, out, calls, checkpoints = (
        str(tmp_path / name) for name in ("in", "out", "calls", "ckpt")
    )
    os.makedirs(source)
    os.makedirs(calls)
    watermarked: list[Any] = []

    def record(rows: list[dict[str, Any]], batch_id: int) -> None:
        with open(os.path.join(calls, f"batch-{batch_id:04d}.pickle"), "wb") as handle:
            pickle.dump(rows, handle)  # keyed on the batch id: a replayed batch overwrites

    def start() -> Any:
        runner = sb.SparkRunner(spark=connect_spark, checkpoint_location=checkpoints)
        p = sb.Pipeline(runner=runner)
        windows = per_window(p, source, watermarked=watermarked)
        windows.write_files(out)
        windows.for_each_batch(record)
        return p.run()

    write_epoch(source, 0)
    write_epoch(source, 1)
    first = start()
    chosen = {
        late.strategy
        for run in first.sinks.values()
        for late in run.final.translation.late_filters.filters.values()
    }
    assert chosen == {Strategy.FOOTERS}  # the runner's Python source runs on the server too
    first.process_all_available()
    first.stop()  # once hung: pyspark's Connect client removing a listener (`live_progress`)
    assert id(connect_spark) not in live_progress._LISTENERS
    assert first.late_count(watermarked[-1]) == 1  # epoch 1's row from the start
    assert read_sink(out)

    write_epoch(source, 2)
    write_epoch(source, 3)
    second = start()  # from the checkpoints: epochs 2 and 3 only
    second.process_all_available()
    second.stop()
    expected = row_multiset(direct_before_flush(source))
    assert row_multiset(read_sink(out)) == expected
    called = []
    for name in sorted(os.listdir(calls)):
        with open(os.path.join(calls, name), "rb") as handle:
            called += pickle.load(handle)
    assert row_multiset(called) == expected
    # the file sink's parquet options reach Spark Connect's server: the direct runner's types
    parts = list((tmp_path / "out").glob("part-*"))
    assert parts
    for part in parts:
        schema = pq.read_schema(part)
        assert str(schema.field("window_start").type) == "timestamp[us, tz=UTC]", schema
        assert all(field.nullable for field in schema), schema


def test_a_batch_write_has_the_direct_runner_s_parquet_types(
    connect_runner: Any, tmp_path: Any
) -> None:
    rows = [{"t": T0, "n": 1}]
    for runner, name in [(sb.DirectRunner(), "direct"), (connect_runner, "connect")]:
        p = sb.Pipeline(runner=runner)
        (p | sb.Create(rows)).combine_per_key("t", n=sb.Count()).write_files(tmp_path / name)
        p.run()
    direct, connect = (
        pq.read_schema(next((tmp_path / n).glob("part-*"))) for n in ("direct", "connect")
    )
    assert direct.equals(connect), (direct, connect)
