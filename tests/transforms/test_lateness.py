"""`WithWatermark(..., allowed_lateness=L)`: the estimate `E = floor_to_ms(max) - delay` and the
watermark `W = E - L`.

Rows below `W` are late; everything but an update-mode `CombinePerKey` sees `W`, so
`emit="close"` behaves exactly as with `delay + L`. Examples and properties on the direct
runner.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkbeam as sb

SCHEMA = {"k": str, "t": int, "v": int}
TIMED = {"k": str, "t": datetime, "v": int}


def stream_of(*epochs: list[dict[str, Any]]) -> sb.TestStream:
    stream = sb.TestStream(SCHEMA)
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


@pytest.fixture
def timed() -> sb.PCollection:
    return sb.Pipeline() | sb.Create([], schema=TIMED)


@pytest.fixture
def numbered() -> sb.PCollection:
    return sb.Pipeline() | sb.Create([], schema=SCHEMA)


@pytest.mark.parametrize(
    "column, lateness, words",
    [
        ("t", "-5 minutes", "positive"),
        ("t", timedelta(minutes=-1), "positive"),
        ("t", timedelta(microseconds=1500), "millisecond"),
        ("t", "5 minuts", "minuts"),
        ("t", True, "True"),
        ("t", 5, "5"),
    ],
)
def test_bad_lateness_on_a_datetime_column_is_refused_when_applied(
    timed: sb.PCollection, column: str, lateness: Any, words: str
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        timed | "wm" >> sb.WithWatermark(column, "1 minute", allowed_lateness=lateness)
    message = str(info.value)
    assert "wm" in message
    assert "allowed_lateness" in message
    assert words in message


@pytest.mark.parametrize("lateness, words", [(-3, "-3"), ("5 minutes", "integer"), (True, "True")])
def test_bad_lateness_on_an_integer_column_is_refused_when_applied(
    numbered: sb.PCollection, lateness: Any, words: str
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        numbered.with_watermark("t", 2, allowed_lateness=lateness)
    message = str(info.value)
    assert "allowed_lateness" in message
    assert words in message


def test_lateness_is_accepted_like_a_delay(timed: sb.PCollection, numbered: sb.PCollection) -> None:
    marked = timed | sb.WithWatermark("t", "1 minute", allowed_lateness="30 minutes")
    assert ("allowed_lateness", "30 minutes") in marked.node.transform.parameters()
    numbered.with_watermark("t", 2, allowed_lateness=5)
    plain = numbered.with_watermark("t", 2)
    assert all(name != "allowed_lateness" for name, _ in plain.node.transform.parameters())


def closed_by_epoch(
    make_runner: Callable[[], sb.DirectRunner],
    epochs: list[list[dict[str, Any]]],
    delay: int,
    lateness: int,
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    with sb.Pipeline(runner=make_runner()) as p:
        marked = (p | stream_of(*epochs)).with_watermark("t", delay, allowed_lateness=lateness)
        sums = marked.tumble("t", 10).combine_per_key(
            ("k", "window_start"), total=sb.Sum("v"), n=sb.Count()
        )
        late = marked.late_rows()
    return p.result.collect_by_epoch(sums), p.result.collect(late)


def ordered(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in rows)


rows = st.fixed_dictionaries(
    {"k": st.sampled_from("ab"), "t": st.integers(0, 60), "v": st.integers(-5, 5)}
)


@pytest.mark.parametrize(
    "make_runner",
    [
        pytest.param(lambda: sb.DirectRunner(), id="one-unit"),
        pytest.param(lambda: sb.DirectRunner(parallelism=3), id="three-units"),
        pytest.param(
            lambda: sb.DirectRunner(parallelism=2, schedule="random", seed=5, checkpoint_every=1),
            id="two-units-random",
        ),
    ],
)
@settings(max_examples=25, deadline=None)
@given(
    epochs=st.lists(st.lists(rows, max_size=6), min_size=1, max_size=5),
    delay=st.integers(0, 8),
    lateness=st.integers(0, 15),
)
def test_close_mode_with_lateness_is_close_mode_with_the_summed_delay(
    make_runner: Callable[[], sb.DirectRunner],
    epochs: list[list[dict[str, Any]]],
    delay: int,
    lateness: int,
) -> None:
    with_lateness, late_with = closed_by_epoch(make_runner, epochs, delay, lateness)
    summed, late_summed = closed_by_epoch(make_runner, epochs, delay + lateness, 0)
    assert [ordered(rows) for rows in with_lateness] == [ordered(rows) for rows in summed]
    assert ordered(late_with) == ordered(late_summed)


RUNNERS = [
    pytest.param(lambda: sb.DirectRunner(), id="one-unit"),
    pytest.param(lambda: sb.DirectRunner(parallelism=3), id="three-units"),
    pytest.param(
        lambda: sb.DirectRunner(parallelism=2, checkpoint_every=1, fail_at=[3, 11]),
        id="failures",
    ),
    pytest.param(lambda: sb.DirectRunner(parallelism=2, rescale={2: 3}), id="rescaled"),
]


def panes_by_epoch(
    make_runner: Callable[[], sb.DirectRunner],
    epochs: list[list[dict[str, Any]]],
    delay: int = 0,
    lateness: int = 10,
) -> tuple[list[list[tuple[Any, ...]]], list[dict[str, Any]]]:
    """Per epoch, the update rows as `(k, window_start, total, timing, index, last)`, sorted."""
    with sb.Pipeline(runner=make_runner()) as p:
        marked = (p | stream_of(*epochs)).with_watermark("t", delay, allowed_lateness=lateness)
        updates = marked.tumble("t", 10).combine_per_key(
            ("k", "window_start"), emit="update", total=sb.Sum("v")
        )
        late = marked.late_rows()
    shown = [
        sorted(
            (
                row["k"],
                row["window_start"],
                row["total"],
                row["pane_timing"],
                row["pane_index"],
                row["pane_is_last"],
            )
            for row in rows
        )
        for rows in p.result.collect_by_epoch(updates)
    ]
    return shown, p.result.collect(late)


def row(t: int, k: str = "a", v: int = 1) -> dict[str, Any]:
    return {"k": k, "t": t, "v": v}


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_on_time_at_the_estimate_late_corrections_until_the_watermark(
    make_runner: Callable[[], sb.DirectRunner],
) -> None:
    # delay 0, lateness 10: after epoch i the estimate is the largest time, the watermark 10 less
    shown, late = panes_by_epoch(
        make_runner, [[row(1)], [row(12)], [row(5)], [row(25)], [row(8)], [row(40)], [row(3)]]
    )
    assert shown == [
        [("a", 0, 1, "EARLY", 0, False)],
        # E = 12 passes window 0, W = 2 does not: on time, not last
        [("a", 0, 1, "ON_TIME", 1, False), ("a", 10, 1, "EARLY", 0, False)],
        # a row inside the lateness corrects the group closed on time
        [("a", 0, 2, "LATE", 2, False)],
        # W = 15 passes window 0: its closing row; E = 25 passes window 10
        [
            ("a", 0, 2, "LATE", 3, True),
            ("a", 10, 1, "ON_TIME", 1, False),
            ("a", 20, 1, "EARLY", 0, False),
        ],
        [],  # 8 is below W = 15: dropped
        # E = 40, W = 30: window 20 is on time and last in one epoch
        [
            ("a", 10, 1, "LATE", 2, True),
            ("a", 20, 1, "ON_TIME", 1, True),
            ("a", 40, 1, "EARLY", 0, False),
        ],
        [],
        [("a", 40, 1, "ON_TIME", 1, True)],  # the end of input
    ]
    assert sorted(r["t"] for r in late) == [3, 8]
    assert sorted(r["late_watermark"] for r in late) == [15, 30]  # W, not the estimate


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_a_group_born_after_the_estimate_passed_it_has_late_rows_only(
    make_runner: Callable[[], sb.DirectRunner],
) -> None:
    shown, late = panes_by_epoch(
        make_runner, [[row(14)], [row(6, "b"), row(7, "b", 2)], [row(9, "b")], [row(30)]]
    )
    assert shown == [
        [("a", 10, 1, "EARLY", 0, False)],
        [("b", 0, 3, "LATE", 0, False)],  # E = 14 passed window 0 before its first row
        [("b", 0, 4, "LATE", 1, False)],
        [
            ("a", 10, 1, "ON_TIME", 1, True),
            ("a", 30, 1, "EARLY", 0, False),
            ("b", 0, 4, "LATE", 2, True),
        ],
        [("a", 30, 1, "ON_TIME", 1, True)],
    ]
    assert late == []


def test_without_lateness_the_estimate_is_the_watermark() -> None:
    with sb.Pipeline() as p:
        marked = (p | stream_of([row(4)], [row(17)])).with_watermark("t", 2)
    marks = p.result.watermarks(marked)
    assert [m.value for m in marks] == [2, 15]
    assert all(m.estimate == m.value for m in marks)


def test_the_estimate_is_derived_through_tumble_and_hop() -> None:
    with sb.Pipeline() as p:
        marked = (p | stream_of([row(4)], [row(17)])).with_watermark("t", 2, allowed_lateness=7)
        tumbled = marked.tumble("t", 10)
        hopped = marked.hop("t", 10, 5)
    result = p.result
    assert [(m.value, m.estimate) for m in result.watermarks(marked)] == [(-5, 2), (8, 15)]

    def on(pc: sb.PCollection, column: str) -> list[tuple[Any, Any]]:
        return [(m.value, m.estimate) for m in result.watermarks(pc) if m.column == column]

    # each window column's rule, evaluated on the value and on the estimate
    assert on(tumbled, "window_end") == [(0, 10), (10, 20)]
    assert on(tumbled, "window_start") == [(-10, 0), (0, 10)]
    assert on(hopped, "window_end") == [(0, 5), (10, 20)]


@pytest.mark.parametrize(
    "policy, expected",
    [
        # epoch 0: slow (3, 3), late (2, 8); epoch 1: slow (9, 9), then late (14, 20)
        ("min", [(2, 3), (2, 8), (9, 9)]),
        ("max", [(3, 3), (3, 8), (9, 9), (14, 20)]),
    ],
)
def test_union_merges_the_estimates_as_the_values(
    policy: str, expected: list[tuple[int, int]]
) -> None:
    with sb.Pipeline() as p:
        slow = (p | "slow" >> stream_of([row(3)], [row(9)])).with_watermark("t", 0)
        late = (p | "late" >> stream_of([row(10)], [row(22)])).with_watermark(
            "t", 2, allowed_lateness=6
        )
        merged = slow.union(late, policy=policy)
    marks = p.result.watermarks(merged)
    got = [(m.value, m.estimate) for m in marks if m.column == "t"]
    assert got == expected


def test_metrics_show_the_estimate_where_it_differs() -> None:
    with sb.Pipeline() as p:
        marked = (p | stream_of([row(4)], [row(17)])).with_watermark("t", 2, allowed_lateness=7)
        plain = (p | "plain" >> stream_of([row(4)])).with_watermark("t", 2)
    metrics = p.result.metrics()
    assert metrics[marked.node.label].watermarks == {"t": 8}
    assert metrics[marked.node.label].watermark_estimates == {"t": 15}
    assert metrics[plain.node.label].watermark_estimates == {}
    assert "t=8 (estimate 15)" in metrics.table()


def test_an_idle_input_is_left_out_of_the_estimate_as_of_the_value() -> None:
    with sb.Pipeline() as p:
        quiet = (p | "quiet" >> stream_of([row(3)], [], [], [])).with_watermark(
            "t", 0, idle_after=1
        )
        busy = (p | "busy" >> stream_of([row(10)], [row(20)], [row(30)], [row(40)])).with_watermark(
            "t", 2, allowed_lateness=6
        )
        merged = quiet.union(busy)
    got = [(m.value, m.estimate) for m in p.result.watermarks(merged) if m.column == "t"]
    assert got[0] == (2, 3)  # both inputs: min(3, 2), min(3, 8)
    assert got[-1] == (32, 38)  # the quiet input idle: the busy one's watermark and estimate
