"""Live merges on Spark: a `Union` and `Join`s of two live file sources, each with its own
`WithWatermark`, into file sinks, against the direct runner's `ReadFiles(streaming=True)`
over the same files (`sparkbeam/runners/spark/execute/live_merges.py`): with each
`WithWatermark` straight on its parquet source, whose reader judges its rows in each sink's
query, and with a transform before it, where each runs as a stage query of its own.

The direct runner takes file `i` of every source as epoch `i`. The tests add
one file per source, then wait for every query of the chain in order (the
stage queries, then the final ones: `process_all_available`), so that both
runners see the same epochs; under `policy="min"` what Spark has emitted once
every query is idle does not depend on the micro-batches the files fell into
anyway (`live_merges`, point 3).
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import time
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

import sparkbeam as sb
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.results.streaming_results import WORKER_NOT_BACK
from tests.agreement.pipelines import row_multiset
from tests.files import publish_parquet
from tests.runners.spark.drivers import kill_during_batch

pytestmark = pytest.mark.spark

T0 = datetime(2026, 4, 1, 10)
SCHEMA = {"k": str, "v": int, "t": datetime}

READINGS = [  # delay 5 s: each file out of order; 2 s (file 1) and 19 s (file 2) are late
    [("a", 12), ("b", 3), ("a", 8)],
    [("a", 25), ("b", 14), ("a", 2), ("b", 21)],
    [("b", 33), ("a", 19), ("a", 28)],
    [("a", 44), ("b", 36)],
]
STATUS = [  # delay 10 s: out of order, never late
    [("a", 4), ("b", 11)],
    [("a", 18), ("b", 6), ("a", 9)],
    [("b", 27), ("a", 15), ("a", 30)],
    [("b", 41), ("a", 38)],
]


def write_file(directory: str, index: int, rows: list[tuple[str, int]], value: int) -> None:
    """File `index` of a source (parquet), modification times in name order (Spark's file
    order; the direct runner's is the names')."""
    os.makedirs(directory, exist_ok=True)
    table = pa.table(
        {
            "k": pa.array([k for k, _ in rows], pa.string()),
            "v": pa.array([value + i for i in range(len(rows))], pa.int64()),
            "t": pa.array(
                [T0 + timedelta(seconds=s) for _, s in rows], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    path = os.path.join(directory, f"part-{index:03d}.parquet")
    publish_parquet(table, path, 1_700_000_000 + index)


def add_epoch(base: str, index: int) -> None:
    write_file(os.path.join(base, "readings"), index, READINGS[index], 100 * index)
    write_file(os.path.join(base, "status"), index, STATUS[index], 100 * index + 50)


def sources(
    p: sb.Pipeline, base: str, slow: str | None = None, filtered: bool = False
) -> tuple[sb.PCollection, sb.PCollection]:
    """The two watermarked streams (with `slow`: the readings held up while that file exists,
    to stop a query in the middle of a micro-batch of the readings' stage; `filtered`: each
    through a `Filter` that keeps every row (`v` is never negative) before its
    `WithWatermark`, so that no reader judges them and each runs as a stage query)."""
    readings = p | "readings" >> sb.ReadFiles(
        os.path.join(base, "readings"), schema=SCHEMA, streaming=True
    )
    if slow is not None:
        marker = slow

        def hold_up(row: dict[str, Any]) -> bool:
            if os.path.exists(marker):
                open(marker + ".started", "w").close()
                time.sleep(60)  # killed or stopped from outside long before this ends
            return True

        readings = readings.filter(hold_up)
    status = p | "status" >> sb.ReadFiles(
        os.path.join(base, "status"), schema=SCHEMA, streaming=True
    )
    if filtered:
        readings, status = (s.filter(sb.col("v") >= 0) for s in (readings, status))
    return readings.with_watermark("t", "5 seconds"), status.with_watermark("t", "10 seconds")


def window_join(a: sb.PCollection, b: sb.PCollection, how: str = "left") -> sb.PCollection:
    left = a.tumble("t", "10 seconds").select("k", "window_start", reading="v")
    right = b.tumble("t", "10 seconds").select("k", "window_start", status="v")
    return left.join(right, on=["k", "window_start"], how=how)


Outputs = tuple[dict[str, sb.PCollection], list[sb.PCollection]]
"""The outputs to compare, by name, and the PCollections whose late rows are counted."""


def joined(p: sb.Pipeline, base: str, slow: str | None = None) -> Outputs:
    """The left outer window join alone (the restart tests)."""
    a, b = sources(p, base, slow)
    return {"window_left": window_join(a, b)}, [a, b]


def merges(p: sb.Pipeline, base: str, added: bool = False, filtered: bool = False) -> Outputs:
    """A Union, a left outer window join and an interval join of the two streams (`added`:
    and their plain union, a sink added when the pipeline starts again; `filtered`: through
    stage queries, `sources`)."""
    a, b = sources(p, base, filtered=filtered)
    union = a.union(b).tumble("t", "10 seconds")
    outputs = {
        "union": union.combine_per_key(["k", "window_start"], n=sb.Count(), total=sb.Sum("v")),
        "window_left": window_join(a, b),
        "interval": a.join(b, on="k", times=("t", "t"), within=("0 seconds", "5 seconds")),
    }
    if added:
        outputs["added"] = a.union(b)
    return outputs, [a, b]


def read_sink(path: str) -> list[dict[str, Any]]:
    """The committed rows of a Spark file sink's directory, read by the direct runner."""
    p = sb.Pipeline()
    rows = p | sb.ReadFiles(path)
    return p.run().collect(rows)


class Chain:
    """The pipeline `build` makes on Spark, each output written to `out/<name>`, started on
    the checkpoint location `checkpoints`."""

    def __init__(
        self, spark: Any, build: Any, base: str, out: str, checkpoints: str, **options: Any
    ) -> None:
        self.spark, self.build, self.base, self.out = spark, build, base, out
        self.checkpoints, self.options = checkpoints, options
        self.result, self.built = self.start()

    def start(self) -> tuple[Any, Outputs]:
        runner = sb.SparkRunner(spark=self.spark, checkpoint_location=self.checkpoints)
        p = sb.Pipeline(runner=runner)
        built = self.build(p, self.base, **self.options)
        for name, pcoll in built[0].items():
            pcoll.write_files(os.path.join(self.out, name))
        return p.run(), built

    def settle(self) -> None:
        """Every query of the chain processes what is there, in order. On a loaded machine a
        `transformWithState` query's Python worker may miss Spark's fixed 10 seconds to
        connect back (`WORKER_NOT_BACK`): then the chain is started again on its
        checkpoints (up to 3 times), which the restart tests show to lose and repeat
        nothing."""
        for attempt in range(4):
            try:
                self.result.process_all_available()
                return
            except Exception as exc:
                self.result.stop()  # a failed chain leaves no query running after its test
                if attempt == 3 or WORKER_NOT_BACK not in str(exc):
                    raise
                self.result, self.built = self.start()

    def stop(self) -> None:
        self.result.stop()


def assert_direct_rows(
    build: Any, base: str, out: str, spark_result: Any = None, built: Outputs | None = None
) -> None:
    """Each output's sink holds the direct runner's rows before its end-of-input flush over
    the same files, and (given the Spark result) the same rows were late."""
    p = sb.Pipeline()
    outputs, watermarked = build(p, base)
    direct = p.run()
    for name, pcoll in outputs.items():
        epochs = direct.collect_by_epoch(pcoll)
        want = [row for epoch in epochs[:-1] for row in epoch]
        assert want, name
        assert row_multiset(read_sink(os.path.join(out, name))) == row_multiset(want), name
    if built is not None:
        late = [direct.late_count(w) for w in watermarked]
        assert [spark_result.late_count(w) for w in built[1]] == late


def stage_files(checkpoints: str) -> dict[str, set[str]]:
    """Each stage's data files on disk, by stage directory."""
    stages = sorted(n for n in os.listdir(checkpoints) if n.startswith("stage-"))
    return {
        stage: {
            n for n in os.listdir(os.path.join(checkpoints, stage, "rows")) if n.startswith("part-")
        }
        for stage in stages
    }


def stage_files_written(checkpoints: str) -> dict[str, set[str]]:
    """Each stage's data files its file sink committed (its `_spark_metadata` log)."""
    written: dict[str, set[str]] = {}
    for stage in stage_files(checkpoints):
        log = os.path.join(checkpoints, stage, "rows", "_spark_metadata")
        names = written.setdefault(stage, set())
        for batch in os.listdir(log):
            if batch.split(".")[0].isdigit():
                with open(os.path.join(log, batch)) as handle:
                    lines = handle.read().splitlines()[1:]
                names.update(os.path.basename(json.loads(line)["path"]) for line in lines)
    return written


def live_union_and_joins_by_their_readers(spark: Any, tmp_path: Any) -> None:
    """Each `WithWatermark` straight on its parquet source: each sink's query reads both
    sources, whose readers judge their rows by the files' footers: three queries, no stage.
    Two files per source before the start, a third once the queries run: the union's windows,
    the left outer window join and the interval join hold the direct runner's rows before its
    flush, and the same rows were late, on the readings' side only. With the interval join's
    query stopped, a fourth file; all started again on the checkpoints with a sink added:
    every sink holds the direct runner's rows, none lost or repeated, the added one from the
    first files on (a new query reads a live directory from its start)."""
    base, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))
    add_epoch(base, 0)
    add_epoch(base, 1)
    chain = Chain(spark, merges, base, out, checkpoints)
    assert len(chain.result.queries) == 3  # one per sink
    add_epoch(base, 2)  # while the queries run (under policy="min" no matter when)
    chain.settle()
    # each sink's query reads the two sources' readers, nothing else (no feed of the runner's)
    assert [len(q.lastProgress["sources"]) for q in chain.result.queries] == [2, 2, 2]
    late = [chain.result.late_count(w) for w in chain.built[1]]
    assert late == [2, 0]
    assert_direct_rows(merges, base, out, chain.result, chain.built)
    assert not [name for name in os.listdir(checkpoints) if name.startswith("stage-")]

    [interval] = [r for r in chain.result.sinks.values() if "interval" in r.directory]
    interval.final.query.stop()
    add_epoch(base, 3)
    chain.settle()
    chain.stop()
    again = Chain(spark, merges, base, out, checkpoints, added=True)
    again.settle()
    again.stop()
    assert_direct_rows(functools.partial(merges, added=True), base, out)
    added = {row["v"] for row in read_sink(os.path.join(out, "added"))}
    assert {0, 50, 300, 350} <= added  # the first files' rows and the fourth's


def live_union_and_joins_through_stages(spark: Any, tmp_path: Any) -> None:
    """Each source through a `Filter` before its `WithWatermark`: each runs as a stage query,
    shared by the three sinks. Two files per source before the start, a third once the
    queries run: the union's windows, the left outer window join and the interval join hold
    the direct runner's rows before its flush, and the readings' late rows are the same.

    The stage files every sink's query committed are deleted as they go: once
    all have processed the three files, none is left. With the interval
    join's query stopped, the files of a fourth file's batches stay, since it
    has not read them; started again on the checkpoints, it reads them (and
    they go), and every sink holds the direct runner's rows, none lost or
    repeated. A sink added then starts with the stage files still there."""
    base, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))
    staged = functools.partial(merges, filtered=True)
    add_epoch(base, 0)
    add_epoch(base, 1)
    chain = Chain(spark, staged, base, out, checkpoints)
    assert len(chain.result.queries) == 5  # a stage per source, shared by the three sinks
    add_epoch(base, 2)  # while the queries run (under policy="min" no matter when)
    chain.settle()
    # a stage reads its source, a sink's query the two stages' rows: no feed of the runner's
    read = sorted(len(q.lastProgress["sources"]) for q in chain.result.queries)
    assert read == [1, 1, 2, 2, 2]
    late = [chain.result.late_count(w) for w in chain.built[1]]
    assert late == [2, 0]  # on the readings' side only
    assert_direct_rows(staged, base, out, chain.result, chain.built)
    before = stage_files_written(checkpoints)
    assert len(before) == 2 and all(before.values())
    assert stage_files(checkpoints) == {stage: set() for stage in before}

    [interval] = [r for r in chain.result.sinks.values() if "interval" in r.directory]
    interval.final.query.stop()
    add_epoch(base, 3)
    chain.settle()
    chain.stop()
    unread = {s: names - before[s] for s, names in stage_files_written(checkpoints).items()}
    assert all(unread.values())
    assert stage_files(checkpoints) == unread

    again = Chain(spark, staged, base, out, checkpoints, added=True)
    again.settle()
    again.stop()
    assert stage_files(checkpoints) == {stage: set() for stage in before}
    assert_direct_rows(staged, base, out)
    added = read_sink(os.path.join(out, "added"))  # the fourth files' rows, none late
    assert sorted(row["v"] for row in added) == [300, 301, 350, 351]


FAST = [[("a", 10), ("b", 12)], []]
SLOW = [[], [("a", 3), ("b", 15), ("a", 11)]]
"""`policy="max"`: one source has rows in each file, so which rows are late does not depend
on the micro-batches the two sources' files fall into. After the first files the merged
watermark is the fast source's (12 s): the slow source's rows at 3 s and 11 s are late at
the union, its row at 3 s (window start 0 s, below 10 s) at the window join."""


def fastest(p: sb.Pipeline, base: str) -> Outputs:
    """The late rows of a union and of a window join under `policy="max"`."""
    read = {
        name: p | name >> sb.ReadFiles(os.path.join(base, name), schema=SCHEMA, streaming=True)
        for name in ("fast", "slow")
    }
    a, b = (read[name].with_watermark("t", "0 seconds") for name in ("fast", "slow"))
    union = a.union(b, policy="max")
    left = a.tumble("t", "10 seconds").select("k", "window_start", fast="v")
    right = b.tumble("t", "10 seconds").select("k", "window_start", slow="v")
    join = left.join(right, on=["k", "window_start"], policy="max")
    outputs = {"union_late": union.late_rows(), "join_late": join.late_rows()}
    return outputs, [union, join]


def late_rows_under_policy_max(spark: Any, tmp_path: Any) -> None:
    """Under `policy="max"` the union and the window join drop the slow source's rows below
    the fast one's watermark, and `late_rows()` holds them with that watermark, as on the
    direct runner (files added one by one, every query waited for after each)."""
    base, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))

    def add(index: int) -> None:
        write_file(os.path.join(base, "fast"), index, FAST[index], 100 * index)
        write_file(os.path.join(base, "slow"), index, SLOW[index], 100 * index + 50)

    add(0)
    chain = Chain(spark, fastest, base, out, checkpoints)
    assert len(chain.result.queries) == 2  # each sink's query reads both sources: no stage
    chain.settle()
    add(1)
    chain.settle()
    chain.stop()
    assert_direct_rows(fastest, base, out)
    late = read_sink(os.path.join(out, "union_late"))
    assert sorted(row["t"].second for row in late) == [3, 11]
    assert {row["late_watermark"] for row in late} == {T0 + timedelta(seconds=12)}
    joined = read_sink(os.path.join(out, "join_late"))  # laid out as unmatched rows
    assert [(row["k"], row["window_start"], row["slow"]) for row in joined] == [("a", T0, 150)]


SIDE_BY_SIDE_SCENARIOS = {
    "union and joins": live_union_and_joins_by_their_readers,
    "union and joins, stages": live_union_and_joins_through_stages,
    "policy max": late_rows_under_policy_max,
}
"""The module's live chains that run side by side, by name: each takes the session and a
directory of its own, and asserts (the killed-driver test runs alone: its driver's start
and kill are timed)."""


@pytest.fixture(scope="module")
def scenarios(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each of `SIDE_BY_SIDE_SCENARIOS` run at once, in threads: None, or the error it raised
    (its own test raises it)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(SIDE_BY_SIDE_SCENARIOS)) as pool:
        futures = {
            name: pool.submit(scenario, spark, tmp_path_factory.mktemp("chain"))
            for name, scenario in SIDE_BY_SIDE_SCENARIOS.items()
        }
        return {name: future.exception() for name, future in futures.items()}


def raise_failure(scenarios: dict[str, Any], name: str) -> None:
    if scenarios[name] is not None:
        raise scenarios[name]


def test_live_union_and_joins_agree_with_the_direct_runner(scenarios: dict[str, Any]) -> None:
    """`live_union_and_joins_by_their_readers`, beside the other scenarios."""
    raise_failure(scenarios, "union and joins")


def test_live_union_and_joins_through_stages_agree_with_the_direct_runner(
    scenarios: dict[str, Any],
) -> None:
    """`live_union_and_joins_through_stages`, beside the other scenarios."""
    raise_failure(scenarios, "union and joins, stages")


def test_late_rows_of_live_merges_under_policy_max(scenarios: dict[str, Any]) -> None:
    """`late_rows_under_policy_max`, beside the other scenarios."""
    raise_failure(scenarios, "policy max")


KILLED_DRIVER = """
from tests.runners.spark.test_live_merges import Chain, joined
Chain(spark, joined, {base!r}, {out!r}, {checkpoints!r}, slow={slow!r}).settle()
"""
"""What the killed driver runs (`drivers.kill_during_batch`: its session is `spark`)."""


@pytest.mark.killed_driver
def test_a_live_join_survives_a_clean_stop_and_a_driver_killed_during_a_batch(
    spark: Any, tmp_path: Any
) -> None:
    """The chain (two stage queries, the join's query) stopped cleanly after two files;
    started again in another driver, killed with SIGKILL while the readings' stage runs a
    micro-batch of the third; started again here with a fourth: the join's file sink holds
    every row the direct runner emits before its flush, once."""
    base, out, checkpoints = (str(tmp_path / name) for name in ("in", "out", "ckpt"))
    slow = str(tmp_path / "slow")
    add_epoch(base, 0)
    add_epoch(base, 1)
    first = Chain(spark, joined, base, out, checkpoints, slow=slow)
    assert len(first.result.queries) == 3
    first.settle()
    first.stop()
    after_two = read_sink(os.path.join(out, "window_left"))
    assert after_two  # windows closed and matched by the second files
    assert all(stage_files_written(checkpoints).values())
    assert not any(stage_files(checkpoints).values())  # read and committed: deleted

    add_epoch(base, 2)
    open(slow, "w").close()
    script = KILLED_DRIVER.format(base=base, out=out, checkpoints=checkpoints, slow=slow)
    kill_during_batch(script, slow, 180)

    add_epoch(base, 3)
    third = Chain(spark, joined, base, out, checkpoints, slow=slow)
    third.settle()
    third.stop()
    assert_direct_rows(joined, base, out)
    assert not any(stage_files(checkpoints).values())


def test_max_drift_at_a_live_merge_is_refused_before_anything_starts(
    spark: Any, tmp_path: Any
) -> None:
    """`max_drift` holds a source's epochs back, which Spark's own sources do not allow:
    refused when the pipeline runs, before any stage query is planned (`idle_after` where
    watermarks meet is refused the same way: tests/support)."""
    base, checkpoints = str(tmp_path / "in"), str(tmp_path / "ckpt")
    add_epoch(base, 0)
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark, checkpoint_location=checkpoints))
    read = {
        name: p | name >> sb.ReadFiles(os.path.join(base, name), schema=SCHEMA, streaming=True)
        for name in ("readings", "status")
    }
    a = read["readings"].with_watermark("t", "5 seconds")
    b = read["status"].with_watermark("t", "10 seconds", max_drift="1 minute")
    a.union(b).write_files(str(tmp_path / "out"))
    with pytest.raises(sb.PipelineError) as info:
        p.run()
    assert limits.MAX_DRIFT_LIVE.matches(str(info.value)), str(info.value)
    assert str(info.value).startswith("WithWatermark")
    assert not spark.streams.active
    assert not os.path.exists(checkpoints)
