"""Every path through Spark: files, sinks, checkpoints and staging on a URI `os.path` cannot
resolve (Hadoop's `viewfs://` mount table of the test session, `tests.conftest.LAKE`).

The direct runner reads the same files through the local directory behind the mount,
so both runners are compared on one set of files.
"""

from __future__ import annotations

import concurrent.futures
import os
import uuid
from datetime import datetime
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.session.paths import require_staging
from tests.agreement.pipelines import row_multiset
from tests.conftest import LAKE
from tests.runners.spark.test_streaming_production import (
    direct_before_flush,
    per_window,
    read_sink,
    write_epoch,
)

pytestmark = pytest.mark.spark

ROWS = [
    {"k": "a", "v": 1, "t": datetime(2026, 4, 1, 10, 0, 1)},
    {"k": "b", "v": 2, "t": datetime(2026, 4, 1, 10, 0, 30)},
    {"k": "a", "v": 3, "t": datetime(2026, 4, 1, 10, 1, 5)},
]
SCHEMA = {"k": str, "v": int, "t": datetime}


@pytest.fixture
def lake(lake_directory: Any) -> tuple[str, str]:
    """A fresh directory in the lake: its `viewfs://` URI and the local path behind it."""
    return fresh_lake(lake_directory)


def fresh_lake(lake_directory: Any) -> tuple[str, str]:
    """A fresh directory in the lake: its `viewfs://` URI and the local path behind it."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    local = os.path.join(str(lake_directory), name)
    os.makedirs(local)
    uri = f"{LAKE}/{name}"
    assert not os.path.exists(uri)  # nothing in the runner may take this for a local path
    return uri, local


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_batch_files_on_a_uri_only_spark_resolves(
    spark: Any, lake: tuple[str, str], format: str
) -> None:
    """WriteFiles and ReadFiles (a parquet schema read from the footer, a CSV header) through
    Hadoop; `mode="error"` sees the directory, `"overwrite"` replaces it."""
    uri, local = lake
    target = f"{uri}/out"
    with sb.Pipeline(runner=sb.SparkRunner(spark=spark)) as w:
        (w | sb.Create(ROWS, schema=SCHEMA)).write_files(target, format=format)
    assert any(name.startswith("part-") for name in os.listdir(os.path.join(local, "out")))

    r = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    read = r | sb.ReadFiles(target, format=format, schema=None if format == "parquet" else SCHEMA)
    assert row_multiset(r.run().collect(read)) == row_multiset(ROWS)

    d = sb.Pipeline()  # the same files, read by the direct runner from the local directory
    local_read = d | sb.ReadFiles(os.path.join(local, "out"), format=format, schema=SCHEMA)
    assert row_multiset(d.run().collect(local_read)) == row_multiset(ROWS)

    refused = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    with pytest.raises(sb.PipelineError, match=r"exists and mode='error'"):
        refused | sb.Create(ROWS, schema=SCHEMA) | "again" >> sb.WriteFiles(target, mode="error")

    with sb.Pipeline(runner=sb.SparkRunner(spark=spark)) as w:
        (w | sb.Create(ROWS[:1], schema=SCHEMA)).write_files(target, format=format)
    r = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    read = r | sb.ReadFiles(target, format=format, schema=SCHEMA)
    assert row_multiset(r.run().collect(read)) == row_multiset(ROWS[:1])


def test_missing_and_unknown_uris_are_refused_when_applied(
    spark: Any, lake: tuple[str, str]
) -> None:
    uri, _ = lake
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    with pytest.raises(sb.PipelineError, match=r"ReadFiles\(nope\): no file or directory at"):
        p | sb.ReadFiles(f"{uri}/nope", schema=SCHEMA)
    rows = p | sb.Create(ROWS, schema=SCHEMA)
    with pytest.raises(sb.PipelineError) as caught:
        rows | sb.WriteFiles("nosuchfs://bucket/out")
    message = str(caught.value)
    assert "WriteFiles(out)" in message and "nosuchfs://bucket/out" in message
    assert "spark.jars.packages" in message


def streaming_collect_and_staging(spark: Any, lake: tuple[str, str]) -> None:
    """`ReadFiles(streaming=True)` replayed from viewfs, and a TestStream whose epoch files
    go to a viewfs staging location: the direct runner's rows, epoch by epoch."""
    uri, local = lake
    source = os.path.join(local, "in")
    os.makedirs(source)
    for index in range(2):
        write_epoch(source, index)
    expected = sb.Pipeline()
    direct = per_window(expected, source)
    direct_epochs = expected.run().collect_by_epoch(direct)

    runner = sb.SparkRunner(spark=spark, staging_location=f"{uri}/staging")
    p = sb.Pipeline(runner=runner)
    out = per_window(p, f"{uri}/in")
    epochs = p.run().collect_by_epoch(out)
    assert [row_multiset(e) for e in epochs] == [row_multiset(e) for e in direct_epochs]

    stream = sb.TestStream(SCHEMA).add_epoch(ROWS[:2]).add_epoch(ROWS[2:])
    p = sb.Pipeline(runner=runner)
    counted = (
        (p | stream)
        .with_watermark("t", "5 seconds")
        .tumble("t", "1 minute")
        .combine_per_key(["window_start"], n=sb.Count())
    )
    assert sorted(p.run().collect(counted), key=str) == [
        {"window_start": datetime(2026, 4, 1, 10, 0), "n": 2},
        {"window_start": datetime(2026, 4, 1, 10, 1), "n": 1},
    ]
    assert os.listdir(os.path.join(local, "staging")) == []  # each run cleans its own


def live_files_checkpoint_and_restart(spark: Any, lake: tuple[str, str]) -> None:
    """Spark's file source over a viewfs directory, a file sink and its checkpoint there:
    stopped after two epochs, started again from the checkpoint; every row once, as the
    direct runner emits them; `mode="overwrite"` clears only on a fresh start."""
    uri, local = lake
    source = os.path.join(local, "in")
    os.makedirs(source)

    def start() -> Any:
        runner = sb.SparkRunner(spark=spark, checkpoint_location=f"{uri}/checkpoints")
        p = sb.Pipeline(runner=runner)
        per_window(p, f"{uri}/in").write_files(f"{uri}/out")
        return p.run()

    os.makedirs(os.path.join(local, "out"))
    open(os.path.join(local, "out", "stale.parquet"), "w").close()  # overwritten at first start
    write_epoch(source, 0)
    write_epoch(source, 1)
    first = start()
    first.process_all_available()
    first.stop()
    assert "stale.parquet" not in os.listdir(os.path.join(local, "out"))
    assert os.path.isdir(os.path.join(local, "checkpoints"))
    after_two = read_sink(os.path.join(local, "out"))
    assert after_two

    write_epoch(source, 2)
    write_epoch(source, 3)
    second = start()  # resumes: the sink keeps what the first run wrote
    second.process_all_available()
    second.stop()
    written = row_multiset(read_sink(os.path.join(local, "out")))
    assert written == row_multiset(direct_before_flush(source))


SIDE_BY_SIDE_SCENARIOS = {
    "streaming collect and staging": streaming_collect_and_staging,
    "live files checkpoint and restart": live_files_checkpoint_and_restart,
}
"""The module's streaming runs on a URI, by name: each takes the session and a fresh lake
directory of its own, and asserts."""


@pytest.fixture(scope="module")
def scenarios(spark: Any, lake_directory: Any) -> dict[str, Any]:
    """Each of `SIDE_BY_SIDE_SCENARIOS` run at once, in threads: None, or the error it raised
    (its own test raises it)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(SIDE_BY_SIDE_SCENARIOS)) as pool:
        futures = {
            name: pool.submit(scenario, spark, fresh_lake(lake_directory))
            for name, scenario in SIDE_BY_SIDE_SCENARIOS.items()
        }
        return {name: future.exception() for name, future in futures.items()}


def raise_failure(scenarios: dict[str, Any], name: str) -> None:
    if scenarios[name] is not None:
        raise scenarios[name]


def test_streaming_collect_and_staging_on_a_uri(scenarios: dict[str, Any]) -> None:
    """`streaming_collect_and_staging`, beside `live_files_checkpoint_and_restart`."""
    raise_failure(scenarios, "streaming collect and staging")


def test_live_files_checkpoint_and_restart_on_a_uri(scenarios: dict[str, Any]) -> None:
    """`live_files_checkpoint_and_restart`, beside `streaming_collect_and_staging`."""
    raise_failure(scenarios, "live files checkpoint and restart")


class _Conf:
    def __init__(self, master: str) -> None:
        self.master = master

    def get(self, key: str, default: Any = None) -> Any:
        return self.master if key == "spark.master" else default


class _Session:
    def __init__(self, master: str) -> None:
        self.conf = _Conf(master)


def test_replayed_sources_need_a_staging_location_off_a_local_master() -> None:
    cluster: Any = _Session("spark://host:7077")
    with pytest.raises(sb.PipelineError) as caught:
        require_staging(cluster, None, "counts", "TestStream")
    message = str(caught.value)
    assert "counts" in message and "spark://host:7077" in message
    assert "staging_location" in message
    require_staging(cluster, "hdfs://nn/staging", "counts", "TestStream")
    require_staging(_Session("local[2]"), None, "counts", "TestStream")


class _Builder:
    def __init__(self, host: str) -> None:
        self.host = host


class _Client:
    def __init__(self, host: str) -> None:
        self._builder = _Builder(host)


class _ConnectSession(_Session):
    """What the runner reads of a Spark Connect session: its master and its server's host."""

    __module__ = "pyspark.sql.connect.session"

    def __init__(self, master: str, host: str) -> None:
        super().__init__(master)
        self.client = _Client(host)


def test_replayed_sources_on_a_remote_connect_server_need_a_staging_location() -> None:
    # The server's own master is local, but its disk is not this client's.
    remote: Any = _ConnectSession("local[4]", "spark.example.com")
    with pytest.raises(sb.PipelineError) as caught:
        require_staging(remote, None, "counts", "TestStream")
    message = str(caught.value)
    assert "counts" in message and "'spark.example.com'" in message
    assert "staging_location" in message
    require_staging(remote, "s3://bucket/staging", "counts", "TestStream")
    require_staging(_ConnectSession("local[4]", "127.0.0.1"), None, "counts", "TestStream")
