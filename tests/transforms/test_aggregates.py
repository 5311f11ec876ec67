"""CountDistinct, CollectSet, MinBy, MaxBy, Any, All (SPEC section 7) against brute force.

Each aggregate is checked against a reference written straight from the SPEC's table,
on both runners, over bounded input (`Create`) and unbounded input (`TestStream`, one
group per window and key), with `None`s, NaNs and ties in the data.
"""

from __future__ import annotations

import functools
import math
import random
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import RowCount
from tests.agreement.streams import outcome, side_by_side
from tests.agreement.test_streaming import assert_runs_agree, run_fully

NAN = float("nan")
START = datetime(2026, 4, 1, 10, 0)
COLUMNS = {"k": str, "i": int, "x": float, "s": str, "t": datetime, "b": bool, "e": datetime}
VALUES: dict[str, list[Any]] = {
    "i": [None, -3, 0, 2, 2, 7],
    "x": [None, NAN, -1.5, 0.25, 0.25, 3.0, math.inf],
    "s": [None, "", "fig", "pear", "pear", "Äpfel"],
    "t": [None, START, START + timedelta(microseconds=1), START + timedelta(days=400)],
    "b": [None, True, False, False],
}


def make_rows(seed: int, count: int) -> list[dict[str, Any]]:
    """Rows over keys a-d; key `d` has only None values; `e` is an event time."""
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        k = rng.choice("abcd")
        row: dict[str, Any] = {"k": k}
        for name, values in VALUES.items():
            row[name] = None if k == "d" else rng.choice(values)
        row["e"] = START + timedelta(minutes=rng.randrange(0, 3), seconds=n)
        rows.append(row)
    return rows


# --- the reference, from SPEC section 7 -----------------------------------------------


def _compare(a: Any, b: Any) -> int:
    """Spark's order: None least, NaN greatest, then the values' own order."""
    rank_a = 0 if a is None else 2 if a != a else 1
    rank_b = 0 if b is None else 2 if b != b else 1
    if rank_a != rank_b or rank_a != 1:
        return rank_a - rank_b
    return -1 if a < b else 1 if a > b else 0


def _distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if value is not None and not any(_compare(value, seen) == 0 for seen in out):
            out.append(value)
    return out


def _value_by(rows: list[dict[str, Any]], value: str, by: str, sign: int) -> Any:
    with_by = [row for row in rows if row[by] is not None]
    if not with_by:
        return None

    def order(r1: dict[str, Any], r2: dict[str, Any]) -> int:
        return sign * (_compare(r1[by], r2[by]) or _compare(r1[value], r2[value]))

    return sorted(with_by, key=functools.cmp_to_key(order))[0][value]


def _boolean(values: list[Any], combine: Any) -> Any:
    present = [v for v in values if v is not None]
    return combine(present) if present else None


AGGREGATES: dict[str, tuple[Any, Any]] = {
    # name: (aggregate, reference over the group's rows)
    "distinct_i": (sb.CountDistinct("i"), lambda rows: len(_distinct([r["i"] for r in rows]))),
    "distinct_x": (sb.CountDistinct("x"), lambda rows: len(_distinct([r["x"] for r in rows]))),
    "distinct_t": (sb.CountDistinct("t"), lambda rows: len(_distinct([r["t"] for r in rows]))),
    "set_x": (
        sb.CollectSet("x"),
        lambda rows: sorted(_distinct([r["x"] for r in rows]), key=functools.cmp_to_key(_compare)),
    ),
    "set_s": (
        sb.CollectSet("s"),
        lambda rows: sorted(_distinct([r["s"] for r in rows]), key=functools.cmp_to_key(_compare)),
    ),
    "set_t": (
        sb.CollectSet("t"),
        lambda rows: sorted(_distinct([r["t"] for r in rows]), key=functools.cmp_to_key(_compare)),
    ),
    "s_by_i": (sb.MinBy("s", "i"), lambda rows: _value_by(rows, "s", "i", 1)),
    "x_by_i": (sb.MaxBy("x", "i"), lambda rows: _value_by(rows, "x", "i", -1)),
    "t_by_x": (sb.MinBy("t", "x"), lambda rows: _value_by(rows, "t", "x", 1)),
    "i_by_x": (sb.MaxBy("i", "x"), lambda rows: _value_by(rows, "i", "x", -1)),
    "i_by_b": (sb.MaxBy("i", "b"), lambda rows: _value_by(rows, "i", "b", -1)),
    "any_b": (sb.Any("b"), lambda rows: _boolean([r["b"] for r in rows], any)),
    "all_b": (sb.All("b"), lambda rows: _boolean([r["b"] for r in rows], all)),
}


def canonical(value: Any) -> Any:
    """NaN as a string, lists as tuples: rows become comparable and hashable."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, list):
        return tuple(canonical(v) for v in value)
    return value


def canonical_rows(rows: list[dict[str, Any]]) -> list[tuple[tuple[str, Any], ...]]:
    return sorted(
        (tuple((k, canonical(v)) for k, v in row.items()) for row in rows),
        key=repr,
    )


def reference(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    return [
        {**dict(zip(keys, key, strict=True)), **{n: f(group) for n, (_, f) in AGGREGATES.items()}}
        for key, group in groups.items()
    ]


def aggregates() -> dict[str, Any]:
    return {name: aggregate for name, (aggregate, _) in AGGREGATES.items()}


# --- bounded and unbounded input, both runners ------------------------------------------


ROWS = make_rows(seed=17, count=120)


def test_reference_data_has_ties_nones_and_nans() -> None:
    assert any(row["x"] != row["x"] for row in ROWS)
    assert all(row["i"] is None for row in ROWS if row["k"] == "d")
    assert len({row["k"] for row in ROWS}) == 4


def test_each_aggregate_matches_the_reference_on_bounded_input(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(ROWS, schema=COLUMNS) | sb.CombinePerKey("k", **aggregates())
    got = p.run().collect(out)
    assert canonical_rows(got) == canonical_rows(reference(ROWS, ("k",)))


def test_each_aggregate_matches_the_reference_on_a_global_group(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(ROWS, schema=COLUMNS) | sb.CombinePerKey((), **aggregates())
    got = p.run().collect(out)
    assert canonical_rows(got) == canonical_rows(reference(ROWS, ()))


def windowed(p: sb.Pipeline, epochs: list[list[dict[str, Any]]]) -> sb.PCollection:
    stream = sb.TestStream(COLUMNS)
    for rows in epochs:
        stream.add_epoch(rows)
    return (
        p
        | stream
        | sb.WithWatermark("e", delay=timedelta(0))
        | sb.Tumble("e", size="1 minute")
        | sb.CombinePerKey(["window_start", "k"], **aggregates())
    )


def window_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "window_start": row["e"].replace(second=0)} for row in rows]


def unbounded_rows(runner: Any) -> list[dict[str, Any]]:
    """Every aggregate per window and key over `ROWS` in three epochs, collected."""
    rows = sorted(ROWS, key=lambda row: row["e"])
    epochs = [rows[:40], rows[40:80], rows[80:]]
    p = sb.Pipeline(runner=runner)
    out = windowed(p, epochs)
    return p.run().collect(out)


@pytest.mark.parametrize("runner_name", ["direct", pytest.param("spark", marks=pytest.mark.spark)])
def test_each_aggregate_matches_the_reference_on_unbounded_input(
    runner_name: str, request: pytest.FixtureRequest
) -> None:
    if runner_name == "spark":
        got = outcome(request.getfixturevalue("spark_streams"), "unbounded")
    else:
        got = unbounded_rows(sb.DirectRunner())
    rows = sorted(ROWS, key=lambda row: row["e"])
    assert canonical_rows(got) == canonical_rows(
        reference(window_rows(rows), ("window_start", "k"))
    )


# --- the rules one at a time --------------------------------------------------------------


def combine(rows: list[dict[str, Any]], schema: Any = None, **aggs: Any) -> list[dict[str, Any]]:
    p = sb.Pipeline()
    out = p | sb.Create(rows, schema=schema) | sb.CombinePerKey("k", **aggs)
    return p.run().collect(out)


def test_min_by_and_max_by_break_ties_by_value_with_none_least() -> None:
    rows = [
        {"k": 1, "v": "b", "by": 1},
        {"k": 1, "v": None, "by": 1},
        {"k": 1, "v": "a", "by": 1},
        {"k": 1, "v": "z", "by": None},
        {"k": 1, "v": "c", "by": 0},
        {"k": 1, "v": "q", "by": 0},
    ]
    out = combine(rows, lo=sb.MinBy("v", "by"), hi=sb.MaxBy("v", "by"))
    assert out == [{"k": 1, "lo": "c", "hi": "b"}]


def test_min_by_is_none_when_no_row_has_a_by() -> None:
    rows = [{"k": 1, "v": "a", "by": None}]
    out = combine(rows, {"k": int, "v": str, "by": int}, lo=sb.MinBy("v", "by"))
    assert out == [{"k": 1, "lo": None}]


def test_nan_is_one_value_and_the_largest() -> None:
    rows = [{"k": 1, "x": v} for v in (NAN, 1.0, float("nan"), -2.0)]
    out = combine(rows, n=sb.CountDistinct("x"), xs=sb.CollectSet("x"), top=sb.MaxBy("x", "x"))
    assert canonical_rows(out) == canonical_rows(
        [{"k": 1, "n": 3, "xs": [-2.0, 1.0, NAN], "top": NAN}]
    )


def test_over_only_nones() -> None:
    rows = [{"k": 1, "b": None}]
    out = combine(
        rows,
        {"k": int, "b": bool},
        n=sb.CountDistinct("b"),
        bs=sb.CollectSet("b"),
        any=sb.Any("b"),
        all=sb.All("b"),
    )
    assert out == [{"k": 1, "n": 0, "bs": [], "any": None, "all": None}]


def test_collect_set_column_is_a_list_column() -> None:
    p = sb.Pipeline()
    out = p | sb.Create([{"k": 1, "s": "a"}]) | sb.CombinePerKey("k", ss=sb.CollectSet("s"))
    kind = out.schema.type_of("ss")
    assert issubclass(kind, list)
    assert sb.Schema.of({"ss": kind}).describe() == "ss: list[str]"


def test_repeated_values_count_once() -> None:
    rows = [{"k": 1, "x": 1.0}, {"k": 1, "x": 2.0}, {"k": 1, "x": 1.0}]
    assert combine(rows, n=sb.CountDistinct("x"), xs=sb.CollectSet("x")) == [
        {"k": 1, "n": 2, "xs": [1.0, 2.0]}
    ]


# --- refused when applied --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        (sb.Any("i"), "needs a bool column"),
        (sb.All("s"), "needs a bool column"),
        (sb.CountDistinct("nope"), "unknown column 'nope'"),
        (sb.MinBy("s", "nope"), "unknown column 'nope'"),
        (sb.MaxBy("nope", "i"), "unknown column 'nope'"),
    ],
)
def test_wrong_columns_are_refused_when_applied(aggregate: Any, message: str) -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"k": "a", "i": 1, "s": "x"}])
    with pytest.raises(sb.PipelineError, match=message):
        rows | sb.CombinePerKey("k", out=aggregate)


def python_path_rows(runner: Any, bounded: bool) -> list[dict[str, Any]]:
    """Every aggregate per window and key next to a `CombineFn` (`RowCount`), over `ROWS`
    bounded or in two epochs, collected."""
    rows = sorted(ROWS, key=lambda row: row["e"])
    p = sb.Pipeline(runner=runner)
    if bounded:
        source = p | sb.Create(rows, schema=COLUMNS)
    else:
        stream = sb.TestStream(COLUMNS)
        for part in (rows[:60], rows[60:]):
            stream.add_epoch(part)
        source = p | stream | sb.WithWatermark("e", delay=timedelta(0))
    out = source.tumble("e", size="1 minute").combine_per_key(
        ["window_start", "k"], **aggregates(), rows=RowCount()
    )
    return p.run().collect(out)


@pytest.mark.parametrize("bounded", [True, False])
@pytest.mark.parametrize("runner_name", ["direct", pytest.param("spark", marks=pytest.mark.spark)])
def test_next_to_a_combine_fn_on_the_python_path(
    runner_name: str, bounded: bool, request: pytest.FixtureRequest
) -> None:
    if runner_name == "spark" and not bounded:
        got = outcome(request.getfixturevalue("spark_streams"), "python path")
    elif runner_name == "spark":
        got = python_path_rows(request.getfixturevalue("spark_runner"), bounded)
    else:
        got = python_path_rows(sb.DirectRunner(), bounded)
    rows = sorted(ROWS, key=lambda row: row["e"])
    want = reference(window_rows(rows), ("window_start", "k"))
    counts: dict[tuple[Any, ...], int] = {}
    for row in window_rows(rows):
        key = (row["window_start"], row["k"])
        counts[key] = counts.get(key, 0) + 1
    want = [{**row, "rows": counts[(row["window_start"], row["k"])]} for row in want]
    assert canonical_rows(got) == canonical_rows(want)


@pytest.mark.parametrize(
    "runner",
    [
        sb.DirectRunner(parallelism=2, checkpoint_every=1, fail_at=2),
        sb.DirectRunner(parallelism=3, schedule="random", seed=3),
    ],
    ids=["checkpoint-and-failure", "parallel-random"],
)
def test_parallel_units_and_recovery_keep_the_aggregates(runner: Any) -> None:
    """Each group's sets and best rows survive a checkpoint, a failure and a restore."""
    rows = sorted(ROWS, key=lambda row: row["e"])
    p = sb.Pipeline(runner=runner)
    out = windowed(p, [rows[:40], rows[40:80], rows[80:]])
    got = p.run().collect(out)
    assert canonical_rows(got) == canonical_rows(
        reference(window_rows(rows), ("window_start", "k"))
    )


def test_collect_set_in_frames_is_a_typed_list_column() -> None:
    p = sb.Pipeline()
    rows = [{"k": 1, "t": START}, {"k": 2, "t": None}]
    out = (
        p
        | sb.Create(rows, schema={"k": int, "t": datetime})
        | sb.CombinePerKey("k", ts=sb.CollectSet("t"))
    )
    table = p.run().to_arrow(out)
    assert str(table.schema.field("ts").type) == "list<item: timestamp[us]>"
    assert table.column("ts").to_pylist() == [[START], []]


def test_an_aggregate_may_be_named_keys() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"k": 1, "s": "a"}])
    out = rows.combine_per_key("k", keys=sb.CollectSet("s"))
    same = rows | sb.CombinePerKey("k", keys=sb.CollectSet("s"))
    result = p.run()
    assert result.collect(out) == result.collect(same) == [{"k": 1, "keys": ["a"]}]


def per_session(p: sb.Pipeline) -> tuple[dict[str, sb.PCollection], list[Any]]:
    """Sessions then the aggregates per session: on Spark streaming, one keyed-state step
    computes both (`session_then_combine`), with the runners' shared Python tables."""
    rows = sorted(ROWS, key=lambda row: row["e"])
    stream = sb.TestStream(COLUMNS)
    for part in (rows[:50], rows[50:]):
        stream.add_epoch(part)
    marked = (p | stream).with_watermark("e", "10 seconds")
    sessions = marked.session("e", "20 seconds", keys="k").combine_per_key(
        ["window_start", "k"], **aggregates()
    )
    return {"sessions": sessions}, [marked]


@pytest.mark.spark
def test_runners_agree_on_the_aggregates_per_session_streaming(
    spark_streams: dict[str, Any],
) -> None:
    """The Spark run emits the direct run's rows in the same epochs and drops the same late
    and invalid rows (`assert_runs_agree`)."""
    direct = run_fully(per_session, sb.DirectRunner(), False)
    assert_runs_agree(direct, outcome(spark_streams, "per session"), False, False)


SPARK_STREAMS: dict[str, Any] = {
    "unbounded": unbounded_rows,
    "python path": functools.partial(python_path_rows, bounded=False),
    "per session": functools.partial(run_fully, per_session, metrics=False),
}
"""The module's Spark streaming runs, by name: each takes the Spark runner."""


@pytest.fixture(scope="module")
def spark_streams(spark_runner: Any) -> dict[str, Any]:
    """Each of `SPARK_STREAMS` on Spark, `SIDE_BY_SIDE` pipelines at once: what it returned,
    or the error it raised (each test reads its own)."""
    return side_by_side(
        {name: functools.partial(run, spark_runner) for name, run in SPARK_STREAMS.items()}
    )
