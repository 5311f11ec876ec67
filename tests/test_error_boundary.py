"""Nothing lost, nothing silent (issue 19): every error of a running pipeline is
sparkbeam's, names the transform and says what the user's code did.

Each runner, each mode: a `DataError` or `PipelineError` (or
`InvariantViolation`) whose message names the transform, carries the first
useful line of the cause and never a JVM stack.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.streams import outcome, side_by_side
from tests.tracebacks import assert_short_as_direct, original

T0 = datetime(2026, 4, 1, 10, 0)


def source_of(
    p: sb.Pipeline, rows: list[dict[str, Any]], schema: dict[str, type], streaming: bool, first: int
) -> sb.PCollection:
    """`rows` as a `Create`, or streaming as two epochs (the `first` rows, then the rest) of a
    `TestStream` watermarked on "t" with no delay."""
    if not streaming:
        return p | sb.Create(rows, schema=schema)
    stream = sb.TestStream(schema)
    stream.add_epoch(rows[:first])
    stream.add_epoch(rows[first:])
    return p | stream | sb.WithWatermark("t", delay=timedelta(0))


def no_jvm(text: str) -> None:
    assert "py4j" not in text and "java." not in text, text


def exploding_combine_fn(failing: str) -> sb.CombineFn:
    """A `CombineFn` whose method `failing` fails: `add_input` on the row with x == 2,
    `create_accumulator` at once (a local class: Spark's workers, which cannot import the test
    modules, get it by value)."""

    class Explodes(sb.CombineFn):
        output_type = int

        def create_accumulator(self) -> int:
            if failing == "create_accumulator":
                raise ZeroDivisionError("the user's own failure")
            return 0

        def add_input(self, accumulator: int, element: dict[str, Any]) -> int:
            if failing == "add_input" and element["x"] == 2:
                raise ZeroDivisionError("the user's own failure")
            return accumulator + element["x"]

        def merge_accumulators(self, accumulators: Any) -> int:
            return sum(accumulators)

        def extract_output(self, accumulator: int) -> int:
            return accumulator

    return Explodes()


def combine_fn_pipeline(
    runner: Any, streaming: bool, failing: str, emit: str = "close"
) -> tuple[Any, Any]:
    p = sb.Pipeline(runner=runner)
    rows = [{"k": "a", "x": x, "t": T0 + timedelta(seconds=x)} for x in range(4)]
    if streaming:
        stream = sb.TestStream({"k": str, "x": int, "t": datetime})
        stream.add_epoch(rows)
        source = p | stream
        source = source | sb.WithWatermark("t", delay=timedelta(0))
    else:
        source = p | sb.Create(rows, schema={"k": str, "x": int, "t": datetime})
    totals = sb.CombinePerKey(["k", "t"], emit=emit, total=exploding_combine_fn(failing))
    return p, source | "Totals" >> totals


MODES = [
    "direct-batch",
    "direct-streaming",
    pytest.param("spark-batch", marks=pytest.mark.spark),
    pytest.param("spark-streaming", marks=pytest.mark.spark),
]


def runner_for(mode: str, request: Any) -> Any:
    if mode.startswith("direct"):
        return sb.DirectRunner()
    return request.getfixturevalue("spark_runner")


Run = Callable[[Any, Path], BaseException]
"""A failing pipeline on a runner (with a temporary directory): the error it raised."""


def raised(p: sb.Pipeline, out: sb.PCollection) -> BaseException:
    with pytest.raises((sb.DataError, sb.PipelineError, sb.InvariantViolation)) as caught:
        p.run().collect(out)
    return caught.value


def error_of(mode: str, run: Run, request: Any, tmp_path: Path) -> BaseException:
    """What `run` raises on the runner of `mode`; on Spark, as the module's Spark runs raised
    it side by side (`spark_errors`, under the key `f"{mode} {run.keywords}"`)."""
    if mode.startswith("direct"):
        return run(sb.DirectRunner(), tmp_path)
    assert isinstance(run, functools.partial)
    [error] = outcome(request.getfixturevalue("spark_errors"), key_of(mode, run))
    return error


def key_of(mode: str, run: functools.partial[BaseException]) -> str:
    return f"{mode} {run.func.__name__} {sorted(run.keywords.items(), key=str)}"


def combine_fn_error(
    runner: Any, tmp: Path, *, streaming: bool, failing: str, emit: str
) -> BaseException:
    return raised(*combine_fn_pipeline(runner, streaming, failing, emit))


@pytest.mark.parametrize(
    ("mode", "failing"),
    [
        *[(m, f) for m in MODES[:2] for f in ("add_input", "create_accumulator")],
        # both runners share the accumulators' code: one Spark mode for each method
        pytest.param("spark-batch", "add_input", marks=pytest.mark.spark),
        pytest.param("spark-streaming", "create_accumulator", marks=pytest.mark.spark),
    ],
)
def test_a_combine_fn_error_names_the_combine_the_aggregate_and_the_method(
    mode: str, failing: str, request: Any, tmp_path: Path
) -> None:
    run = combine_fn_run(mode, failing, "close")
    error = error_of(mode, run, request, tmp_path)
    assert isinstance(error, sb.DataError)
    assert_names_the_method(str(error), failing)


def combine_fn_run(mode: str, failing: str, emit: str) -> functools.partial[BaseException]:
    streaming = mode.endswith("streaming")
    return functools.partial(combine_fn_error, streaming=streaming, failing=failing, emit=emit)


@pytest.mark.parametrize(
    "mode", ["direct-streaming", pytest.param("spark-streaming", marks=pytest.mark.spark)]
)
def test_a_combine_fn_error_in_an_update_stream_names_the_combine(
    mode: str, request: Any, tmp_path: Path
) -> None:
    """On Spark the rows are added where each input partition folds them, before the
    update-mode operator: the error is the same."""
    error = error_of(mode, combine_fn_run(mode, "add_input", "update"), request, tmp_path)
    assert isinstance(error, sb.DataError)
    assert_names_the_method(str(error), "add_input")


def assert_names_the_method(text: str, failing: str) -> None:
    no_jvm(text)
    assert text.startswith(f"Totals total: the CombineFn's {failing} raised ZeroDivisionError")
    print(text)
    assert "ZeroDivisionError" in text and "the user's own failure" in text
    assert "test_error_boundary.py" in text
    assert len(text) < 2000


def broken_keeps_pipeline(runner: Any, streaming: bool, flat: bool) -> tuple[Any, Any]:
    def an_hour_back(row: dict[str, Any]) -> dict[str, Any]:
        """Breaks `keeps=["t"]` on the row with x == 2 (local: Spark's workers get it by
        value)."""
        if row["x"] == 2:
            return {**row, "t": row["t"] - timedelta(hours=1)}
        return row

    p = sb.Pipeline(runner=runner)
    rows = [{"k": "a", "x": x, "t": T0 + timedelta(seconds=x)} for x in range(4)]
    schema = {"k": str, "x": int, "t": datetime}
    source = source_of(p, rows, schema, streaming, first=2)
    if flat:
        moved = source | "Moves" >> sb.FlatMap(lambda row: [an_hour_back(row)], keeps=["t"])
    else:
        moved = source | "Moves" >> sb.Map(an_hour_back, keeps=["t"])
    return p, moved


def broken_keeps_error(runner: Any, tmp: Path, *, streaming: bool, flat: bool) -> BaseException:
    return raised(*broken_keeps_pipeline(runner, streaming, flat))


def broken_keeps_run(mode: str, flat: bool) -> functools.partial[BaseException]:
    return functools.partial(broken_keeps_error, streaming=mode.endswith("streaming"), flat=flat)


@pytest.mark.parametrize(
    ("mode", "flat"),
    [
        *[pytest.param(m, False, id=f"{m}-Map") for m in ("direct-batch", "direct-streaming")],
        pytest.param("spark-batch", False, id="spark-batch-Map", marks=pytest.mark.spark),
        pytest.param("spark-streaming", False, id="spark-streaming-Map", marks=pytest.mark.spark),
        *[pytest.param(m, True, id=f"{m}-FlatMap") for m in ("direct-batch", "direct-streaming")],
        # FlatMap runs the same worker code as Map: one Spark streaming case is enough
        pytest.param("spark-batch", True, id="spark-batch-FlatMap", marks=pytest.mark.spark),
    ],
)
def test_a_broken_keeps_promise_is_a_data_error_naming_the_map_and_the_row(
    mode: str, flat: bool, request: Any, tmp_path: Path
) -> None:
    """Issue 19 item 4: on Spark streaming 2 of 4 rows vanished and late_count stayed 0."""
    error = error_of(mode, broken_keeps_run(mode, flat), request, tmp_path)
    assert isinstance(error, sb.DataError)
    text = str(error)
    no_jvm(text)
    assert text.startswith("Moves: keeps=['t']"), text
    assert "'x': 2" in text


WINDOW_BOUNDS: dict[str, tuple[Any, datetime]] = {
    "tumble-9999": (sb.Tumble("t", size="1 day"), datetime(9999, 12, 31, 12)),
    "hop-9999": (sb.Hop("t", size="2 days", slide="1 day"), datetime(9999, 12, 30, 12)),
    "tumble-year-1": (sb.Tumble("t", size="1 day", offset="12 hours"), datetime(1, 1, 1, 6)),
    "session-9999": (sb.Session("t", gap="2 hours"), datetime(9999, 12, 31, 23)),
}
"""A window and a row time whose window (or session) bound lies outside years 1 to 9999."""


def window_bound_error(runner: Any, tmp: Path, *, bound: str) -> BaseException:
    window, t = WINDOW_BOUNDS[bound]
    p = sb.Pipeline(runner=runner)
    rows = [{"x": 1, "t": datetime(2026, 1, 1)}, {"x": 2, "t": t}]
    return raised(p, p | sb.Create(rows) | "Windows" >> window)


@pytest.mark.parametrize("bound", list(WINDOW_BOUNDS))
@pytest.mark.parametrize("mode", [MODES[0], MODES[2]])
def test_a_window_bound_outside_the_calendar_is_a_data_error(
    mode: str, bound: str, request: Any, tmp_path: Path
) -> None:
    """Issue 19 item 6: a bare OverflowError on every runner (a Session's end, its last row's
    time plus the gap, is a bound like a window's)."""
    error = error_of(mode, functools.partial(window_bound_error, bound=bound), request, tmp_path)
    assert isinstance(error, sb.DataError)
    text = str(error)
    no_jvm(text)
    assert text.startswith("Windows: "), text
    assert "year 1 to 9999" in text
    assert "'x': 2" in text or '"x":2' in text  # the row (as JSON on Spark)


def two_epochs(p: Any) -> Any:
    stream = sb.TestStream({"x": int, "t": datetime})
    stream.add_epoch([{"x": 1, "t": T0}, {"x": 2, "t": T0 + timedelta(minutes=10)}])
    stream.add_epoch([{"x": 3, "t": T0 + timedelta(minutes=2)}])
    return p | stream


@pytest.mark.spark
@pytest.mark.parametrize("second", ["t", "u"])
def test_chained_with_watermarks_are_refused_on_spark_streaming(
    spark_runner: Any, second: str
) -> None:
    """Issue 19 item 7: Spark failed the query ("Redefining watermark is disallowed")."""
    p = sb.Pipeline(runner=spark_runner)
    first = two_epochs(p) | "W1" >> sb.WithWatermark("t", delay=timedelta(minutes=5))
    if second == "u":
        first = first.with_columns(u=sb.col("t"))
    first | "W2" >> sb.WithWatermark(second, delay=timedelta(minutes=1))
    with pytest.raises(sb.PipelineError, match=r"^W2: .*refuses to redefine it") as caught:
        p.run()
    no_jvm(str(caught.value))


@pytest.mark.spark
def test_a_delay_beyond_spark_interval_range_is_refused_on_spark_streaming(
    spark_runner: Any,
) -> None:
    """Issue 19 item 7: a bare AnalysisException [CANNOT_PARSE_INTERVAL]."""
    p = sb.Pipeline(runner=spark_runner)
    two_epochs(p) | "W1" >> sb.WithWatermark("t", delay=timedelta(days=999_999_999))
    with pytest.raises(sb.PipelineError, match=r"^W1: delay .* at most \d+ milliseconds"):
        p.run()


def test_the_direct_runner_takes_chained_watermarks_and_any_delay() -> None:
    p = sb.Pipeline()
    first = two_epochs(p) | "W1" >> sb.WithWatermark("t", delay=timedelta(minutes=5))
    chained = first | "W2" >> sb.WithWatermark("t", delay=timedelta(minutes=1))
    patient = two_epochs(p) | "W3" >> sb.WithWatermark("t", delay=timedelta(days=999_999_999))
    result = p.run()
    assert sorted(row["x"] for row in result.collect(chained)) == [1, 2]
    assert sorted(row["x"] for row in result.collect(patient)) == [1, 2, 3]


@pytest.mark.parametrize("mode", [MODES[1], MODES[3]])
def test_a_bad_row_in_the_last_epoch_is_found_before_the_first_epoch_runs(
    mode: str, request: Any
) -> None:
    """`TestStream` rows are validated when the pipeline runs, before the first epoch."""
    seen: list[int] = []
    p = sb.Pipeline(runner=runner_for(mode, request))
    stream = sb.TestStream({"x": int, "t": datetime})
    stream.add_epoch([{"x": 1, "t": T0}])
    stream.add_epoch([{"x": 2, "t": T0}])
    stream.add_epoch([{"x": "three", "t": T0}])
    (p | "Stream" >> stream).for_each_batch(lambda rows, epoch: seen.append(epoch))
    with pytest.raises(sb.DataError, match=r"^Stream") as caught:
        p.run()
    no_jvm(str(caught.value))
    assert seen == []


# --- the boundary, transform by transform --------------------------------------------


def fails_on_two(shape: str = "row") -> Any:
    """A function of a row that raises on x == 2, else returns the row (`shape` "row"), a list
    of it ("rows") or True ("bool") (local: Spark's workers get it by value)."""

    def fails(row: dict[str, Any]) -> Any:
        if row["x"] == 2:
            raise KeyError("no such thing")
        return {"row": dict(row), "rows": [dict(row)], "bool": True}[shape]

    return fails


def under_a_file(tmp: Path) -> sb.WriteFiles:
    """A sink whose directory would be inside a regular file: the file system refuses."""
    (tmp / "a-file").write_text("not a directory")
    return sb.WriteFiles(str(tmp / "a-file" / "out"), format="json")


def lone_surrogate() -> sb.Map:
    """A Map whose output string holds a lone surrogate (no UTF-8 for it)."""
    return sb.Map(lambda row: {**row, "s": "a\ud800"}, schema={"x": int, "t": datetime, "s": str})


def capturing_a_lock() -> sb.Map:
    """A Map whose function captures a lock: Spark cannot pickle it for its workers."""
    lock = threading.Lock()
    return sb.Map(lambda row: {**row, "x": row["x"] + (0 if lock.locked() else 1)})


def from_a_module_the_workers_lack(tmp: Path) -> sb.Map:
    """A Map whose function lives in a module only the driver can import (as a module next
    to a script, not installed on the cluster)."""
    name = f"helpers_only_here_{uuid.uuid4().hex}"
    (tmp / f"{name}.py").write_text("def same(row):\n    return row\n")
    sys.path.insert(0, str(tmp))
    try:  # imported, so pickled by reference: what a worker without the module cannot load
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp))
    return sb.Map(module.same)


def a_store_that_is_down(rows: list[dict[str, Any]], batch: int) -> None:
    raise ConnectionError("the store is down")


BOUNDARY_CASES: dict[str, tuple[str, Any]] = {
    # case: (label, the transform (of a temporary directory) applied to rows with columns
    # x: int, t: datetime)
    "map": ("Broken map", lambda tmp: sb.Map(fails_on_two())),
    "map-output": ("Broken map", lambda tmp: sb.Map(lambda row: {"x": row["x"]})),
    "flat-map": ("Broken flat map", lambda tmp: sb.FlatMap(fails_on_two("rows"))),
    "filter": ("Broken filter", lambda tmp: sb.Filter(fails_on_two("bool"))),
    "tumble-calendar": (
        "Windows",
        lambda tmp: sb.Tumble("t", size="1 day", offset="12 hours"),
    ),
    "session-calendar": ("Sessions", lambda tmp: sb.Session("t", gap="2 hours")),
    "sum-overflow": ("Totals", lambda tmp: sb.CombinePerKey([], total=sb.Sum("x"))),
    "lone-surrogate": ("Broken map", lambda tmp: lone_surrogate()),
    "write-under-a-file": ("Out", under_a_file),
    "unpicklable-function": ("Locked map", lambda tmp: capturing_a_lock()),
    "missing-module": ("Helper map", from_a_module_the_workers_lack),
    "for-each-batch": ("Store", lambda tmp: sb.ForEachBatch(a_store_that_is_down)),
}
"""Each case's bad input: `x == 2` for the functions, a time in year 1 whose window starts
before it for the window, a huge x for the sum (see `boundary_rows`), a string no UTF-8
holds, a file system's refusal; on Spark only, a function it cannot send to its workers
(pickled) or that they cannot import."""

SPARK_ONLY = ("unpicklable-function", "missing-module")
"""Cases the direct runner runs fine: it calls the function where it was made."""

SPARK_STREAMING_CASES = ("map", "tumble-calendar", "session-calendar", "for-each-batch")
"""Streaming queries cost seconds each on Spark: one case per kind of failure (a Python
worker's, an engine check's; a Session's, which Spark streaming runs in a stateful
processor of its own; a sink's function, which Spark calls on the driver)."""

NO_STREAMING = ("sum-overflow",)
"""A global Sum has no streaming form (no watermarked key)."""


def boundary_rows(case: str) -> list[dict[str, Any]]:
    rows = [{"x": x, "t": T0 + timedelta(seconds=x)} for x in range(1, 4)]
    if case == "tumble-calendar":
        rows[0]["t"] = datetime(1, 1, 1, 6)  # in epoch 0 of a stream: never late
    if case == "session-calendar":
        rows[0]["t"] = datetime(9999, 12, 31, 23)  # its session would end after 9999
    if case == "sum-overflow":
        rows[1]["x"] = 2**63 - 1
    return rows


@pytest.mark.parametrize(
    ("mode", "case"),
    [("direct-batch", case) for case in BOUNDARY_CASES if case not in SPARK_ONLY]
    + [
        ("direct-streaming", case)
        for case in BOUNDARY_CASES
        if case not in SPARK_ONLY + NO_STREAMING
    ]
    + [pytest.param("spark-batch", case, marks=pytest.mark.spark) for case in BOUNDARY_CASES]
    + [
        pytest.param("spark-streaming", case, marks=pytest.mark.spark)
        for case in SPARK_STREAMING_CASES
    ],
)
def test_the_error_boundary(mode: str, case: str, request: Any, tmp_path: Path) -> None:
    """Every failure of a running pipeline is sparkbeam's, names the transform, and shows
    no JVM stack; the original exception is its cause, on Spark its `spark_error` (not
    chained: printed, the error is as short as the direct runner's for the same mistake)."""
    error = error_of(mode, boundary_run(mode, case), request, tmp_path)
    text = str(error)
    no_jvm(text)
    assert text.startswith(BOUNDARY_CASES[case][0]), text
    assert len(text) < 2000, text
    if mode.startswith("spark"):
        # printed, as short as the direct runner's for the same mistake (where it has one)
        kind = mode.replace("spark", "direct")
        same = case not in SPARK_ONLY and (kind == "direct-batch" or case not in NO_STREAMING)
        direct = boundary_run(kind, case)(sb.DirectRunner(), tmp_path / "direct") if same else None
        assert_short_as_direct(error, direct)
    if not isinstance(error, sb.DataError) or mode.startswith("spark"):
        assert original(error) is not None, "the original is kept"


def boundary_error(runner: Any, tmp: Path, *, streaming: bool, case: str) -> BaseException:
    """The error a run of `case` raises."""
    label, make = BOUNDARY_CASES[case]
    tmp.mkdir(exist_ok=True)
    p = sb.Pipeline(runner=runner)
    rows, schema = boundary_rows(case), {"x": int, "t": datetime}
    source = source_of(p, rows, schema, streaming, first=1)
    return raised(p, source | label >> make(tmp))


def boundary_run(mode: str, case: str) -> functools.partial[BaseException]:
    return functools.partial(boundary_error, streaming=mode.endswith("streaming"), case=case)


def spark_runs() -> dict[str, functools.partial[BaseException]]:
    """Every Spark run of the tests above that fails, by `key_of`."""
    runs = [("spark-batch", boundary_run("spark-batch", case)) for case in BOUNDARY_CASES]
    runs += [("spark-streaming", boundary_run("spark-streaming", c)) for c in SPARK_STREAMING_CASES]
    runs += [
        ("spark-batch", combine_fn_run("spark-batch", "add_input", "close")),
        ("spark-streaming", combine_fn_run("spark-streaming", "create_accumulator", "close")),
        ("spark-streaming", combine_fn_run("spark-streaming", "add_input", "update")),
        ("spark-batch", broken_keeps_run("spark-batch", False)),
        ("spark-streaming", broken_keeps_run("spark-streaming", False)),
        ("spark-batch", broken_keeps_run("spark-batch", True)),
    ]
    runs += [
        ("spark-batch", functools.partial(window_bound_error, bound=bound))
        for bound in WINDOW_BOUNDS
    ]
    return {key_of(mode, run): run for mode, run in runs}


@pytest.fixture(scope="module")
def spark_errors(spark_runner: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What each failing Spark run of this module raised (alone in a list: `outcome` raises
    an error the run itself raised), `SIDE_BY_SIDE` at once: each is a query of a second or
    more spent mostly waiting on Spark (its failed task tried again, as on a cluster). Each
    test reads its own (`error_of`)."""

    def listed(run: Run, tmp: Path) -> list[BaseException]:
        return [run(spark_runner, tmp)]

    return side_by_side(
        {
            key: functools.partial(listed, run, tmp_path_factory.mktemp("failing"))
            for key, run in spark_runs().items()
        }
    )


# --- files: which file, which line ----------------------------------------------------


def test_a_truncated_parquet_file_names_the_file_and_the_transform(tmp_path: Path) -> None:
    """Issue 19: a bare `ArrowInvalid` naming neither; parquet footers are read when
    `ReadFiles` is applied (its schema), so this is the same on every runner."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "a.parquet")
    whole = (tmp_path / "a.parquet").read_bytes()
    (tmp_path / "b.parquet").write_bytes(whole[: len(whole) // 2])
    p = sb.Pipeline()
    with pytest.raises(sb.DataError) as caught:
        p | "Orders" >> sb.ReadFiles(str(tmp_path), format="parquet")
    text = str(caught.value)
    assert text.startswith("Orders: ") and repr(str(tmp_path / "b.parquet")) in text
    assert "ArrowInvalid" in text and caught.value.__cause__ is not None


def test_a_corrupt_parquet_file_is_a_data_error_naming_it(runner: Any, tmp_path: Path) -> None:
    """A parquet file whose footer reads but whose data does not: a `DataError` naming the
    transform and the file when the pipeline runs, on both runners."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": list(range(1000))}), tmp_path / "a.parquet")
    data = bytearray((tmp_path / "a.parquet").read_bytes())
    data[8:200] = b"\xff" * 192  # the first column chunk's page header and data
    (tmp_path / "a.parquet").write_bytes(bytes(data))
    p = sb.Pipeline(runner=runner)
    rows = p | "Orders" >> sb.ReadFiles(str(tmp_path), format="parquet")
    with pytest.raises(sb.DataError) as caught:
        p.run().collect(rows)
    text = str(caught.value)
    no_jvm(text)
    assert text.startswith("Orders: ") and "a.parquet" in text and "corrupt" in text


@pytest.mark.parametrize("given", [True, False], ids=["schema given", "schema read"])
def test_a_parquet_column_of_another_type_names_the_file_the_column_both_types_and_the_fix(
    runner: Any, tmp_path: Path, given: bool
) -> None:
    """A file added after `ReadFiles` was applied, whose column is text where the schema says
    int: the same words on both runners (Spark's own line said "a file added after the
    pipeline was built?" and named neither type in our terms)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.array([0], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"n": [1], "t": t}), tmp_path / "a.parquet")
    p = sb.Pipeline(runner=runner)
    schema = {"n": int, "t": datetime} if given else None
    rows = p | "Orders" >> sb.ReadFiles(str(tmp_path), schema=schema)
    pq.write_table(pa.table({"n": ["seven"], "t": t}), tmp_path / "b.parquet")
    with pytest.raises(sb.DataError) as caught:
        p.run().collect(rows)
    text = str(caught.value)
    no_jvm(text)
    assert text.startswith("Orders: column 'n' of "), text
    assert repr(str(tmp_path / "b.parquet")) in text, text
    assert "is string (str) in the file but int in " in text, text
    assert ("schema=;" in text) is given, text
    assert "rewrite the file with 'n' as int64" in text, text
    assert "sb.col('n').cast(int)" in text, text
    assert len(text.splitlines()) == 1, text


def test_spark_s_parquet_type_mismatch_is_told_from_the_footer_of_the_file_it_names(
    tmp_path: Path,
) -> None:
    """A file Spark's own reader fails on (one a live source finds while it runs): the runner
    reads the footer of the file Spark names and says what the direct runner says."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkbeam.runners.spark.session.engine_errors import spark_errors

    pq.write_table(pa.table({"n": [1]}), tmp_path / "a.parquet")
    p = sb.Pipeline()
    rows = p | "Orders" >> sb.ReadFiles(str(tmp_path))
    pq.write_table(pa.table({"n": ["seven"]}), tmp_path / "b.parquet")
    with pytest.raises(sb.DataError) as direct:
        p.run().collect(rows)
    spark_said = (
        "[FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Error while reading file "
        f"{(tmp_path / 'b.parquet').as_uri()}. Data type mismatches when reading Parquet "
        "column [n]. Expected Spark type bigint, actual Parquet type BINARY. SQLSTATE: KD001"
    )
    with pytest.raises(sb.DataError) as caught, spark_errors(p.nodes):
        raise RuntimeError(spark_said)
    assert str(caught.value) == str(direct.value)
    assert "column 'n' of " in str(caught.value) and "b.parquet" in str(caught.value)


def test_a_parquet_column_outside_the_schema_is_not_read(runner: Any, tmp_path: Path) -> None:
    """A column of a type sparkbeam does not read (a date) is no obstacle when schema= leaves
    it out (it was refused when the footer was read, with advice to do just that)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    day = pa.array([datetime(2026, 4, 1).date()], pa.date32())
    pq.write_table(pa.table({"n": [1], "day": day}), tmp_path / "a.parquet")
    p = sb.Pipeline(runner=runner)
    with pytest.raises(sb.PipelineError) as caught:
        p | "Days" >> sb.ReadFiles(str(tmp_path))
    assert "column 'day'" in str(caught.value) and "date32" in str(caught.value)
    rows = p | "Orders" >> sb.ReadFiles(str(tmp_path), schema={"n": int})
    assert p.run().collect(rows) == [{"n": 1}]


@pytest.mark.parametrize("streaming", [False, True], ids=["bounded", "unbounded"])
def test_a_time_finer_than_a_microsecond_names_the_column_and_file(
    tmp_path: Path, streaming: bool
) -> None:
    """Nanosecond parquet timestamps read as microseconds when they are whole ones; one that
    is not was reported as a corrupt or truncated file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    nanos = [1_775_037_600_000_000_000, 1_775_037_600_000_000_001]
    pq.write_table(pa.table({"t": pa.array(nanos, pa.timestamp("ns"))}), tmp_path / "a.parquet")
    p = sb.Pipeline()
    rows = p | "Orders" >> sb.ReadFiles(str(tmp_path), streaming=streaming)
    with pytest.raises(sb.DataError) as caught:
        p.run().collect(rows)
    text = str(caught.value)
    assert text.startswith("Orders: column 't' of ") and "a.parquet" in text
    assert "2026-04-01 10:00:00.000000001" in text and "coerce_timestamps='us'" in text
    assert "corrupt" not in text


@pytest.mark.parametrize("format", ["json", "csv"])
def test_a_bad_value_in_a_file_names_the_file_line_and_value_on_both_runners(
    runner: Any, tmp_path: Path, format: str
) -> None:
    """Issue 19: Spark's file-read errors named the file but not the line, column or value:
    the Spark runner reads the file again on the driver and gives the direct runner's words."""
    if format == "json":
        (tmp_path / "a.json").write_text('{"x": 1, "y": "a"}\n{"x": "four", "y": "b"}\n')
    else:
        (tmp_path / "a.csv").write_text("x,y\n1,a\nfour,b\n")
    for streaming in [False, True] if format == "json" else [False]:
        error = bad_value_error(runner, tmp_path, format, streaming)
        text = str(error)
        no_jvm(text)
        assert text.startswith("Orders") and f"a.{format}" in text
        assert "'x'" in text and "'four'" in text
        if format == "csv":
            assert "line 3" in text
        if not isinstance(runner, sb.DirectRunner):
            direct = bad_value_error(sb.DirectRunner(), tmp_path, format, streaming)
            assert_short_as_direct(error, direct)


def bad_value_error(runner: Any, tmp_path: Path, format: str, streaming: bool) -> BaseException:
    """The error of reading the files of `tmp_path` (bounded, or replayed when `streaming`)."""
    p = sb.Pipeline(runner=runner)
    schema = {"x": int, "y": str}
    files = sb.ReadFiles(str(tmp_path), format=format, schema=schema, streaming=streaming)
    rows = p | "Orders" >> files
    with pytest.raises(sb.DataError) as caught:
        p.run().collect(rows)
    return caught.value


# --- Spark's text, cut to its first useful line ------------------------------------------

STREAM_FAILED = """[STREAM_FAILED] Query [id = 1f, runId = 2e] terminated with exception: \
Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 3.0 (TID 3) (host executor driver): \
org.apache.spark.SparkRuntimeException: \
[SOMETHING_WRONG] the engine's own words. SQLSTATE: 22000
:  +- ~Project [k#534, v#535L, __sparkbeam_judge#614-T0ms]
\tat org.apache.spark.sql.execution.SparkPlan.execute(SparkPlan.scala:1)
"""

PY4J = """An error occurred while calling o42.save.
: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/x
\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:892)
"""

WORKER = """[STREAM_FAILED] Query [id = 1f] terminated with exception: Job aborted
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/worker.py", line 1, in main
    process()
OverflowError: date value out of range
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (STREAM_FAILED, "[SOMETHING_WRONG] the engine's own words."),
        (PY4J, "ParentNotDirectoryException: Parent path is not a directory: file:/x"),
        (WORKER, "OverflowError: date value out of range"),
    ],
    ids=["stream-failed", "py4j", "python-worker"],
)
def test_spark_errors_are_cut_to_their_first_useful_line(text: str, line: str) -> None:
    from sparkbeam.runners.spark.session.engine_errors import spark_line

    said = spark_line(RuntimeError(text))
    assert line in said, said
    no_jvm(said)
    assert "+- ~Project" not in said and len(said) <= 400
