"""`runner="spark"` out of the box (issue 22): the session the runner starts fits a local
master and prints no per-query chatter, only the error (issue 16 item 4,
`runners/spark/session/quiet.py`), a session it did not start keeps its settings, and the
pipelines a new user writes with no options agree with the direct runner.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.plan.settings import STATE_STORE
from sparkbeam.runners.spark.session.sessions import SHUFFLE_PARTITIONS, local_cores, own_conf
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import STREAM_BUILDERS
from tests.agreement.test_streaming import run as run_stream
from tests.runners.spark.own_sessions import process
from tests.tracebacks import ENGINE_MARKS

pytestmark = pytest.mark.spark

NOISE = (
    "TransformWithStateInPandas Python worker",
    "Disabling AQE",
    "is not supported in streaming DataFrames",
    "Failed to cancel job group",
    "SQLQueryContextLogger",
    '"level": "ERROR"',
    "ERROR Executor",
    "Lost task",
    "terminated with error",
)
"""What Spark printed, before `runners/spark/session/quiet.py`, on a session the runner started."""


@pytest.fixture(scope="module")
def own_sessions(request: pytest.FixtureRequest) -> subprocess.CompletedProcess[str]:
    """What `own_sessions.SCRIPT` printed, and how it ended."""
    running = process(request.config)
    stdout, stderr = running.communicate(timeout=600)
    return subprocess.CompletedProcess(running.args, running.returncode, stdout, stderr)


def test_local_masters_and_their_cores() -> None:
    cores = local_cores("local[*]")
    assert cores is not None and cores >= 1
    assert local_cores("local") == 1
    assert local_cores("local[3]") == 3
    assert local_cores("local[2,4]") == local_cores("local[2, 4]") == 2
    assert local_cores("local[*,3]") == cores
    for master in ("spark://host:7077", "yarn", "k8s://https://host", "local-cluster[2,1,1024]"):
        assert local_cores(master) is None
    assert local_cores(None) is None


def test_the_settings_of_a_session_the_runner_starts() -> None:
    assert own_conf("local[3]", {"a": "1"}, {}) == {"a": "1", SHUFFLE_PARTITIONS: "3"}
    assert own_conf("local[3]", {}, {SHUFFLE_PARTITIONS: "7"}) == {SHUFFLE_PARTITIONS: "7"}
    assert own_conf("spark://host:7077", {"a": "1"}, {}) == {"a": "1"}  # Spark's setting


def test_a_session_the_runner_starts_on_local_2_has_2_shuffle_partitions(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    assert own_sessions.returncode == 0, own_sessions.stderr[-3000:]
    found = json.loads(own_sessions.stdout.strip().splitlines()[-1])
    assert {name: found[name] for name in ("first", "local[2]", "again", "conf 7")} == {
        "first": ["2", True],
        "local[2]": ["2", True],
        "again": [True, False],
        "conf 7": ["7", True],
    }


def test_a_session_without_keys_is_named_once_and_sparks_lines_about_it_dropped(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    """A `Session` without keys runs in one task. Spark warns so for every window function of
    a batch job (`quiet.ONE_PARTITION_NOTICE`: 8 lines for one collect); a session the runner
    starts drops them, and the runner warns once per such transform, batch or streaming."""
    assert own_sessions.returncode == 0, own_sessions.stderr[-3000:]
    found = json.loads(own_sessions.stdout.strip().splitlines()[-1])
    assert found["without keys"] == [2, 2]
    assert "No Partition Defined for Window operation" not in own_sessions.stderr
    told = [line for line in own_sessions.stderr.splitlines() if "without keys makes" in line]
    assert [line.split("UserWarning: ")[1].split(":")[0] for line in told] == [
        "Visits",
        "LiveVisits",
    ], told


def test_a_session_the_runner_starts_prints_no_chatter_and_still_the_error(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    """The first session of `OWN_SESSIONS`: a streaming pipeline with a `transformWithState`
    whose sum overflows. Without `quiet`, every line of `NOISE` was printed before the
    `DataError`; nor may the sessions started after it print any."""
    printed = own_sessions.stdout + own_sessions.stderr
    assert own_sessions.returncode == 0, printed[-3000:]
    error = "sparkbeam.errors.DataError: CombinePerKey(k, window_start) n: a sum left the 64-bit"
    assert error in printed
    shown = [line for line in NOISE if line in printed]
    assert shown == [], printed[-3000:]


def test_a_restart_from_a_checkpoint_prints_no_warning(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    """Spark's state store warns, on every restart from a checkpoint, that it reads each store's
    state back from it (`quiet.RESTART_NOTICE`): a session the runner starts drops that
    message, and that one alone (the script logs it and another as the store does)."""
    assert "another warning of the state store" in own_sessions.stderr
    assert "doesn't exist in loadedMaps" not in own_sessions.stderr


def test_an_uncaught_error_of_spark_fits_on_one_screen(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    """The traceback the interpreter prints for the `DataError` of `own_sessions.SCRIPT` (a
    sum overflowing in a streaming query): 136 to 208 lines with Spark's exception, a worker's
    traceback and JVM frames chained before it; now sparkbeam's error alone."""
    printed = own_sessions.stderr
    start = printed.index("Traceback (most recent call last)")
    end = printed.index("sparkbeam.errors.DataError: ", start)
    traceback = printed[start:end].splitlines()
    assert len(traceback) <= 30, printed[start : end + 400]
    for mark in ENGINE_MARKS:
        assert mark not in printed[start:end], printed[start : end + 400]


def test_a_session_the_runner_starts_says_what_it_is_doing(
    own_sessions: subprocess.CompletedProcess[str],
) -> None:
    """`SparkRunner(progress=True)`: its progress lines on stderr, from starting Spark to each
    epoch of the replayed stream (`runners/spark/execute/progress.py`)."""
    said = [
        line.split(" sparkbeam: ", 1)[1]
        for line in own_sessions.stderr.splitlines()
        if " sparkbeam: " in line
    ]
    assert said[:3] == [
        "starting Spark on local[2] (a JVM starts: some seconds)",
        said[1],
        "translating 5 transforms into Structured Streaming queries",
    ], said
    assert said[1].startswith("Spark started ("), said
    assert "replaying 1 epoch through 1 query" in " ".join(said), said


def test_conf_for_a_session_already_active_is_not_applied_but_told(spark: Any) -> None:
    before = spark.conf.getAll
    with pytest.warns(UserWarning, match=r"spark.sql.shuffle.partitions='2' \(not '5'\)"):
        runner = sb.SparkRunner(conf={SHUFFLE_PARTITIONS: "5"})
        assert runner.spark is spark and not runner.started_session
    assert spark.conf.getAll == before


def small_stream(runner: Any) -> tuple[sb.Pipeline, sb.PCollection, sb.PCollection]:
    """A windowed count (no `transformWithState`) and a `Sort` (one)."""
    p = sb.Pipeline(runner=runner)
    stream = sb.TestStream().add_epoch([{"k": "a", "t": 4}, {"k": "b", "t": 1}])
    w = (p | stream.add_epoch([{"k": "a", "t": 9}])).with_watermark("t", 2)
    counts = w.tumble("t", 5).combine_per_key(["window_start"], n=sb.Count())
    return p, counts, w.sort("t")


def test_a_crowded_session_passed_in_is_warned_about_once(spark: Any) -> None:
    crowded = spark.newSession()  # settings of its own; this process's context (local[2,3])
    crowded.conf.set(SHUFFLE_PARTITIONS, "200")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            small_stream(sb.SparkRunner(spark=crowded))[0].run()  # no query runs before collect
        with sb.Pipeline(runner=sb.SparkRunner(spark=crowded)) as p:
            p | sb.Create([{"k": "a"}])  # a batch job: no state stores, no warning
    found = [str(w.message) for w in caught if SHUFFLE_PARTITIONS in str(w.message)]
    assert len(found) == 1, found
    assert f"{SHUFFLE_PARTITIONS}=200 on local[2,3] (2 cores)" in found[0]
    assert f"spark.conf.set({SHUFFLE_PARTITIONS!r}, '2')" in found[0]
    assert crowded.conf.get(SHUFFLE_PARTITIONS) == "200"


def test_a_session_passed_in_keeps_its_own_settings(spark: Any) -> None:
    fitting = spark.newSession()
    fitting.conf.set(SHUFFLE_PARTITIONS, "3")
    before = fitting.conf.getAll
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p, counts, ordered = small_stream(sb.SparkRunner(spark=fitting))
        result = p.run()
        result.prepare(counts, ordered)
    assert not [w for w in caught if SHUFFLE_PARTITIONS in str(w.message)]
    assert row_multiset(result.collect(counts)) == row_multiset(
        [{"window_start": 0, "n": 2}, {"window_start": 5, "n": 1}]
    )
    assert [row["t"] for row in result.collect(ordered)] == [1, 4, 9]
    # the Sort's query started with the RocksDB state store, set only while it started
    assert fitting.conf.getAll == before
    assert fitting.conf.get(SHUFFLE_PARTITIONS) == "3"
    assert fitting.conf.get(STATE_STORE[0], None) is None


def test_a_new_users_pipeline_with_no_options_agrees_with_the_direct_runner(spark: Any) -> None:
    """`sb.Pipeline(runner="spark")`, nothing else: with the suite's session active,
    `getOrCreate` would return it, and the runner uses it as it is. One pipeline of the
    agreement suite (`tests/agreement/test_streaming.py` runs them all on this session): two
    watermarks meeting at a union, windows and late rows."""
    name = "merged_origins"
    before = spark.conf.getAll
    direct, direct_counts = run_stream(STREAM_BUILDERS[name], sb.DirectRunner())
    p = sb.Pipeline(runner="spark")
    runner = p.runner
    assert isinstance(runner, sb.SparkRunner)
    assert (runner.master, runner.conf, runner.checkpoint_location) == ("local[*]", {}, None)
    outputs, watermarked = STREAM_BUILDERS[name](p)
    result = p.run()
    assert runner.spark is spark and not runner.started_session
    got = {label: result.collect_by_epoch(pc) for label, pc in outputs.items()}
    counts = [(result.late_count(w), result.invalid_count(w)) for w in watermarked]
    assert counts == direct_counts
    for label, epochs in direct.items():
        assert [row_multiset(e) for e in got[label]] == [row_multiset(e) for e in epochs], label
        if label == "sorted":
            assert [r["t"] for e in got[label] for r in e] == [r["t"] for e in epochs for r in e]
    assert spark.conf.getAll == before
