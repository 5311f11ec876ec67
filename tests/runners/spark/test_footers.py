"""Live parquet sources judged by their footers (`runners/spark/footers.py`): the reader's
offsets, watermarks and refusals without Spark, then the runners' agreement on a directory that
holds every case at once, run side by side: one file and three files per micro-batch."""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles
from pyspark.sql.streaming.listener import StreamingQueryProgress

import sparkbeam as sb
from sparkbeam.runners.spark.execute import live_progress
from sparkbeam.runners.spark.plan.late_filters import Strategy
from sparkbeam.runners.spark.session.engine_errors import PIPELINE_ERROR_MARK as MARKED
from sparkbeam.runners.spark.translate import footers, live_footers
from sparkbeam.runners.spark.translate.footers import (
    PIPELINE_ERROR_MARK,
    Counts,
    FootersError,
    FootersReader,
    Mark,
    MarkCounts,
    batch_counts,
    options_of,
    row_ranges,
    summary,
)
from tests.agreement.pipelines import row_multiset
from tests.conftest import LAKE
from tests.files import publish_parquet

T0 = datetime(2026, 4, 1, 10)
US = timedelta(microseconds=1)
SCHEMA = {"k": str, "v": int, "n": int, "t": datetime}
WM = T0 + timedelta(seconds=8)
"""The watermark of `t` (delay 2 s) after the first file; of `n` (delay 2000): 8000."""


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([row["k"] for row in rows], pa.string()),
            "v": pa.array([row["v"] for row in rows], pa.int64()),
            "n": pa.array([row["n"] for row in rows], pa.int64()),
            "t": pa.array([row["t"] for row in rows], pa.timestamp("us", tz="UTC")),
        }
    )


def row(k: str, v: int, n: int, t: datetime) -> dict[str, Any]:
    return {"k": k, "v": v, "n": n, "t": t}


FILES: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    ("f0-first", [row("first", 1, 10_000, T0 + timedelta(seconds=10))], {}),
    (
        "f1-edges",
        [
            row("at", 2, 8_000, WM),
            row("below", 4, 7_999, WM - US),
            row("above", 8, 8_001, WM + US),
        ],
        {},
    ),
    (  # a row with no time of one column: invalid there, a row like any other in the other
        "f2-later",
        [
            row("later", 16, 30_000, T0 + timedelta(seconds=30, microseconds=500)),
            {**row("no t", 1024, 30_000, T0), "t": None},
        ],
        {},
    ),
    # out of order in time: every row before the watermark (28 s; 28000)
    ("f3-earlier", [row("early", 32, 20_000, T0 + timedelta(seconds=20))], {}),
    (  # no statistics: its largest time (40 s) is read from the column
        "f4-no-stats",
        [row("nostats", 64, 40_000, T0 + timedelta(seconds=40)), row("late", 128, 1, T0)],
        {"write_statistics": False},
    ),
    (  # INT96 timestamps (as Spark writes them): no usable statistics either; late (38 s)
        "f5-int96",
        [row("int96", 256, 37_000, T0 + timedelta(seconds=37))],
        {"use_deprecated_int96_timestamps": True},
    ),
    ("f6-empty", [], {}),
    ("f7-end", [row("end", 512, 90_000, T0 + timedelta(seconds=90))], {}),
]


def write_files(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    for name, rows, options in FILES:
        pq.write_table(table(rows), str(directory / f"{name}.parquet"), **options)


MARKS = [Mark("wm_t", "t", True, 2_000_000, True), Mark("wm_n", "n", False, 2_000, False)]


COUNTS = Counts(
    tuple(MarkCounts(*(f"{m.time}.{key}" for key in MarkCounts.__annotations__)) for m in MARKS),
    "rows",
)
"""The reader's counts of each mark under the names of `MarkCounts`' fields, `t.kept` ..."""


KINDS = [T.StringType(), T.LongType(), T.LongType(), T.TimestampType()]
"""Spark's types of `k`, `v`, `n` and `t`."""


def reader(directory: Path, per_batch: int = 1, counts: Counts | None = None) -> FootersReader:
    fields = [
        *(T.StructField(name, kind) for name, kind in zip("kvnt", KINDS, strict=True)),
        *(T.StructField(mark.column, T.LongType()) for mark in MARKS),
    ]
    options = {**options_of(str(directory), MARKS, "ReadFiles(in)", counts)}
    options["files_per_batch"] = str(per_batch)
    return FootersReader(T.StructType(fields), options)


def micros(time: datetime) -> int:
    return (time - datetime(1970, 1, 1)) // US


def test_the_largest_time_comes_from_the_footer_or_the_column(tmp_path: Path) -> None:
    write_files(tmp_path)
    latest = {
        name: summary(str(tmp_path / f"{name}.parquet"), "t", True).latest for name, _, _ in FILES
    }
    assert latest["f1-edges"] == micros(WM + US)
    assert latest["f4-no-stats"] == micros(T0 + timedelta(seconds=40))
    assert latest["f5-int96"] == micros(T0 + timedelta(seconds=37))
    assert latest["f6-empty"] is None
    assert summary(str(tmp_path / "f4-no-stats.parquet"), "n", False).latest == 40_000
    groups = tmp_path / "groups.parquet"  # the largest in the first of three row groups
    rows = [row("a", i, 10 - i, T0 + timedelta(seconds=10 - i)) for i in range(6)]
    pq.write_table(table(rows), str(groups), row_group_size=2)
    assert summary(str(groups), "t", True).latest == micros(T0 + timedelta(seconds=10))
    assert summary(str(groups), "n", False).latest == 10


def batches(source: FootersReader, limit: Any) -> Iterator[list[footers.FilePartition]]:
    start = source.initialOffset()
    while True:
        end = source.latestOffset(start, limit)
        if end == start:
            assert source.partitions(start, end) == []  # the final no-data batch
            return
        made = source.partitions(start, end)
        assert all(isinstance(part, footers.FilePartition) for part in made)
        yield made  # type: ignore[misc]
        start = end


def test_each_file_carries_the_watermark_of_the_files_before_it(tmp_path: Path) -> None:
    write_files(tmp_path)
    one = [parts for parts in batches(reader(tmp_path), ReadMaxFiles(1))]
    assert [len(parts) for parts in one] == [1] * len(FILES)
    marks = [parts[0].watermarks for parts in one]
    after = [10, 10, 30, 30, 40, 40, 40]  # seconds: the running max before each file
    assert marks[0] == [None, None]
    for mark, seconds in zip(marks[1:], after, strict=True):
        assert mark == [micros(T0 + timedelta(seconds=seconds - 2)), seconds * 1000 - 2000]
    three = [parts for parts in batches(reader(tmp_path), ReadMaxFiles(3))]
    assert [len(parts) for parts in three] == [3, 3, 2]
    assert [p.watermarks for parts in three for p in parts] == marks
    (everything,) = batches(reader(tmp_path), ReadAllAvailable())
    assert [p.watermarks for p in everything] == marks


def test_the_reader_counts_each_batch_as_the_direct_runner_counts(tmp_path: Path) -> None:
    write_files(tmp_path)
    p = sb.Pipeline()
    rows = p | sb.ReadFiles(str(tmp_path), schema=SCHEMA, streaming=True)
    marked = {"t": rows.with_watermark("t", "2 seconds"), "n": rows.with_watermark("n", 2_000)}
    for pcoll in marked.values():
        pcoll.late_rows()
    metrics = p.run().metrics()
    times = {
        name: [r[name] for _, rs, _ in FILES for r in rs if r[name] is not None] for name in marked
    }
    for per_batch in (1, 3, 10):
        source = reader(tmp_path, per_batch, COUNTS)
        totals: dict[str, int] = {}
        start = source.initialOffset()
        while (end := source.latestOffset(start, ReadMaxFiles(per_batch))) != start:
            for key, value in batch_counts(json.dumps(start), json.dumps(end)).items():
                keep = max if key.endswith("latest") else operator.add
                totals[key] = value if key not in totals else keep(totals[key], value)
            start = end
        assert batch_counts(start, end) == {}  # a no-data batch counts nothing
        assert totals["rows"] == metrics[rows.node.label].rows_out
        for name, pcoll in marked.items():
            got = metrics[pcoll.node.label]
            assert totals[f"{name}.rows"] == got.rows_in - got.invalid_rows
            assert totals[f"{name}.invalid"] == got.invalid_rows
            assert totals[f"{name}.kept"] == got.rows_out
            assert totals[f"{name}.rows"] - totals[f"{name}.kept"] == got.late_rows > 0
            latest = max(times[name])
            if name == "t":
                latest = micros(latest.replace(tzinfo=None))
            assert totals[f"{name}.latest"] == totals[f"{name}.kept_latest"] == latest


def test_late_rows_are_counted_ahead_while_a_batch_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late rows of the files the next batch takes are counted in a thread while a batch
    runs: the offsets are those of a reader that counts each file when its batch is asked for,
    and no file's column is read then."""
    write_files(tmp_path)
    for per_batch in (1, 3):
        now = reader(tmp_path, per_batch, COUNTS)
        monkeypatch.setattr(now, "_count_ahead", lambda last, latest: None)
        ahead = reader(tmp_path, per_batch, COUNTS)
        start, read_ahead = ahead.initialOffset(), 0
        while True:
            want = now.latestOffset(start, ReadMaxFiles(per_batch))
            if ahead._ahead is not None:
                read_ahead += len(ahead._ahead.result())
                with monkeypatch.context() as patched:
                    patched.setattr(footers, "late_rows", None)  # not called: counted ahead
                    got = ahead.latestOffset(start, ReadMaxFiles(per_batch))
            else:
                got = ahead.latestOffset(start, ReadMaxFiles(per_batch))
            assert got == want
            if got == start:
                break
            start = got
        assert read_ahead >= 3  # f1-edges, f3-earlier, f4-no-stats, f5-int96 hold late rows


def test_rows_come_with_their_files_watermark_in_sparks_arrow_types(tmp_path: Path) -> None:
    write_files(tmp_path)
    source = reader(tmp_path, per_batch=10)
    start = source.initialOffset()
    parts = source.partitions(start, source.latestOffset(start, ReadMaxFiles(10)))
    edges = pa.Table.from_batches(list(source.read(parts[1])))
    assert edges.schema.field("t").type == pa.timestamp("us", tz="UTC")
    assert edges.column("wm_t").to_pylist() == [micros(WM)] * 3
    assert edges.column("wm_n").to_pylist() == [8_000] * 3
    (int96,) = source.read(parts[5])
    assert int96.column(3).to_pylist()[0].replace(tzinfo=None) == T0 + timedelta(seconds=37)
    assert list(source.read(parts[6])) == []


def test_a_reader_that_drops_late_rows_writes_no_watermark_column(tmp_path: Path) -> None:
    write_files(tmp_path)
    drops = Mark("wm_t", "t", True, 2_000_000, True, drops=True)
    fields = [T.StructField(name, kind) for name, kind in zip("kvnt", KINDS, strict=True)]
    options = options_of(str(tmp_path), [drops, MARKS[1]], "ReadFiles(in)")
    source = FootersReader(T.StructType([*fields, T.StructField("wm_n", T.LongType())]), options)
    start = source.initialOffset()
    parts = source.partitions(start, source.latestOffset(start, ReadAllAvailable()))
    read = [list(source.read(part)) for part in parts]
    columns = {tuple(batch.schema.names) for batches in read for batch in batches}
    assert columns == {("k", "v", "n", "t", "wm_n")}
    names = [[k for b in batches for k in b.column("k").to_pylist()] for batches in read]
    # late by `t` (2 s): below, early, late (f4's second row), int96; "no t" has no time
    want = [["first"], ["at", "above"], ["later", "no t"], [], ["nostats"], [], [], ["end"]]
    assert names == want
    assert read[1][0].column("wm_n").to_pylist() == [8_000, 8_000]  # the other mark's column


IN_A_NEW_PROCESS = """
import json, sys
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable
from sparkbeam.runners.spark.translate.footers import FootersReader, batch_counts
schema, options = json.loads(sys.argv[1])
reader = FootersReader(T.StructType.fromJson(schema), options)
start = reader.initialOffset()
end = reader.latestOffset(start, ReadAllAvailable())
read = [b.num_rows for part in reader.partitions(start, end) for b in reader.read(part)]
print(json.dumps([sum(read), batch_counts(start, end), "pandas" in sys.modules]))
"""


def test_the_reader_never_makes_its_process_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas the first time it turns a Python value into an Arrow one: half a
    second in each Python process Spark starts for a query's source, paid on the first batch
    with late rows. The reader's work on the driver (late rows counted from a column) and on
    the executors (watermarks written, late rows dropped) makes none."""
    write_files(tmp_path)
    drops = Mark("wm_t", "t", True, 2_000_000, True, drops=True)
    fields = [T.StructField(name, kind) for name, kind in zip("kvnt", KINDS, strict=True)]
    schema = T.StructType([*fields, T.StructField("wm_n", T.LongType())])
    options = options_of(str(tmp_path), [drops, MARKS[1]], "ReadFiles(in)", COUNTS)
    source = FootersReader(schema, options)
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())
    rows = sum(b.num_rows for part in source.partitions(start, end) for b in source.read(part))
    counts = batch_counts(start, end)
    assert counts["t.rows"] > counts["t.kept"] and counts["n.rows"] > counts["n.kept"]
    code = IN_A_NEW_PROCESS
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps([schema.jsonValue(), options])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == [rows, counts, False]


@given(
    groups=st.lists(st.integers(0, 50), min_size=1, max_size=8),
    parallelism=st.integers(1, 6),
    part_rows=st.integers(1, 40),
)
def test_a_file_is_cut_into_ranges_that_hold_each_row_once(
    groups: list[int], parallelism: int, part_rows: int
) -> None:
    total = sum(groups)
    ranges = row_ranges(groups, parallelism, part_rows)
    bounds = [edge for span in ranges for edge in span]
    assert bounds == sorted(bounds)  # in order, and with the next line: each row once
    assert [r for a, b in ranges for r in range(a, b)] == list(range(total))
    assert len(ranges) <= max(1, min(parallelism, total // part_rows))
    if len(ranges) > 1:  # about even: none under half an even range
        assert min(b - a for a, b in ranges) >= total // len(ranges) // 2


@given(
    times=st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=30),
    group_size=st.integers(1, 12),
    statistics=st.booleans(),
    watermark=st.integers(-60, 60),
)
def test_late_rows_are_counted_from_the_footer_where_a_group_lies_on_one_side(
    tmp_path_factory: pytest.TempPathFactory,
    times: list[int | None],
    group_size: int,
    statistics: bool,
    watermark: int,
) -> None:
    path = tmp_path_factory.mktemp("late") / "f.parquet"
    data = pa.table({"n": pa.array(times, pa.int64())})
    pq.write_table(data, str(path), row_group_size=group_size, write_statistics=statistics)
    decoded: list[int] = []
    opened = footers.open_parquet

    class Counting(pq.ParquetFile):
        def read_row_group(self, i: int, *args: Any, **kwargs: Any) -> pa.Table:
            decoded.append(i)
            return super().read_row_group(i, *args, **kwargs)

    try:
        footers.open_parquet = lambda p: Counting(p)  # type: ignore[assignment]
        late = footers.late_rows(str(path), "n", False, watermark)
    finally:
        footers.open_parquet = opened
    assert late == sum(1 for t in times if t is not None and t < watermark)
    groups = [times[i : i + group_size] for i in range(0, len(times), group_size)]
    straddling = {
        i
        for i, group in enumerate(groups)
        if (known := [t for t in group if t is not None]) and min(known) < watermark <= max(known)
    }
    assert set(decoded) == (straddling if statistics else set())


def test_a_cut_moves_to_a_row_groups_edge_when_one_is_near() -> None:
    assert row_ranges([50] * 4, 2, 10) == [(0, 100), (100, 200)]
    assert row_ranges([60, 60, 80], 2, 10) == [(0, 120), (120, 200)]  # 20 from the even cut
    assert row_ranges([10, 190], 2, 10) == [(0, 100), (100, 200)]  # 90 away: inside a group
    assert row_ranges([200], 2, 10) == [(0, 100), (100, 200)]
    assert row_ranges([200], 2, 101) == [(0, 200)]  # two ranges would hold under 101 rows
    assert row_ranges([1_048_576] * 10, 2, 500_000) == [(0, 5_242_880), (5_242_880, 10_485_760)]


def test_a_file_cut_into_partitions_is_read_whole_in_order(tmp_path: Path) -> None:
    rows = [row(f"r{i}", i, 1000 * i, T0 + timedelta(seconds=i)) for i in range(23)]
    pq.write_table(table(rows[:10]), str(tmp_path / "a-one-group.parquet"))
    pq.write_table(table(rows[10:]), str(tmp_path / "b-groups.parquet"), row_group_size=4)
    for parallelism in (1, 2, 3):
        source = reader(tmp_path, per_batch=10)
        source.parallelism, source.part_rows = parallelism, 2
        start = source.initialOffset()
        parts = source.partitions(start, source.latestOffset(start, ReadAllAvailable()))
        assert len(parts) == 2 * parallelism
        read = [batch for part in parts for batch in source.read(part)]
        got = pa.Table.from_batches(read).column("v").to_pylist()
        assert got == [r["v"] for r in rows]
        marks = {tuple(part.watermarks) for part in parts[parallelism:]}
        assert marks == {(micros(T0 + timedelta(seconds=9 - 2)), 9_000 - 2_000)}


def test_a_file_named_before_one_already_read_is_refused(tmp_path: Path) -> None:
    assert PIPELINE_ERROR_MARK == MARKED  # the runner names the refusal as its own
    write_files(tmp_path)
    source = reader(tmp_path, per_batch=10)
    start = source.latestOffset(source.initialOffset(), ReadAllAvailable())
    pq.write_table(table([]), str(tmp_path / "f9-after.parquet"))
    assert source.latestOffset(start, ReadAllAvailable())["files"] == ["f9-after.parquet"]
    pq.write_table(table([]), str(tmp_path / "f3-between.parquet"))
    with pytest.raises(FootersError, match=r"f3-between.parquet.*sorts before it"):
        source.latestOffset(start, ReadAllAvailable())
    (tmp_path / "f3-between.parquet").unlink()
    (tmp_path / "f9-half.parquet").write_bytes(b"PAR1 half-written")
    with pytest.raises(FootersError, match=r"cannot read the footer of .*f9-half.parquet"):
        source.latestOffset(start, ReadAllAvailable())
    (tmp_path / "f9-half.parquet").unlink()
    (tmp_path / ".f9-writing.parquet").write_bytes(b"PAR1 half-written")  # skipped
    again = reader(tmp_path, per_batch=10)  # a restart: what sorts before the offset was read
    assert again.latestOffset(start, ReadAllAvailable())["files"] == ["f9-after.parquet"]


def pipeline(p: sb.Pipeline, source: str) -> dict[str, Any]:
    """Both event times' watermarks straight on the source, their late rows, and windows."""
    rows = p | sb.ReadFiles(source, schema=SCHEMA, streaming=True)
    t = rows.with_watermark("t", "2 seconds")
    n = rows.with_watermark("n", 2_000)
    windows = t.tumble("t", "5 seconds").combine_per_key(["window_start"], total=sb.Sum("v"))
    return {"t": t, "t late": t.late_rows(), "windows": windows, "n": n, "n late": n.late_rows()}


RETENTION = "spark.sql.streaming.numRecentProgressUpdates"

PER_BATCH = {1: ("t", "t late", "windows", "n", "n late"), 3: ("t", "windows")}
"""The outputs run with one file per micro-batch and with three (each a query: few at once,
as each starts a Python process for its source that must connect back within 10 s). The run
with three reads the files through the suite's `viewfs://` mount (`LAKE`), which the reader's
Python process cannot reach: the runner resolves it to its local directory first; and it
reads each file of two rows or more as two partitions (`footers.PART_ROWS` of 1, on the
suite's two cores)."""

PART_ROWS = footers.PART_ROWS

CONVERT = StreamingQueryProgress.fromJObject

PYTHON_STREAM = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream"
"""How a query's progress describes a Python streaming source."""


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: Any, lake_directory: Path) -> dict[str, Any]:
    """The direct runner's rows before the flush and late counts; Spark's with one file per
    micro-batch (a local path) and with three (the same files under `LAKE`), and the late-row
    filter each Spark run chose."""
    source = tmp_path_factory.mktemp("footers") / "in"
    write_files(source)
    write_files(lake_directory / "footers")
    sources = {1: str(source), 3: f"{LAKE}/footers"}
    p = sb.Pipeline()
    made = pipeline(p, str(source))
    result = p.run()
    want = {
        name: [r for epoch in result.collect_by_epoch(pcoll)[:-1] for r in epoch]
        for name, pcoll in made.items()
    }
    want_late = {name: result.late_count(made[name]) for name in ("t", "n")}
    got: dict[int, dict[str, list[dict[str, Any]]]] = {}
    late: dict[int, dict[str, int]] = {}
    invalid: dict[int, dict[str, int]] = {}
    counted: dict[int, dict[str, tuple[int, int, int, int]]] = {}
    listening: dict[int, bool] = {}
    read: dict[int, list[list[str]]] = {}
    conversions: list[Any] = []

    def converted(jprogress: Any) -> Any:
        conversions.append(jprogress)  # pyspark's listener turning a report into objects
        return CONVERT(jprogress)

    strategies: dict[int, set[tuple[Strategy, bool]]] = {}
    options: dict[int, list[dict[str, str]]] = {}
    for per_batch, names in PER_BATCH.items():
        footers.FILES_PER_BATCH = per_batch
        footers.PART_ROWS = 1 if per_batch == 3 else footers.PART_ROWS
        given = options.setdefault(per_batch, [])

        def recorded(*args: Any, given: list[dict[str, str]] = given) -> dict[str, str]:
            given.append(options_of(*args))
            return given[-1]

        try:
            spark_p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
            outputs = pipeline(spark_p, sources[per_batch])
            got[per_batch] = {name: [] for name in names}
            for name in names:
                sink = got[per_batch][name]
                outputs[name].for_each_batch(lambda rows, batch, sink=sink: sink.extend(rows))
            # With one file per batch, its queries keep two progress reports, not 100: every
            # batch must be counted as Spark posts its report (`live_progress`).
            spark.conf.set(RETENTION, "2" if per_batch == 1 else "100")
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(live_footers, "options_of", recorded)
                running = spark_p.run()
        finally:
            footers.FILES_PER_BATCH, footers.PART_ROWS = 1, PART_ROWS
            spark.conf.unset(RETENTION)
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(StreamingQueryProgress, "fromJObject", converted)
                running.process_all_available()
                # Spark posts the reports on its listener bus: let it hand over the last ones
                spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
            read[per_batch] = [
                [source["description"] for source in query.lastProgress["sources"]]
                for query in running.queries
            ]
        finally:
            running.stop()
        listening[per_batch] = id(spark) in live_progress._LISTENERS
        strategies[per_batch] = {
            (chosen.strategy, chosen.in_reader)
            for run in running.sinks.values()
            for chosen in run.final.translation.late_filters.filters.values()
        }
        late[per_batch] = {n: running.late_count(outputs[n]) for n in ("t", "n") if n in names}
        invalid[per_batch] = {
            n: running.invalid_count(outputs[n]) for n in ("t", "n") if n in names
        }
        counted[per_batch] = counts_of(running.metrics(), spark_p) if per_batch == 1 else {}
    return {
        "want": want,
        "want late": want_late,
        "got": got,
        "late": late,
        "invalid": invalid,
        "want invalid": {name: result.invalid_count(made[name]) for name in ("t", "n")},
        "counted": counted,
        "listening": listening,
        "want counted": counts_of(result.metrics(), p),
        "strategies": strategies,
        "options": options,
        "conversions": conversions,
        "read": read,
    }


def counts_of(metrics: Any, p: sb.Pipeline) -> dict[str, tuple[int, int, int, int]]:
    """Rows in, rows out, late and invalid rows of the source and the `WithWatermark`s, which
    the reader counts (what follows them is the queries' own)."""
    counted = {}
    for node in p.nodes:
        if isinstance(node.transform, (sb.ReadFiles, sb.WithWatermark)):
            got = metrics[node.label]
            counted[node.label] = (got.rows_in, got.rows_out, got.late_rows, got.invalid_rows)
    return counted


@pytest.mark.spark
@pytest.mark.parametrize("per_batch", [1, 3])
def test_footers_agree_with_the_direct_runner(runs: dict[str, Any], per_batch: int) -> None:
    want = runs["want"]
    assert sorted(r["k"] for r in want["t late"]) == ["below", "early", "int96", "late"]
    assert sorted(r["k"] for r in want["n late"]) == ["below", "early", "int96", "late"]
    assert runs["want late"] == {"t": 4, "n": 4}
    for name, rows in runs["got"][per_batch].items():
        assert row_multiset(rows) == row_multiset(want[name]), name
    for name, count in runs["late"][per_batch].items():
        assert count == runs["want late"][name], name
    assert runs["want invalid"] == {"t": 1, "n": 0}
    for name, count in runs["invalid"][per_batch].items():
        assert count == runs["want invalid"][name], name
    if per_batch == 1:
        assert runs["counted"][1] == runs["want counted"]
    assert not runs["listening"][per_batch]  # the session's listener went with its queries
    # each query reads its footer source (Spark's Python stream) and nothing else: no input
    # of the runner's
    read = runs["read"][per_batch]
    assert len(read) == len(PER_BATCH[per_batch])
    assert all(len(sources) == 1 and PYTHON_STREAM in sources[0] for sources in read), read
    # each report read as its JSON, none turned into objects through the JVM by pyspark
    assert runs["conversions"] == []
    # the reader drops the late rows where no output of the query reads them ("t" alone)
    in_reader = {True, False} if per_batch == 1 else {True}
    assert runs["strategies"][per_batch] == {(Strategy.FOOTERS, drops) for drops in in_reader}
    # the session's two cores: with three files per batch, a file of two rows is two parts
    assert {(o["parallelism"], o["part_rows"]) for o in runs["options"][per_batch]} == {
        ("2", str(PART_ROWS if per_batch == 1 else 1))
    }


@pytest.mark.spark
def test_a_live_file_named_before_one_read_stops_the_query_naming_it(
    spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(table([row("a", 1, 1, T0)]), str(source / "b.parquet"))
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    rows = p | sb.ReadFiles(str(source), schema=SCHEMA, streaming=True)
    rows.with_watermark("t", "2 seconds").for_each_batch(lambda rows, batch: None)
    running = p.run()
    try:
        running.process_all_available()
        publish_parquet(table([row("a", 1, 1, T0)]), source / "a.parquet")
        with pytest.raises(sb.PipelineError, match=r"^ReadFiles\(in\): '.*/a.parquet' appeared"):
            running.process_all_available()
    finally:
        running.stop()
