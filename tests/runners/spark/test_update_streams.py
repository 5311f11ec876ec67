"""`CombinePerKey(emit="update")` on Spark Structured Streaming gives the direct runner's rows,
epoch by epoch, over replayed sources: each epoch's step-1 rows (one per group it touched)
before its step-2 rows (the groups the watermark passed), with `allowed_lateness` too.

The streams, the property test's fixed examples and the Spark side of the sink tests run side by
side in one module fixture (`spark_runs`); each test compares one.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

import sparkbeam as sb
from sparkbeam.runners.spark.translate.partials import read_columns
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import KeysSeen, outcome, side_by_side
from tests.files import publish_parquet
from tests.runners.spark.drivers import kill_during_batch

pytestmark = pytest.mark.spark

Rows = list[dict[str, Any]]
Outputs = dict[str, sb.PCollection]
ByEpoch = dict[str, list[Rows]]
SCHEMA = {"k": str, "t": int, "v": int}


def stream_of(*epochs: Rows, schema: dict[str, type] | None = None) -> sb.TestStream:
    stream = sb.TestStream(schema or SCHEMA)
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def row(t: int, k: str = "a", v: int = 1) -> dict[str, Any]:
    return {"k": k, "t": t, "v": v}


def steps(rows: Rows) -> tuple[list[str], list[str]]:
    """An epoch's update rows as (step 1, step 2), each as a sorted multiset, after checking
    that every step-1 row comes before every step-2 row."""
    closing = [r["pane_timing"] == "ON_TIME" or r["pane_is_last"] for r in rows]
    assert closing == sorted(closing), f"a step-1 row after a step-2 row: {rows}"
    first = [r for r, c in zip(rows, closing, strict=True) if not c]
    second = [r for r, c in zip(rows, closing, strict=True) if c]
    return row_multiset(first), row_multiset(second)


def tumble_sum(p: sb.Pipeline) -> Outputs:
    """A window touched and closed in one epoch: its update, then its closing row."""
    rows = p | stream_of([row(1)], [row(2, v=10), row(15, v=100)], [row(16, "b")])
    windows = rows.with_watermark("t", 0).tumble("t", 10)
    updates = windows.combine_per_key(["k", "window_start"], emit="update", total=sb.Sum("v"))
    closed = windows.combine_per_key(["k", "window_start"], total=sb.Sum("v"))
    return {"updates": updates, "finals": updates.finals(), "closed": closed}


def hop(p: sb.Pipeline) -> Outputs:
    """A hop row updates both its windows."""
    rows = p | stream_of([row(7)], [row(8, v=2)], [row(25, v=4)])
    windows = rows.with_watermark("t", 0).hop("t", 10, 5)
    updates = windows.combine_per_key(["window_start"], emit="update", total=sb.Sum("v"))
    return {"updates": updates}


def late_corrections(p: sb.Pipeline) -> Outputs:
    """delay 0, lateness 10: ON_TIME at the estimate, LATE corrections until the watermark,
    rows past the lateness dropped into late_rows()."""
    epochs = [[row(1)], [row(12)], [row(5)], [row(25)], [row(8)], [row(40)], [row(3)]]
    marked = (p | stream_of(*epochs)).with_watermark("t", 0, allowed_lateness=10)
    windows = marked.tumble("t", 10)
    updates = windows.combine_per_key(["k", "window_start"], emit="update", total=sb.Sum("v"))
    closed = windows.combine_per_key(["k", "window_start"], total=sb.Sum("v"))
    return {
        "updates": updates,
        "finals": updates.finals(),
        "closed": closed,
        "late": marked.late_rows(),
    }


def born_late(p: sb.Pipeline) -> Outputs:
    """A group whose first row comes after the estimate passed it has LATE rows only."""
    epochs = [[row(14)], [row(6, "b"), row(7, "b", 2)], [row(9, "b")], [row(30)]]
    marked = (p | stream_of(*epochs)).with_watermark("t", 0, allowed_lateness=10)
    updates = marked.tumble("t", 10).combine_per_key(
        ("k", "window_start"), emit="update", total=sb.Sum("v")
    )
    return {"updates": updates}


def running(p: sb.Pipeline) -> Outputs:
    """No watermarked key: each epoch updates the groups it touched, the end of input closes
    them (the watermark on t only ends the input). A user `CombineFn` reads whole rows."""
    rows = p | stream_of([row(1), row(1, "b", 5)], [row(2, v=2)], [])
    updates = rows.with_watermark("t", 0).combine_per_key(
        "k", emit="update", total=sb.Sum("v"), n=sb.Count(), seen=KeysSeen()
    )
    return {"updates": updates}


MINUTE = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)


def at(seconds: int, k: str = "a") -> dict[str, Any]:
    return {"k": k, "t": MINUTE + dt.timedelta(seconds=seconds), "v": 1}


def datetimes(p: sb.Pipeline) -> Outputs:
    """A datetime column, delay and lateness in seconds: the estimate in milliseconds; `MaxBy`
    reads two columns."""
    schema = {"k": str, "t": dt.datetime, "v": int}
    epochs = [[at(5)], [at(61)], [at(30)], [at(95)], [at(50, "b")], [at(125)]]
    marked = (p | stream_of(*epochs, schema=schema)).with_watermark(
        "t", "1 second", allowed_lateness="30 seconds"
    )
    updates = marked.tumble("t", "1 minute").combine_per_key(
        ["k", "window_start"],
        emit="update",
        n=sb.Count(),
        first=sb.Min("t"),
        latest=sb.MaxBy("v", "t"),
    )
    return {"updates": updates}


def idle_input(p: sb.Pipeline) -> Outputs:
    """A Union where one input goes quiet: once it is idle the merged estimate and watermark
    are the busy input's: groups get their on-time, late and closing rows before the input ends
    (both inputs with the same allowed lateness, as Spark needs)."""
    quiet = (p | "quiet" >> stream_of([row(3, "q")], [], [], [])).with_watermark(
        "t", 0, allowed_lateness=5, idle_after=1
    )
    busy = p | "busy" >> stream_of([row(10)], [row(14)], [row(22)], [row(17, v=2)])
    windows = quiet.union(busy.with_watermark("t", 2, allowed_lateness=5)).tumble("t", 10)
    updates = windows.combine_per_key(["k", "window_start"], emit="update", total=sb.Sum("v"))
    return {"updates": updates, "finals": updates.finals()}


STREAMS: dict[str, Callable[[sb.Pipeline], Outputs]] = {
    "tumble_sum": tumble_sum,
    "hop": hop,
    "late_corrections": late_corrections,
    "born_late": born_late,
    "running": running,
    "datetimes": datetimes,
    "idle_input": idle_input,
}


ONLY_DIRECT = ("closed",)
"""Outputs collected on the direct runner only (the Spark run's `finals()` is compared with
them): fewer queries for Spark."""


def run(build: Callable[[sb.Pipeline], Outputs], runner: Any) -> ByEpoch:
    p = sb.Pipeline(runner=runner)
    outputs = build(p)
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        outputs = {name: pc for name, pc in outputs.items() if name not in ONLY_DIRECT}
        result.prepare(*outputs.values())
    return {name: result.collect_by_epoch(pc) for name, pc in outputs.items()}


@pytest.fixture(scope="module")
def spark_runs(
    spark: Any, spark_runner: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Each of `STREAMS` and `FIXED_EXAMPLES` run on Spark, side by side: its rows by epoch,
    or the error it raised; beside them the Spark side of the sink tests below (`SINKS`)."""
    builds = {**STREAMS, **{name: random_updates(*drawn) for name, drawn in FIXED_EXAMPLES.items()}}
    runs = {name: functools.partial(run, build, spark_runner) for name, build in builds.items()}
    runs[REPLAYED] = functools.partial(
        replayed_into_sinks, spark_runner, tmp_path_factory.mktemp("replayed")
    )
    runs[LIVE] = functools.partial(live_files_in_two_runs, spark, tmp_path_factory.mktemp("live"))
    return side_by_side(runs)


REPLAYED, LIVE = "replayed into sinks", "live files in two runs"
"""The sink tests' Spark runs in `spark_runs`."""


def assert_agree(direct: ByEpoch, spark: ByEpoch) -> None:
    """The same rows in the same epochs; update rows in the same steps of each epoch."""
    for name, epochs in direct.items():
        if name in ONLY_DIRECT:
            continue
        assert len(spark[name]) == len(epochs), name
        for index, (want, got) in enumerate(zip(epochs, spark[name], strict=True)):
            if name == "updates":
                assert steps(got) == steps(want), (name, index)
            else:
                assert row_multiset(got) == row_multiset(want), (name, index)


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_spark_streaming_gives_the_direct_runners_update_rows(
    name: str, spark_runs: dict[str, Any]
) -> None:
    spark = spark_runs[name]
    if isinstance(spark, BaseException):
        raise spark
    direct = run(STREAMS[name], sb.DirectRunner())
    assert_agree(direct, spark)
    assert any(any(steps(epoch)[1]) for epoch in spark["updates"][:-1]) or name == "running"
    if "closed" in direct:  # finals() is emit="close", epoch by epoch
        assert [row_multiset(e) for e in spark["finals"]] == [
            row_multiset(e) for e in direct["closed"]
        ]


def test_only_the_columns_the_aggregates_read_cross_into_python() -> None:
    schema = sb.Schema.of({"k": str, "t": int, "v": int, "w": float})
    read = functools.partial(read_columns, schema=schema)
    assert read([("total", sb.Sum("v"))]).names == ("v",)
    assert read([("n", sb.Count()), ("top", sb.MaxBy("w", "t"))]).names == ("t", "w")
    assert read([("n", sb.Count())]).names == ()
    assert read([("total", sb.Sum("v")), ("seen", KeysSeen())]).names == ("k", "t", "v", "w")


RANDOM_EXAMPLES = 4
"""Drawn examples of the property test off CI; under `CI=true` it runs its fixed ones only."""

rows_of_an_epoch = st.lists(
    st.builds(row, st.integers(0, 45), st.sampled_from("ab"), st.integers(1, 9)), max_size=3
)

Example = tuple[list[Rows], int, int]
"""The property test's epochs, delay and allowed lateness."""

FIXED_EXAMPLES: dict[str, Example] = {
    "a delay, no lateness": ([[row(1), row(15, "b")], [row(8, v=3)], [row(20, "b"), row(4)]], 3, 0),
    # on time (estimate = max - 3) and last (watermark = max - 7) apart: window (b, 0) on time
    # in the epoch that opens it, a late row inside the lateness (9) updates the on-time
    # window (a, 0), one past it (8) is dropped; windows at 10 on time and last in one epoch
    "a delay and lateness": (
        [
            [row(2), row(11, "b")],
            [row(16), row(6, "b", 2)],
            [row(9), row(8)],
            [row(27, "b"), row(12)],
        ],
        3,
        4,
    ),
}
"""Under `CI=true` the property test's only examples; their Spark runs are made side by side
with `STREAMS` (`spark_runs`). Lateness with no delay, born-late groups included, is
`late_corrections` and `born_late` there."""


def random_updates(
    epochs: list[Rows], delay: int, lateness: int
) -> Callable[[sb.Pipeline], Outputs]:
    def build(p: sb.Pipeline) -> Outputs:
        marked = (p | stream_of(*epochs)).with_watermark("t", delay, allowed_lateness=lateness)
        updates = marked.tumble("t", 10).combine_per_key(
            ["k", "window_start"], emit="update", total=sb.Sum("v")
        )
        return {"updates": updates, "late": marked.late_rows()}

    return build


def fixed_examples(test: Callable[..., None]) -> Callable[..., None]:
    """`test` with each of `FIXED_EXAMPLES` as an explicit hypothesis example."""
    for epochs, delay, lateness in FIXED_EXAMPLES.values():
        test = example(epochs=epochs, delay=delay, lateness=lateness)(test)
    return test


@settings(
    max_examples=RANDOM_EXAMPLES,
    phases=[Phase.explicit] if os.environ.get("CI") else [Phase.explicit, Phase.generate],
    deadline=None,
)
@given(
    epochs=st.lists(rows_of_an_epoch, min_size=1, max_size=4),
    delay=st.sampled_from([0, 3]),
    lateness=st.sampled_from([0, 4, 10]),
)
@fixed_examples
def test_random_epochs_give_the_direct_runners_update_rows(
    spark_runner: Any,
    spark_runs: dict[str, ByEpoch | BaseException],
    epochs: list[Rows],
    delay: int,
    lateness: int,
) -> None:
    """Random epochs and allowed lateness (rows out of order, some late, some inside the
    lateness): the Spark run gives the direct run's update rows and late rows, epoch by
    epoch and step by step (a fixed example's Spark run is `spark_runs`')."""
    build = random_updates(epochs, delay, lateness)
    fixed = [name for name, drawn in FIXED_EXAMPLES.items() if drawn == (epochs, delay, lateness)]
    spark = outcome(spark_runs, fixed[0]) if fixed else run(build, spark_runner)
    assert_agree(run(build, sb.DirectRunner()), spark)


LIVE_SCHEMA = {"k": str, "t": dt.datetime, "v": int}


def write_live_epoch(directory: Path, index: int, rows: Rows) -> None:
    """One parquet file per epoch, modification times in name order (Spark's file order)."""
    table = pa.table(
        {
            "k": pa.array([r["k"] for r in rows], pa.string()),
            "t": pa.array([r["t"] for r in rows], pa.timestamp("us", tz="UTC")),
            "v": pa.array([r["v"] for r in rows], pa.int64()),
        }
    )
    path = directory / f"epoch-{index:03d}.parquet"
    publish_parquet(table, path, 1_700_000_000 + index)


def live_updates(p: sb.Pipeline, source: Path, slow: str | None = None) -> sb.PCollection:
    """The live pipeline; with `slow`, its rows wait a minute while that file exists (a batch
    to kill the driver in)."""
    rows = p | sb.ReadFiles(str(source), schema=LIVE_SCHEMA, streaming=True)
    if slow is not None:
        marker = slow

        def hold_up(row: dict[str, Any]) -> bool:
            if os.path.exists(marker):
                open(marker + ".started", "w").close()
                time.sleep(60)  # killed from outside long before this ends
            return True

        rows = rows.filter(hold_up)
    marked = rows.with_watermark("t", 0, allowed_lateness="10 seconds")
    return marked.tumble("t", "10 seconds").combine_per_key(
        ["k", "window_start"], emit="update", n=sb.Count()
    )


def direct_before_flush(source: Path) -> Rows:
    """What the direct runner emits over the files before its end-of-input flush."""
    p = sb.Pipeline()
    updates = live_updates(p, source)
    direct = p.run().collect_by_epoch(updates)
    return [r for epoch in direct[:-1] for r in epoch]


def run_live(
    spark: Any, source: Path, out: Path, checkpoints: Path, slow: str | None = None
) -> None:
    """The live pipeline into a file sink until it has read every file, then stopped."""
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark, checkpoint_location=str(checkpoints)))
    live_updates(p, source, slow).write_files(str(out))
    result = p.run()
    result.process_all_available()
    result.stop()


def read_sink(out: Path) -> Rows:
    read = sb.Pipeline()
    files = read | sb.ReadFiles(str(out))
    return read.run().collect(files)


LIVE_EPOCHS = [[at(1)], [at(12)], [at(5)], [at(31, "b")], [at(25, "b")], [at(45)]]
"""The live test's files: four, then two more after a stop."""


def live_files_in_two_runs(spark: Any, tmp: Path) -> tuple[Rows, Rows]:
    """The live pipeline into a file sink over the first four files of `LIVE_EPOCHS`, stopped,
    then started again from its checkpoint on two more: the sink's rows after each run."""
    source, out, checkpoints = tmp / "in", tmp / "out", tmp / "checkpoints"
    source.mkdir()
    for index, rows in enumerate(LIVE_EPOCHS[:4]):
        write_live_epoch(source, index, rows)
    run_live(spark, source, out, checkpoints)
    first = read_sink(out)
    for index, rows in enumerate(LIVE_EPOCHS[4:], start=4):
        write_live_epoch(source, index, rows)
    run_live(spark, source, out, checkpoints)
    return first, read_sink(out)


def test_live_files_into_a_file_sink_give_the_direct_runners_change_rows(
    spark_runs: dict[str, Any], tmp_path: Path
) -> None:
    """Spark's own file source, its files run back to back: window 0 is on time after the
    second file (the estimate 12 s passes it, the watermark 2 s does not), and the third
    file corrects it; its "ON_TIME" row still comes before that "LATE" update (Spark fires
    the timer after the batch's rows). Stopped, then started again from its checkpoint on
    two more files (a group born late, closing rows): the sink holds the direct runner's
    change rows before its end-of-input flush (a live source never ends), each once."""
    first_run, second_run = outcome(spark_runs, LIVE)
    source = tmp_path / "in"
    source.mkdir()
    for index, rows in enumerate(LIVE_EPOCHS[:4]):
        write_live_epoch(source, index, rows)
    before_flush = direct_before_flush(source)
    first = [r for r in before_flush if r["window_start"].second == 0]
    assert [(r["n"], r["pane_timing"], r["pane_index"]) for r in first][:3] == [
        (1, "EARLY", 0),
        (1, "ON_TIME", 1),
        (2, "LATE", 2),
    ]
    assert row_multiset(first_run) == row_multiset(before_flush)

    for index, rows in enumerate(LIVE_EPOCHS[4:], start=4):
        write_live_epoch(source, index, rows)
    before_flush = direct_before_flush(source)
    assert any(r["k"] == "b" and r["pane_timing"] == "LATE" for r in before_flush)
    assert row_multiset(second_run) == row_multiset(before_flush)


def replayed_into_sinks(runner: Any, out: Path) -> tuple[Rows, Rows]:
    """`late_corrections`' update rows into a file sink at `out` and a `ForEachBatch`: the rows
    written and the rows the callback was given."""
    calls: list[Rows] = []
    p = sb.Pipeline(runner=runner)
    updates = late_corrections(p)["updates"]
    updates.write_files(str(out)).for_each_batch(lambda rows, batch: calls.append(rows))
    p.run()
    return read_sink(out), [row for rows in calls for row in rows]


def test_a_replayed_update_stream_into_sinks_gives_the_direct_runners_change_rows(
    spark_runs: dict[str, Any], tmp_path: Path
) -> None:
    """`WriteFiles` writes the change rows as they are, `ForEachBatch` receives them: the
    direct runner's, over a TestStream, end of input included."""
    written, called = outcome(spark_runs, REPLAYED)
    direct_written, direct_called = replayed_into_sinks(sb.DirectRunner(), tmp_path / "direct")
    assert row_multiset(written) == row_multiset(direct_written)
    assert any(row["pane_timing"] == "LATE" for row in written)
    assert row_multiset(called) == row_multiset(direct_called)


KILLED_DRIVER = """
from pathlib import Path
from tests.runners.spark.test_update_streams import run_live
run_live(spark, Path({source!r}), Path({out!r}), Path({checkpoints!r}), {slow!r})
"""
"""What the killed driver runs (`drivers.kill_during_batch`: its session is `spark`)."""


@pytest.mark.killed_driver
def test_a_live_update_stream_survives_a_driver_killed_during_a_batch(
    spark: Any, tmp_path: Path
) -> None:
    """The driver (Python and its JVM) killed with SIGKILL in the middle of the first
    micro-batch; a new one started on the same checkpoint writes every change row once."""
    source, out, checkpoints = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoints"
    slow = str(tmp_path / "slow")
    source.mkdir()
    for index, rows in enumerate(LIVE_EPOCHS[:4]):
        write_live_epoch(source, index, rows)
    open(slow, "w").close()
    script = KILLED_DRIVER.format(
        source=str(source), out=str(out), checkpoints=str(checkpoints), slow=slow
    )
    kill_during_batch(script, slow, 120)
    assert os.listdir(checkpoints)  # the killed query left its checkpoint
    run_live(spark, source, out, checkpoints, slow)  # the same query, the marker gone
    assert row_multiset(read_sink(out)) == row_multiset(direct_before_flush(source))
