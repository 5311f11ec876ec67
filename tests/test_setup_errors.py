"""Setup mistakes get a `PipelineError` that names the option, the value and what to do
(issue 19): runner options when the runner is made, a pipeline that writes what it reads when
it is translated, `mode="error"` every run, results asked for what the run did not compute."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.runners.direct.checkpoint import MAX_PARALLELISM

SPARK_OPTIONS = [
    ({"master": "nonsense"}, ["master='nonsense'", "local[*]"]),
    ({"master": "local[0]"}, ["master='local[0]'", "no core", "local[N]"]),
    ({"master": "local[0,2]"}, ["local[0,2]", "no core"]),
    ({"master": 5}, ["master=5"]),
    ({"spark": "x"}, ["spark='x'", "not a SparkSession"]),
    ({"conf": "x"}, ["conf='x'", "dict"]),
    (
        {"conf": {"spark.sql.shuffle.partitions": "many"}},
        ["spark.sql.shuffle.partitions", "'many'", "whole number"],
    ),
    (
        {"conf": {"spark.sql.shuffle.partitions": 0}},
        ["spark.sql.shuffle.partitions", "'0'", ">= 1"],
    ),
    (
        {"conf": {"spark.sql.session.timeZone": "Mars/Olympus"}},
        ["spark.sql.session.timeZone", "'Mars/Olympus'", "time zone"],
    ),
    ({"conf": {"spark.driver.memory": "lots"}}, ["spark.driver.memory", "'lots'", "4g"]),
    ({"conf": {"spark.ui.enabled": "yes"}}, ["spark.ui.enabled", "'yes'", "'true' or 'false'"]),
    ({"conf": {5: "x"}}, ["conf key 5"]),
    ({"conf": {"spark.app.name": ["x"]}}, ["spark.app.name", "['x']"]),
    ({"trigger": "soon"}, ["trigger='soon'", "10 seconds"]),
    ({"trigger": 10}, ["trigger=10", "10 seconds"]),
    ({"trigger": "1 month"}, ["trigger='1 month'"]),
    ({"trigger": "1e1 seconds"}, ["trigger='1e1 seconds'", "not a plain number", "'10 seconds'"]),
    ({"checkpoint_location": 5}, ["checkpoint_location=5", "path"]),
    ({"checkpoint_location": ""}, ["checkpoint_location=''", "path"]),
    ({"staging_location": 5.0}, ["staging_location=5.0", "path"]),
    ({"ship_package": "no"}, ["ship_package='no'", "True or False"]),
    ({"progress": "yes"}, ["progress='yes'", "True, False or None"]),
]


@pytest.mark.parametrize(("options", "named"), SPARK_OPTIONS, ids=lambda v: repr(v)[:40])
def test_spark_runner_refuses_bad_options_when_made(
    options: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(sb.PipelineError) as caught:
        sb.SparkRunner(**options)
    message = str(caught.value)
    assert message.startswith("SparkRunner: ")
    for text in named:
        assert text in message
    assert "py4j" not in message.lower() and "java" not in message.lower()


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[1]",
        "local[*]",
        "local[2,3]",
        "local[*,4]",
        "yarn",
        "spark://host:7077",
        "spark://a:7077,b:7077",
        "k8s://https://host:443",
        "mesos://host:5050",
        "sc://localhost:15002",
        "local-cluster[2,1,1024]",
    ],
)
def test_spark_runner_takes_every_master_form(master: str) -> None:
    assert sb.SparkRunner(master=master).master == master


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.sql.session.timeZone", zone)
        for zone in (
            "UTC",
            "Europe/Berlin",
            "America/Los_Angeles",
            "+01:00",
            "-08",
            "GMT+1",
            "Z",
            "PST",
        )
    ]
    + [
        ("spark.sql.shuffle.partitions", 4),
        ("spark.driver.memory", "2g"),
        ("spark.ui.enabled", False),
        ("spark.sql.autoBroadcastJoinThreshold", "-1"),
        ("spark.some.unknown.setting", "anything"),
    ],
)
def test_spark_runner_takes_valid_conf(key: str, value: Any) -> None:
    runner = sb.SparkRunner(conf={key: value})
    assert runner.conf[key] == (str(value).lower() if isinstance(value, bool) else str(value))


@pytest.mark.parametrize(
    "trigger",
    [
        "10 seconds",
        "1 minute",
        "500 milliseconds",
        "interval 2 seconds",
        "1 minute 30 seconds",
        "0 seconds",
    ],
)
def test_spark_runner_takes_spark_trigger_intervals(trigger: str) -> None:
    assert sb.SparkRunner(trigger=trigger).trigger == trigger


def test_a_session_that_does_not_start_is_a_pipeline_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Spark checks only when it starts (here: a failing builder) names master and conf."""
    from pyspark.sql import SparkSession

    from sparkbeam.runners.spark import runner as spark_runner

    class Failing:
        def master(self, _: str) -> Failing:
            return self

        def appName(self, _: str) -> Failing:
            return self

        def config(self, *_: str) -> Failing:
            return self

        def getOrCreate(self) -> None:
            raise RuntimeError(
                "java.lang.IllegalArgumentException: bad value\n\tat org.apache.spark.X(X.java:1)"
            )

    monkeypatch.setattr(spark_runner, "active_session", lambda: None)
    monkeypatch.setattr(SparkSession, "builder", Failing())
    runner = sb.SparkRunner(master="local[1]", conf={"spark.executor.extraJavaOptions": "-Xbad"})
    with pytest.raises(sb.PipelineError) as caught:
        runner.spark  # noqa: B018
    message = str(caught.value)
    assert "master='local[1]'" in message and "spark.executor.extraJavaOptions='-Xbad'" in message
    assert "IllegalArgumentException: bad value" in message
    assert "java.lang" not in message and "X.java" not in message


@pytest.mark.parametrize(
    ("runner", "named"),
    [
        (5, ["runner=5", "'direct'"]),
        (sb.DirectRunner, ["runner=DirectRunner", "DirectRunner()"]),
        (sb.SparkRunner, ["runner=SparkRunner", "SparkRunner()"]),
        ("flink", ["'flink'", "direct"]),
    ],
    ids=["int", "direct-class", "spark-class", "unknown-name"],
)
def test_pipeline_refuses_what_is_not_a_runner(runner: Any, named: list[str]) -> None:
    with pytest.raises(sb.PipelineError) as caught:
        sb.Pipeline(runner=runner)
    for text in named:
        assert text in str(caught.value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"parallelism": MAX_PARALLELISM + 1},
            [f"parallelism={MAX_PARALLELISM + 1}", f"at most {MAX_PARALLELISM}"],
        ),
        ({"parallelism": 10**6}, [f"parallelism={10**6}"]),
        ({"rescale": {0: 200}}, ["epoch 0=200", f"at most {MAX_PARALLELISM}"]),
        ({"parallelism": 0}, ["parallelism", ">= 1", "0"]),
        ({"parallelism": "2"}, ["parallelism", "'2'"]),
        ({"check_invariants": "yes"}, ["check_invariants='yes'"]),
    ],
    ids=repr,
)
def test_direct_runner_refuses_bad_options_when_made(
    options: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(sb.PipelineError) as caught:
        sb.DirectRunner(**options)
    for text in named:
        assert text in str(caught.value)


def test_direct_runner_runs_at_its_largest_parallelism_bound_is_allowed() -> None:
    assert sb.DirectRunner(parallelism=MAX_PARALLELISM).plan.parallelism == MAX_PARALLELISM


ROWS = [{"k": "a", "v": 1, "t": dt.datetime(2026, 4, 1, 10, 0)}]


def _orders(directory: Any) -> str:
    """A directory of orders, written by the direct runner."""
    path = str(directory / "orders")
    with sb.Pipeline() as p:
        p | sb.Create(ROWS) | sb.WriteFiles(path)
    return path


@pytest.mark.parametrize(
    ("read", "write"),
    [
        ("orders", "orders"),
        ("orders", "orders/"),
        ("orders", "./x/../orders"),
        ("orders", "orders/sub"),
        ("orders", ""),
        ("orders/", "file://{tmp}/orders"),
    ],
    ids=["same", "trailing-slash", "dots", "inside-input", "around-input", "file-uri"],
)
def test_a_pipeline_that_writes_what_it_reads_is_refused(
    runner: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, read: str, write: str
) -> None:
    """Issue 19, item 1: on Spark, overwriting the input emptied it before it was read."""
    _orders(tmp_path)
    monkeypatch.chdir(tmp_path)
    target = write.format(tmp=tmp_path) or str(tmp_path)
    p = sb.Pipeline(runner=runner)
    (p | sb.ReadFiles(read)).write_files(target, mode="overwrite")
    with pytest.raises(sb.PipelineError) as caught:
        p.run()
    message = str(caught.value)
    assert message.startswith("WriteFiles(") and "ReadFiles(orders)" in message
    assert repr(target) in message and "another path" in message
    assert len(_read_back(tmp_path / "orders")) == 1  # the input is still there


def _read_back(path: Any) -> list[dict[str, Any]]:
    with sb.Pipeline() as p:
        rows = p | sb.ReadFiles(str(path))
    return p.result.collect(rows)


def test_two_writes_to_one_path_are_refused(runner: Any, tmp_path: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create(ROWS)
    rows | "first" >> sb.WriteFiles(str(tmp_path / "out"))
    rows | "second" >> sb.WriteFiles(str(tmp_path / "out" / "more"))
    with pytest.raises(sb.PipelineError, match=r"second: .* overlaps the output of first"):
        p.run()


def test_mode_error_is_checked_every_run(runner: Any, tmp_path: Any) -> None:
    """Issue 19, item 10: run twice, the direct runner overwrote silently and Spark raised a
    bare `AnalysisException [PATH_ALREADY_EXISTS]`."""
    target = str(tmp_path / "out")
    p = sb.Pipeline(runner=runner)
    (p | sb.Create(ROWS)).write_files(target, mode="error")
    p.run()
    assert len(_read_back(target)) == 1
    with pytest.raises(sb.PipelineError) as caught:
        p.run()
    message = str(caught.value)
    assert message.startswith("WriteFiles(out): ") and repr(target) in message
    assert "mode='error'" in message and "mode='overwrite'" in message
    assert "PATH_ALREADY_EXISTS" not in message


@pytest.mark.parametrize("on", ["direct", pytest.param("spark", marks=pytest.mark.spark)])
def test_mode_error_is_checked_every_run_of_a_streaming_sink(
    on: str, tmp_path: Any, request: Any
) -> None:
    """Issue 19, item 10, on unbounded input: the second run of a streaming `WriteFiles` with
    no checkpoint to resume from is refused, before any query starts, on both runners."""
    runner = request.getfixturevalue("spark_runner") if on == "spark" else sb.DirectRunner()
    target = str(tmp_path / "out")
    start = dt.datetime(2026, 4, 1, 10)
    stream = sb.TestStream({"n": int, "t": dt.datetime})
    stream.add_epoch([{"n": 1, "t": start}, {"n": 2, "t": start + dt.timedelta(minutes=1)}])
    p = sb.Pipeline(runner=runner)
    marked = p | stream | sb.WithWatermark("t", delay=dt.timedelta(0))
    marked | "Saved" >> sb.WriteFiles(target, format="json", mode="error")
    p.run()
    schema = {"n": int, "t": dt.datetime}
    with sb.Pipeline() as check:
        saved = check | sb.ReadFiles(target, format="json", schema=schema)
    assert sorted(row["n"] for row in check.result.collect(saved)) == [1, 2]
    with pytest.raises(sb.PipelineError) as caught:
        p.run()
    message = str(caught.value)
    assert message.startswith("Saved: ") and repr(target) in message
    assert "mode='error'" in message
    assert "PATH_ALREADY_EXISTS" not in message and "java." not in message
    with sb.Pipeline() as again:
        kept = again | sb.ReadFiles(target, format="json", schema=schema)
    assert sorted(row["n"] for row in again.result.collect(kept)) == [1, 2]


def test_a_pcollection_added_after_the_run_is_not_in_its_result(runner: Any) -> None:
    """Issue 19, item 10: a bare `KeyError: 1` on Spark."""
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create(ROWS)
    result = p.run()
    later = rows.select("k")
    with pytest.raises(sb.PipelineError, match=r"added to the pipeline after this result's run"):
        result.collect(later)
    assert result.collect(rows) == ROWS


@pytest.mark.parametrize(
    ("apply", "named"),
    [
        (lambda rows: rows.session("t", gap=60, keys=5), "Session: keys=5"),
        (lambda rows: rows.combine_per_key(None, n=sb.Count()), "CombinePerKey: keys=None"),
        (lambda rows: rows.combine_per_key(["k", 1], n=sb.Count()), "CombinePerKey: keys=['k', 1]"),
        (lambda rows: rows.sort("t", keys=5), "Sort: keys=5"),
        (lambda rows: rows.join(rows, on=None), "Join: on=None"),
    ],
    ids=["session", "combine-none", "combine-not-str", "sort", "join"],
)
def test_keys_that_are_not_column_names_are_refused(apply: Any, named: str) -> None:
    """Issue 19: `Session(keys=5)` and `combine_per_key(None, ...)` gave a bare `TypeError`."""
    p = sb.Pipeline()
    rows = (p | sb.Create(ROWS)).with_watermark("t", delay=0)
    with pytest.raises(sb.PipelineError) as caught:
        apply(rows)
    assert str(caught.value).startswith(named) and "column name" in str(caught.value)


@pytest.mark.spark
def test_conf_that_a_given_session_does_not_have_is_refused(spark: Any) -> None:
    """Issue 19: `conf=` was silently ignored when `spark=` was given. The runner changes no
    setting of a session it did not start, so a differing `conf` is refused; one the session
    already has is fine."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    assert sb.SparkRunner(spark=spark, conf={"spark.sql.session.timeZone": zone}).conf
    with pytest.raises(sb.PipelineError) as caught:
        sb.SparkRunner(spark=spark, conf={"spark.sql.shuffle.partitions": "13"})
    message = str(caught.value)
    assert "spark.sql.shuffle.partitions='2' (not '13')" in message
    assert "spark.conf.set" in message and "leave spark= out" in message


class Doubles(sb.CombineFn):
    """A user `CombineFn`, given as its class where an instance is meant."""

    output_type = int

    def create_accumulator(self) -> int:
        return 0

    def add_input(self, accumulator: int, element: dict[str, Any]) -> int:
        return accumulator + 2 * element["v"]

    def merge_accumulators(self, accumulators: Any) -> int:
        return sum(accumulators)

    def extract_output(self, accumulator: int) -> int:
        return accumulator


def _returns_nothing(rows: sb.PCollection) -> None:
    """A helper that builds a PCollection and forgets to return it."""
    rows.filter(sb.col("v") > 0)


MISTAKES = {
    # an aggregate, a transform or an expression function given without calling it
    "aggregate class": (
        lambda p, rows: rows.combine_per_key("k", n=sb.Count),
        ["CombinePerKey(k)", "n=Count", "call it: n=sb.Count()"],
    ),
    "aggregate class with a column": (
        lambda p, rows: rows.combine_per_key("k", s=sb.Sum),
        ["CombinePerKey(k)", "s=Sum", "call it: s=sb.Sum(column)"],
    ),
    "CombineFn class": (
        lambda p, rows: rows.combine_per_key("k", d=Doubles),
        ["CombinePerKey(k)", "d=Doubles", "call it: d=Doubles()"],
    ),
    "transform class": (
        lambda p, rows: rows | sb.Map,
        ["class Map", "call it: sb.Map(fn)"],
    ),
    "transform class with arguments": (
        lambda p, rows: rows | sb.Sort,
        ["class Sort", "call it: sb.Sort(column)"],
    ),
    "source class": (lambda p, rows: p | sb.Create, ["class Create", "call it: sb.Create(rows)"]),
    "aggregate as a transform": (
        lambda p, rows: rows | sb.Count(),
        ["Count(column=None)", "aggregate", "sb.CombinePerKey(keys, name="],
    ),
    "function as a transform": (
        lambda p, rows: rows | (lambda row: row),
        ["function '<lambda>'", "sb.Map(fn)"],
    ),
    "late_rows as a transform": (
        lambda p, rows: rows | sb.late_rows,
        ["sb.late_rows(pcoll)", "call it: pcoll.late_rows()"],
    ),
    "expression method": (
        lambda p, rows: rows.filter(sb.col("k").is_null),
        ["Filter", "col('k').is_null", "call it: Filter(col('k').is_null())"],
    ),
    "expression function": (
        lambda p, rows: rows.with_columns(x=sb.col),
        ["Select", "sb.col", "call it: sb.col(name)"],
    ),
    # a transform applied to the pipeline, to nothing, or expanded by hand
    "Map on the pipeline": (
        lambda p, rows: p | sb.Map(len),
        ["Map(len)", "applied to the pipeline", "pcoll | transform"],
    ),
    "window on the pipeline": (
        lambda p, rows: p | sb.Tumble("t", "1 minute"),
        ["Tumble(t)", "applied to the pipeline", "p | sb.Create(rows)"],
    ),
    "Join on the pipeline": (
        lambda p, rows: p | sb.Join(rows, "k"),
        ["Join(k)", "applied to the pipeline", "left | sb.Join(right, on=...)"],
    ),
    "Union on the pipeline": (
        lambda p, rows: p | sb.Union(rows),
        ["Union", "got 1 input", "a | sb.Union(b)"],
    ),
    "Partition on the pipeline": (
        lambda p, rows: p | sb.Partition(lambda row, n: 0, 2),
        ["Partition(<lambda>)", "0 inputs", "pcoll | sb.Partition(fn, n)"],
    ),
    "None | transform": (
        lambda p, rows: _returns_nothing(rows) | sb.Map(len),
        ["Map(len)", "applied to None", "without return", "pcoll | transform"],
    ),
    "None | labelled transform": (
        lambda p, rows: None | "lengths" >> sb.Map(len),
        ["lengths", "applied to None", "pcoll | transform"],
    ),
    "expand(None)": (
        lambda p, rows: sb.Map(len).expand(None),  # type: ignore[arg-type]
        ["Map(len)", "expand(None)", "pcoll | Map(...)"],
    ),
    "late_rows(None)": (
        lambda p, rows: sb.late_rows(None),  # type: ignore[arg-type]
        ["late_rows", "got None", "give the PCollection"],
    ),
    "Union of the pipeline": (
        lambda p, rows: rows.union(p),
        ["Union", "got the Pipeline", "p | sb.Create(rows)"],
    ),
    "Join of a transform": (
        lambda p, rows: rows.join(sb.Create(ROWS), "k"),  # type: ignore[arg-type]
        ["Join", "got the transform Create", "(... | sb.Create(rows))"],
    ),
    "a result asked about None": (
        lambda p, rows: p.run().collect(None),  # type: ignore[arg-type]
        ["DirectResult", "got None", "give the PCollection"],
    ),
    "a result asked about the pipeline": (
        lambda p, rows: p.run().late_count(p),  # type: ignore[arg-type]
        ["DirectResult", "got the Pipeline", "p | sb.Create(rows)"],
    ),
    "assert_that(None)": (
        lambda p, rows: sb.assert_that(None, sb.equal_to([])),  # type: ignore[arg-type]
        ["assert_that", "got None"],
    ),
    # an aggregate given an expression (or anything else) for a column name
    "aggregate of an expression": (
        lambda p, rows: rows.combine_per_key("k", n=sb.Count(sb.col("v"))),
        ["CombinePerKey(k)", "column=Col(name='v')", "not a column name", "n=sb.Count('v')"],
    ),
    "MaxBy of a number": (
        lambda p, rows: rows.combine_per_key("k", top=sb.MaxBy("v", 3)),
        ["CombinePerKey(k)", "by=3", "top=sb.MaxBy('v', 'by')"],
    ),
    # bools where durations and whole numbers belong
    "delay=True": (
        lambda p, rows: rows.with_watermark("t", True),
        ["WithWatermark(t)", "delay True is a bool", "'5 minutes'"],
    ),
    "size=True on an integer column": (
        lambda p, rows: rows.with_watermark("v", 0).tumble("v", True),
        ["Tumble(v)", "size True is a bool", "an integer in the unit of 'v', such as 5"],
    ),
    "within=(True, 2)": (
        lambda p, rows: rows.join(rows, "k", times=("v", "v"), within=(True, 2)),
        ["Join(k)", "within (lower bound) True is a bool", "such as 5"],
    ),
    "n=True": (
        lambda p, rows: rows.partition(lambda r, n: 0, True),
        ["n=True is a bool", "(fn, 2)"],
    ),
    "substr(True, 2)": (
        lambda p, rows: rows.with_columns(s=sb.col("k").substr(True, 2)),
        ["substr(True, 2)", "not bools", "substr(1, 3)"],
    ),
    # durations written as numbers Spark's interval strings do not take
    "1e3 seconds": (
        lambda p, rows: rows.with_watermark("t", "1e3 seconds"),
        ["WithWatermark(t)", "'1e3'", "'1e3 seconds'", "not a plain number", "'1000 seconds'"],
    ),
    "1,000 seconds in a shift": (
        lambda p, rows: rows.with_columns(later=sb.col("t") + "1,000 seconds"),
        ["Select", "'1,000'", "not a plain number", "'1000 seconds'"],
    ),
    ".5 hours": (
        lambda p, rows: rows.session("t", ".5 hours"),
        ["Session(t)", "gap", "'.5'", "'0.5 hours'"],
    ),
    # schemas: the output schema named as such, the transform named
    "keeps outside the output schema": (
        lambda p, rows: rows.map(lambda row: {"n": 1}, schema={"n": int}, keeps=["t"]),
        ["Map(<lambda>) keeps", "'t'", "the output schema (schema=) has columns ['n']", "add 't'"],
    ),
    "keeps that changes type": (
        lambda p, rows: rows.map(
            lambda row: row, schema={"k": str, "v": float, "t": dt.datetime}, keeps=["v"]
        ),
        ["Map(<lambda>)", "keeps='v'", "makes it float", "input has int", "'v': int"],
    ),
    "a source's type that is no column type": (
        lambda p, rows: p | "more" >> sb.Create([], schema={"k": dict}),
        ["Create: column 'k'", "type dict", "object"],
    ),
    "a type that is no column type": (
        lambda p, rows: rows.map(lambda row: row, schema={"k": list[str]}),
        ["Map: column 'k'", "list[str]", "object"],
    ),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_mistake_is_named_with_what_to_write_instead(mistake: str) -> None:
    """Issue 30, item 5: right but unhelpful messages. Each names the transform and the value
    given, and says what to write instead."""
    build, named = MISTAKES[mistake]
    p = sb.Pipeline()
    rows = p | sb.Create(ROWS)
    with pytest.raises(sb.PipelineError) as caught:
        build(p, rows)
    message = str(caught.value)
    for text in named:
        assert text in message, f"{text!r} not in {message!r}"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"parallelism": True}, ["parallelism=True is a bool", "parallelism=2"]),
        ({"checkpoint_every": False}, ["checkpoint_every=False is a bool", "checkpoint_every=2"]),
    ],
    ids=repr,
)
def test_direct_runner_refuses_bools_for_numbers(options: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(sb.PipelineError) as caught:
        sb.DirectRunner(**options)
    for text in named:
        assert text in str(caught.value)
