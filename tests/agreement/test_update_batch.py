"""`CombinePerKey(emit="update")` on bounded input: the Spark runner (a batch job) gives the
direct runner's change rows, pane columns included.

Bounded input is one epoch, then the end of input: each group has an `"EARLY"` row, then its
`"ON_TIME"` row (the last unless the estimate passed it and the watermark did not), then, in
that case, its `"LATE"` last row at the end of input. The fixed pipelines all run in one
pipeline per runner, once for the module; the random ones compare both runners on a few
examples.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkbeam as sb
from tests.agreement.pipelines import row_multiset
from tests.agreement.streams import KeysSeen

pytestmark = pytest.mark.spark

Row = dict[str, Any]
EPOCH = datetime(2026, 1, 1)
TIMED = {"k": str, "t": datetime, "v": int}
FLOATS = {"x": float, "t": int, "v": int}


def at(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


ROWS = [
    {"k": "a", "t": at(1), "v": 1},
    {"k": "b", "t": at(6), "v": 2},
    {"k": "a", "t": at(12), "v": 3},
    {"k": "b", "t": at(17), "v": 4},
    {"k": "c", "t": at(25), "v": 5},
    {"k": None, "t": at(3), "v": 6},
    {"k": "a", "t": None, "v": 7},
]
"""The largest time is 25 s: with a delay of 2 s the estimate is 23 s, and with 5 s of
lateness the watermark 18 s; the 10 s window is on time (its end, 20 s, is at most 23 s) but
not closed (20 s is past 18 s): it has a `"LATE"` last row at the end of input."""

FILE_ROWS = [
    {"k": "a", "t": 2, "v": 1},
    {"k": "b", "t": 9, "v": 2},
    {"k": "a", "t": 14, "v": 3},
    {"k": "c", "t": 21, "v": 4},
]
"""Read from a JSON file (bounded `ReadFiles`): the largest time is 21, the estimate 18 (a
delay of 3) and the watermark 14 (a lateness of 4)."""

FLOAT_KEYS = [
    {"x": math.nan, "t": 1, "v": 1},
    {"x": float("nan"), "t": 2, "v": 2},
    {"x": -0.0, "t": 3, "v": 3},
    {"x": 0.0, "t": 4, "v": 4},
    {"x": None, "t": 5, "v": 5},
    {"x": 1.5, "t": 30, "v": 6},
]


def naive(value: Any) -> Any:
    """A UTC timestamp read from parquet as the runners give it: naive, in UTC."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


Build = Callable[[sb.Pipeline, str], dict[str, sb.PCollection]]


KEPT = ("window_start", "window_end", "pane_timing", "pane_index", "pane_is_last")


def doubling() -> Callable[[Row], Row]:
    """A `Map` function doubling the count (made in a function, for Spark's workers)."""

    def double(row: Row) -> Row:
        return {**row, "n": 2 * row["n"]}

    return double


def fixed(p: sb.Pipeline, directory: str, calls: list[list[Row]]) -> dict[str, sb.PCollection]:
    """Every fixed case of the module, by name, in one pipeline; the rows a `ForEachBatch`
    gets go to `calls`."""
    rows = p | "rows" >> sb.Create(ROWS, TIMED)
    marked = rows.with_watermark("t", "2 seconds", allowed_lateness="5 seconds")
    plain = (p | "plain" >> sb.Create(ROWS, TIMED)).with_watermark("t", "2 seconds")
    tumbled = marked.tumble("t", "10 seconds")
    sums = {"total": sb.Sum("v"), "n": sb.Count()}
    tumble = tumbled.combine_per_key(["window_start", "k"], emit="update", **sums)
    hop = plain.hop("t", "10 seconds", "5 seconds").combine_per_key(
        ["window_start"], emit="update", total=sb.Sum("v")
    )
    running = marked.combine_per_key("k", emit="update", total=sb.Sum("v"), top=sb.Max("t"))
    closed = tumbled.combine_per_key(["window_start", "k"], **sums)
    on_time = tumble.filter(sb.col("pane_timing") == "ON_TIME")
    tumble.write_files(f"{directory}/changes", format="parquet")
    floats = (p | "floats" >> sb.Create(FLOAT_KEYS, FLOATS)).with_watermark("t", 0)
    float_keys = floats.combine_per_key("x", emit="update", total=sb.Sum("v"))
    empty = (p | "empty" >> sb.Create([], TIMED)).with_watermark("t", "1 second")
    nothing = empty.tumble("t", "10 seconds").combine_per_key(
        ["window_start"], emit="update", n=sb.Count()
    )
    other = (p | "other" >> sb.Create([{"k": "d", "t": at(40), "v": 8}], TIMED)).with_watermark(
        "t", "2 seconds"
    )
    merged = plain.union(other).tumble("t", "10 seconds")
    union = merged.combine_per_key(["window_end"], emit="update", n=sb.Count())
    files = f"{directory}/input"
    os.makedirs(files)
    with open(f"{files}/part-0.json", "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in FILE_ROWS)
    read = p | "read" >> sb.ReadFiles(files, "json", schema={"k": str, "t": int, "v": int})
    read_marked = read.with_watermark("t", 3, allowed_lateness=4)
    seen = {"seen": KeysSeen(), "n": sb.Count()}
    in_files = read_marked.hop("t", 10, 5).combine_per_key(
        ["window_start", "window_end"], emit="update", **seen
    )
    whole = read_marked.combine_per_key([], emit="update", **seen)
    doubled = in_files.map(doubling(), schema=in_files.schema, keeps=KEPT)
    doubled.for_each_batch(lambda rows, batch: calls.append(rows))
    return {
        "in_files": in_files,
        "whole": whole,
        "doubled": doubled,
        "tumble": tumble,
        "hop": hop,
        "running": running,
        "finals": tumble.finals(),
        "closed": closed,
        "on_time": on_time,
        "selected": on_time.select(
            "k", "window_start", "pane_index", "pane_is_last", "pane_timing"
        ),
        "float_keys": float_keys,
        "nothing": nothing,
        "union": union,
    }


def observe(runner: Any, directory: str) -> dict[str, list[Row]]:
    p = sb.Pipeline(runner=runner)
    calls: list[list[Row]] = []
    outputs = fixed(p, directory, calls)
    result = p.run()
    rows = {name: result.collect(output) for name, output in outputs.items()}
    rows["for_each_batch"] = [row for call in calls for row in call]
    files = sorted(glob.glob(f"{directory}/changes/*.parquet"))
    written = [row for file in files for row in pq.read_table(file).to_pylist()]
    rows["written"] = [{name: naive(value) for name, value in row.items()} for row in written]
    return rows


@pytest.fixture(scope="module")
def both(
    spark_runner: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[Row]], dict[str, list[Row]]]:
    """The fixed cases' rows on the direct runner and on Spark."""
    direct = observe(sb.DirectRunner(), str(tmp_path_factory.mktemp("direct")))
    spark = observe(spark_runner, str(tmp_path_factory.mktemp("spark")))
    return direct, spark


def panes(rows: list[Row], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
    """Each group's pane sequence: `(pane_timing, pane_is_last)` by `pane_index`."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        key = tuple(
            "nan" if isinstance(row[k], float) and math.isnan(row[k]) else row[k] for k in keys
        )
        groups.setdefault(key, []).append(row)
    sequences = {}
    for key, group in groups.items():
        group.sort(key=lambda row: row["pane_index"])
        assert [row["pane_index"] for row in group] == list(range(len(group))), key
        assert [row["pane_is_last"] for row in group][-1], key
        assert sum(row["pane_is_last"] for row in group) == 1, key
        sequences[key] = [(row["pane_timing"], row["pane_is_last"]) for row in group]
    return sequences


EARLY_THEN_LAST = [("EARLY", False), ("ON_TIME", True)]
ON_TIME_THEN_LATE = [("EARLY", False), ("ON_TIME", False), ("LATE", True)]

UPDATE_STREAMS = {
    "tumble": ("window_start", "k"),
    "hop": ("window_start",),
    "running": ("k",),
    "float_keys": ("x",),
    "union": ("window_end",),
    "in_files": ("window_start", "window_end"),
    "whole": (),
    "doubled": ("window_start", "window_end"),
}


@pytest.mark.parametrize("name", sorted(UPDATE_STREAMS))
def test_spark_batch_gives_the_direct_runner_s_change_rows(name: str, both: Any) -> None:
    direct, spark = both
    keys = UPDATE_STREAMS[name]
    assert direct[name]
    assert row_multiset(spark[name]) == row_multiset(direct[name])
    assert panes(spark[name], keys) == panes(direct[name], keys)


def test_a_window_the_estimate_passes_and_the_watermark_does_not_closes_late(both: Any) -> None:
    direct, spark = both
    for rows in (direct["tumble"], spark["tumble"]):
        sequences = panes(rows, ("window_start", "k"))
        assert sequences[(at(10), "a")] == ON_TIME_THEN_LATE
        assert sequences[(at(10), "b")] == ON_TIME_THEN_LATE
        assert sequences[(at(0), "a")] == EARLY_THEN_LAST
        assert sequences[(at(20), "c")] == EARLY_THEN_LAST
        late = [row for row in rows if row["pane_timing"] == "LATE"]
        assert {row["total"] for row in late} == {3, 4}


def test_a_hop_row_updates_both_its_windows(both: Any) -> None:
    _, spark = both
    early = {row["window_start"]: row["total"] for row in spark["hop"] if row["pane_index"] == 0}
    assert early[at(0)] == 1 + 2 + 6  # the rows at 1, 3 and 6 s
    assert early[at(5)] == 2 + 3  # the rows at 6 and 12 s


def test_a_running_aggregate_closes_at_the_end_of_input_only(both: Any) -> None:
    _, spark = both
    assert {key: seq for key, seq in panes(spark["running"], ("k",)).items()} == {
        ("a",): EARLY_THEN_LAST,
        ("b",): EARLY_THEN_LAST,
        ("c",): EARLY_THEN_LAST,
        (None,): EARLY_THEN_LAST,
    }


def test_finals_are_the_rows_of_emit_close(both: Any) -> None:
    direct, spark = both
    assert row_multiset(spark["finals"]) == row_multiset(direct["closed"])
    assert row_multiset(spark["closed"]) == row_multiset(direct["closed"])
    assert "pane_index" not in spark["finals"][0]


def test_a_filter_and_a_select_on_pane_columns_downstream(both: Any) -> None:
    direct, spark = both
    for name in ("on_time", "selected"):
        assert row_multiset(spark[name]) == row_multiset(direct[name])
    assert {row["pane_is_last"] for row in spark["on_time"]} == {True, False}


def test_bounded_files_a_user_combine_fn_and_no_keys(both: Any) -> None:
    _, spark = both
    sequences = panes(spark["in_files"], ("window_start", "window_end"))
    assert sequences[(5, 15)] == ON_TIME_THEN_LATE  # its end 15 is past 14, not past 18
    assert sequences[(0, 10)] == EARLY_THEN_LAST
    assert sequences[(10, 20)] == EARLY_THEN_LAST
    assert panes(spark["whole"], ()) == {(): EARLY_THEN_LAST}
    assert {row["seen"] for row in spark["whole"]} == {"a,b,c"}


def test_a_map_and_a_for_each_batch_downstream(both: Any) -> None:
    direct, spark = both
    assert row_multiset(spark["for_each_batch"]) == row_multiset(direct["for_each_batch"])
    assert row_multiset(spark["for_each_batch"]) == row_multiset(spark["doubled"])
    assert {row["n"] for row in spark["doubled"]} == {2 * row["n"] for row in spark["in_files"]}


def test_write_files_writes_the_change_rows(both: Any) -> None:
    direct, spark = both
    assert row_multiset(spark["written"]) == row_multiset(direct["written"])
    assert row_multiset(spark["written"]) == row_multiset(spark["tumble"])


def test_nan_negative_zero_and_none_keys_are_groups_as_on_the_direct_runner(both: Any) -> None:
    _, spark = both
    totals = {
        ("nan" if row["x"] is not None and math.isnan(row["x"]) else row["x"]): row["total"]
        for row in spark["float_keys"]
        if row["pane_is_last"]
    }
    assert totals == {"nan": 3, 0.0: 7, None: 5, 1.5: 6}


def test_an_empty_input_gives_no_rows(both: Any) -> None:
    direct, spark = both
    assert spark["nothing"] == direct["nothing"] == []


# --- random bounded input ---------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Row], int, int, str, tuple[str, ...]]:
    """Rows of integer times, a delay, a lateness, a window and the keys."""
    rows = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "k": st.sampled_from(["a", "b", None]),
                    "t": st.integers(-20, 40),
                    "v": st.integers(-5, 5),
                }
            ),
            max_size=12,
        )
    )
    delay = draw(st.integers(0, 10))
    lateness = draw(st.integers(0, 15))
    window = draw(st.sampled_from(["tumble", "hop", "none"]))
    keys = draw(
        st.sampled_from(
            [("k",), ("t",), ("k", "t")]
            if window == "none"
            else [("window_start",), ("window_start", "k"), ("window_end",)]
        )
    )
    return rows, delay, lateness, window, keys


def random_pipeline(
    runner: Any, case: tuple[list[Row], int, int, str, tuple[str, ...]]
) -> tuple[list[Row], list[Row]]:
    rows, delay, lateness, window, keys = case
    p = sb.Pipeline(runner=runner)
    source = p | sb.Create(rows, {"k": str, "t": int, "v": int})
    marked = source.with_watermark("t", delay, allowed_lateness=lateness)
    if window == "tumble":
        marked = marked.tumble("t", 10)
    elif window == "hop":
        marked = marked.hop("t", 10, 4)
    updates = marked.combine_per_key(list(keys), emit="update", total=sb.Sum("v"), n=sb.Count())
    finals = updates.finals()
    result = p.run()
    return result.collect(updates), result.collect(finals)


@settings(
    # 4, or the deeper run's count (`SPARKBEAM_MORE_EXAMPLES`: tests/conftest.py's "more")
    max_examples=(
        settings.default.max_examples if settings.get_current_profile_name() == "more" else 4
    ),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_random_bounded_update_streams_agree_on_both_runners(case: Any, spark_runner: Any) -> None:
    direct_updates, direct_finals = random_pipeline(sb.DirectRunner(), case)
    spark_updates, spark_finals = random_pipeline(spark_runner, case)
    assert row_multiset(spark_updates) == row_multiset(direct_updates)
    assert row_multiset(spark_finals) == row_multiset(direct_finals)
