"""Shared test set-up: the hypothesis profile for CI and one SparkSession for the session."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import sparkbeam as sb
from tests import local_filesystem
from tests.class_archive import java_options

pytest_plugins = [
    "tests.interrupt",
    "tests.runners.spark.own_sessions",
    "tests.runners.spark.background_cluster",
    "tests.runners.spark.drivers",
    "tests.background_connect",
]

# The Spark runner's progress lines (`runners/spark/execute/progress.py`) stay quiet in the
# suite, also under `pytest -s` on a terminal; a test that reads them sets the level
# (caplog.set_level).
logging.getLogger("sparkbeam").setLevel(logging.WARNING)

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def more_examples() -> int | None:
    """`SPARKBEAM_MORE_EXAMPLES=<n>`: the examples a deeper run of the random agreement tests
    draws (`make test-more`), or None."""
    value = os.environ.get("SPARKBEAM_MORE_EXAMPLES", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(
            f"SPARKBEAM_MORE_EXAMPLES={value!r}: give a number of examples, such as 40"
        )
    return int(value)


if (count := more_examples()) is not None:
    # The loaded profile with `count` examples drawn afresh each run (not derandomized): the
    # random agreement tests read its max_examples.
    settings.register_profile(
        "more", settings.default, max_examples=count, derandomize=False, print_blob=True
    )
    settings.load_profile("more")

SUITE_JVM = "-XX:+UseParallelGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
"""The suite's JVM's collector and compilers (why: `SPARK_CONF`)."""

SPARK_CONF = {
    # Two cores; a failed task is tried up to three times, as on a cluster (local mode's
    # default is once): a Python worker that does not connect back within Spark's fixed
    # 10 seconds on a loaded machine then fails the task, not the query.
    "spark.master": "local[2,3]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    # The suite's one JVM works for ten minutes on a 2g heap, two cores busy: the parallel
    # collector's pauses cost it less than G1's concurrent threads (about 3 to 12 percent
    # less wall time over the streaming tests, measured side by side). Its work is many small
    # queries, each planned, compiled and run once: the optimizing (C2) compiler's threads
    # spent more CPU than its code gives back; with the quick (C1) compiler alone the JVM
    # used a third less CPU over three streaming agreement tests (72 and 75 s against 103
    # and 119 s, alternating runs). Over the whole suite no difference showed beyond the
    # noise of single runs (948 s with C1, 919 s with C2 on a run that shared the machine).
    # With the quick compiler alone the JVM sizes its compiled-code cache at 48 MB, which the
    # suite's generated code filled (49 of 48 MB at its largest, 20 minutes in): the cache's
    # sweeper had then spent 84 CPU-seconds throwing compiled code out, to compile it again.
    # 256 MB is reserved address space, used only as filled.
    # Spark's classes mapped from the archive `make install` wrote (`class_archive`), where it
    # did: a JVM's start loads them from the jars otherwise.
    "spark.driver.extraJavaOptions": f"{SUITE_JVM} {java_options()}".strip(),
    # A streaming query with nothing new to read looks again after this delay (Spark's
    # default is 10 ms). The runner feeds epochs to several queries in turn, so most of
    # them wait at any moment: polling every 10 ms costs each about 6 percent of a core,
    # which the busy query lacks; 100 ms costs a third of that and adds 50 ms, on average,
    # before a query sees an epoch written. Only when rows are read changes, not which.
    "spark.sql.streaming.pollingDelay": "100ms",
    # Compiled code is kept by its source: the suite runs hundreds of small queries of a few
    # dozen shapes, several at once, and Spark's default of 100 kept classes threw out code a
    # later query compiled again (the JVM spent a quarter of a streaming thread's samples in
    # the Janino compiler; with room for all of them, 12 percent less CPU over the streaming
    # agreement tests). A static setting: it holds from the JVM's start.
    "spark.sql.codegen.cache.maxEntries": "5000",
}

SUITE_ONLY_CONF = {
    # Each file a checkpoint writes is renamed into place. The default (FileContext) manager
    # asks the local file system for the link status of the file first, which without
    # Hadoop's native library forks `readlink`: 9,700 processes over the streaming agreement
    # tests, 16 CPU-seconds. The FileSystem manager writes and renames the same way, without
    # it. The drivers the restart tests kill keep Spark's defaults (`drivers.py`).
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing"
        ".FileSystemBasedCheckpointFileManager"
    ),
    # Hadoop's local file system setting permissions in the JVM rather than by a `chmod`
    # process per file it writes (`tests/local_filesystem.py`): over the streaming agreement
    # and update tests, 12 percent less CPU and 11 percent less wall time.
    **local_filesystem.spark_conf(),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a SparkSession (the suite's or a Connect one) carries the `spark`
    marker, also where its module does not say so: `-m "not spark"` runs no Spark."""
    for item in items:
        if {"spark", "connect_spark"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


LAKE = "viewfs://lake/data"
"""A URI no `os.path` resolves: Hadoop's `viewfs://` mount table `lake`, whose `/data` is a
local directory (`lake_directory`), set on the test session; it needs no server."""


@pytest.fixture(scope="session")
def lake_directory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The local directory behind `LAKE` (`viewfs://lake/data`)."""
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="session")
def spark(lake_directory: Any) -> Iterator[Any]:
    """One SparkSession for the whole test run (`local[2]`, few partitions, no UI), with the
    `viewfs://lake/data` mount table (`LAKE`)."""
    from pyspark.sql import SparkSession

    # SPARKBEAM_WORKERS_PYTHON=.venv-workers/bin/python runs the suite's Spark workers on a
    # Python with pyspark, pandas and pyarrow only (with PYTHONPATH naming the repository for
    # the tests' own modules; sparkbeam comes from the zip the runner ships, which is first)
    os.environ["PYSPARK_PYTHON"] = os.environ.get("SPARKBEAM_WORKERS_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("sparkbeam-tests")
    for key, value in {**SPARK_CONF, **SUITE_ONLY_CONF}.items():
        builder = builder.config(key, value)
    builder = builder.config(
        "spark.hadoop.fs.viewfs.mounttable.lake.link./data", lake_directory.as_uri()
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_runner(spark: Any) -> Any:
    return sb.SparkRunner(spark=spark)


@pytest.fixture(scope="module")
def connect_runner(connect_spark: Any) -> Any:
    return sb.SparkRunner(spark=connect_spark)


@pytest.fixture(params=["direct", pytest.param("spark", marks=pytest.mark.spark)])
def runner(request: pytest.FixtureRequest) -> Any:
    """Each runner in turn, for tests over bounded input that both must pass alike."""
    if request.param == "spark":
        return request.getfixturevalue("spark_runner")
    return sb.DirectRunner()
