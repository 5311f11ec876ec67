"""test_defaults.py's sessions the runner starts, run in a process of their own.

A pytest plugin (`tests/conftest.py` loads it): it starts the process as the suite's
collection ends, when test_defaults.py's `own_sessions` is among the tests, so that its
Spark JVM runs beside the suite's, which leaves a core idle about a fifth of the time; the
fixture waits for it (`process`), and the process never outlives the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import sparkbeam as sb
from tests.runners.spark.cluster_job import SPARK_JVM

PROCESS = pytest.StashKey[subprocess.Popen[str]]()
"""The process, once started, in the config's stash."""

SCRIPT = """
import datetime as dt
import json
import traceback
import sparkbeam as sb

found = {}
# First, as a new user would (issue 16 item 4): a session the runner starts with no conf, a
# Sort (a transformWithState, whose planning worker prints) and then a Sum that overflows.
T = dt.datetime(2026, 1, 1)
stream = sb.TestStream(schema={"k": str, "t": dt.datetime, "v": int})
stream.add_epoch([{"k": "a", "t": T, "v": 2**62}, {"k": "a", "t": T, "v": 2**62}])
runner = sb.SparkRunner(master="local[2]", progress=True)  # its lines on stderr
p = sb.Pipeline(runner=runner)
ordered = (p | stream).with_watermark("t", "1 second").sort("t")
sums = ordered.tumble("t", "1 minute").combine_per_key(["k", "window_start"], n=sb.Sum("v"))
try:
    p.run().collect(sums)
except sb.DataError:
    traceback.print_exc()  # as the interpreter prints an uncaught one
# A Session without keys, in a batch job and in a streaming one: the runner says once for each
# that it runs in one task; Spark's own warning, for every window function of the batch job,
# is dropped
rows = [{"k": "a", "t": T, "v": 1}, {"k": "b", "t": T + dt.timedelta(seconds=5), "v": 1}]
p = sb.Pipeline(runner=runner)
visits = p | sb.Create(rows) | "Visits" >> sb.Session("t", "10 seconds")
found["without keys"] = [len(p.run().collect(visits))]
live = sb.TestStream(schema={"k": str, "t": dt.datetime, "v": int})
live.add_epoch(rows)
p = sb.Pipeline(runner=runner)
streamed = (p | live).with_watermark("t", "1 second") | "LiveVisits" >> sb.Session("t", "1 minute")
found["without keys"].append(len(p.run().collect(streamed)))
spark = runner.spark
found["first"] = [spark.conf.get("spark.sql.shuffle.partitions"), runner.started_session]
# Spark's state store on a restart from a checkpoint, once per store, under its own name
store = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger(
    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider "
    "StateStoreProviderId[ storeId=StateStoreId[ operatorId=0, partitionId=0 ] ]"
)
store.warn(
    "The state for version 3 doesn't exist in loadedMaps. Reading snapshot file and delta "
    "files if needed...Note that this is normal for the first batch of starting query."
)
store.warn("Error doing snapshots (another warning of the state store)")
spark.stop()

quiet = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
runner = sb.SparkRunner(master="local[2]", conf=quiet)
spark = runner.spark
found["local[2]"] = [spark.conf.get("spark.sql.shuffle.partitions"), runner.started_session]
again = sb.SparkRunner()  # no options: the session now active, as it is
found["again"] = [again.spark is spark, again.started_session]
spark.stop()
runner = sb.SparkRunner(master="local[2]", conf={**quiet, "spark.sql.shuffle.partitions": "7"})
found["conf 7"] = [runner.spark.conf.get("spark.sql.shuffle.partitions"), runner.started_session]
runner.spark.stop()
print(json.dumps(found))
"""
"""Sessions the runner starts, one after another in a fresh process (`start`): the
first one a streaming pipeline fails on, then the ones whose settings are read."""


def start() -> subprocess.Popen[str]:
    """`SCRIPT` started in a process of its own, where no session is active (the suite's
    would be reused): one Spark JVM for the tests of both what is set and what is printed."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(sb.__file__)))
    path = [root, *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "PYSPARK_PYTHON": sys.executable,
        # the JVM's options only: the script's sessions are the runner's, with its settings
        "PYSPARK_SUBMIT_ARGS": f"--driver-java-options '{SPARK_JVM}' pyspark-shell",
    }
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def process(config: pytest.Config) -> subprocess.Popen[str]:
    """The process of this suite (`config`), started now if it was not yet."""
    if PROCESS not in config.stash:
        config.stash[PROCESS] = start()
    return config.stash[PROCESS]


def pytest_collection_finish(session: pytest.Session) -> None:
    if any("own_sessions" in getattr(item, "fixturenames", ()) for item in session.items):
        process(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Never leave the process running (a run stopped early: `-x`, Ctrl-C, SIGTERM)."""
    running = config.stash.get(PROCESS, None)
    if running is not None and running.poll() is None:
        running.kill()
        running.communicate()
