"""`Join(other, on, how)`: window joins and interval joins on the direct runner.

Rules under test (SPEC section 4 and `transforms.join`):
- output columns: the keys, the left's other columns, the right's (clashing
  names get `suffix`);
- window join (a key watermarked on both sides): once the minimum of both
  sides' watermarks passes a key's value, its state is dropped and the
  unmatched rows of the outer side(s) are emitted; output watermarks on such
  keys are the minimum of both sides;
- interval join (`times=`, `within=(lower, upper)`, both inclusive): a left row
  is dropped once the right's watermark exceeds `left_time + upper`, a right
  row once the left's watermark exceeds `right_time - lower`;
- unbounded joins that no watermark can clean are refused when applied.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb
from tests.agreement.streams import outcome, side_by_side

HOWS = ["inner", "left", "right", "full"]
T0 = datetime(2026, 4, 1, 12, 0)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def stream(
    *epochs: Sequence[dict[str, Any]], schema: dict[str, type] | None = None
) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def marks(result: Any, pcoll: sb.PCollection, column: str) -> list[Any]:
    return [w.value for w in result.watermarks(pcoll) if w.column == column]


# Window joins.


def _window_join(p: sb.Pipeline, how: str) -> sb.PCollection:
    left = (
        (
            p
            | "left"
            >> stream(
                [{"user": "u1", "t": 1}, {"user": "u3", "t": 3}],
                [{"user": "u1", "t": 15}],
            )
        )
        .with_watermark("t", 0)
        .tumble("t", 10)
    )
    right = (
        (
            p
            | "right"
            >> stream(
                [{"user": "u2", "t": 2}, {"user": "u3", "t": 4}],
                [{"user": "u2", "t": 12}],
            )
        )
        .with_watermark("t", 0)
        .tumble("t", 10)
    )
    return left.join(right, on=["user", "window_start"], how=how)


def _left(user: str, t: int) -> dict[str, Any]:
    start = t - t % 10
    return {
        "user": user,
        "window_start": start,
        "t": t,
        "window_end": start + 10,
        "t_right": None,
        "window_end_right": None,
    }


def _right(user: str, t: int) -> dict[str, Any]:
    start = t - t % 10
    return {
        "user": user,
        "window_start": start,
        "t": None,
        "window_end": None,
        "t_right": t,
        "window_end_right": start + 10,
    }


MATCHED = {
    "user": "u3",
    "window_start": 0,
    "t": 3,
    "window_end": 10,
    "t_right": 4,
    "window_end_right": 10,
}


@pytest.mark.parametrize(
    ("how", "epoch1", "flush"),
    [
        ("inner", [], []),
        ("left", [_left("u1", 1)], [_left("u1", 15)]),
        ("right", [_right("u2", 2)], [_right("u2", 12)]),
        ("full", [_left("u1", 1), _right("u2", 2)], [_left("u1", 15), _right("u2", 12)]),
    ],
)
def test_window_join_emits_unmatched_rows_when_both_watermarks_pass(
    how: str, epoch1: list[dict[str, Any]], flush: list[dict[str, Any]]
) -> None:
    with sb.Pipeline() as p:
        joined = _window_join(p, how)
    result = p.result
    assert joined.schema.names == (
        "user",
        "window_start",
        "t",
        "window_end",
        "t_right",
        "window_end_right",
    )
    by_epoch = result.collect_by_epoch(joined)
    # A match goes out as soon as its second row arrives.
    assert by_epoch[0] == [MATCHED]
    # Window 0 is cleaned in epoch 1, when both sides' window_start watermark reach 10.
    assert Counter(map(str, by_epoch[1])) == Counter(map(str, epoch1))
    assert Counter(map(str, by_epoch[2])) == Counter(map(str, flush))
    assert marks(result, joined, "window_start") == [0, 10]
    assert joined.watermarked_columns == frozenset({"window_start"})
    assert result.state_size(joined) == 0


def test_window_join_output_watermark_is_the_minimum_of_both_sides() -> None:
    with sb.Pipeline() as p:
        left = (
            (p | "left" >> stream([{"k": 1, "t": 25}], [{"k": 1, "t": 27}]))
            .with_watermark("t", 0)
            .tumble("t", 10)
        )
        right = (
            (p | "right" >> stream([{"k": 1, "t": 12}], [{"k": 1, "t": 35}]))
            .with_watermark("t", 0)
            .tumble("t", 10)
        )
        joined = left.join(right, on=["k", "window_start", "window_end"], how="full")
    result = p.result
    assert marks(result, left, "window_start") == [20]
    assert marks(result, right, "window_start") == [10, 30]
    assert marks(result, joined, "window_start") == [10, 20]
    assert marks(result, joined, "window_end") == [20, 30]
    assert marks(result, joined, "k") == []
    assert joined.watermarked_columns == frozenset({"window_start", "window_end"})
    # The four rows are in three different windows: nothing matches.
    assert len(result.collect(joined)) == 4


def test_window_join_keeps_state_while_only_one_side_has_passed() -> None:
    # The left's watermark runs ahead; the right's stays at window 0 until the
    # last epoch, so nothing can be cleaned before then.
    with sb.Pipeline() as p:
        left = (
            (p | "left" >> stream([{"k": 1, "t": 1}], [{"k": 2, "t": 55}], [{"k": 3, "t": 95}]))
            .with_watermark("t", 0)
            .tumble("t", 10)
        )
        right = (
            (p | "right" >> stream([{"k": 9, "t": 2}], [{"k": 9, "t": 3}], [{"k": 9, "t": 61}]))
            .with_watermark("t", 0)
            .tumble("t", 10)
        )
        joined = left.join(right, on=["k", "window_start"], how="left")
    result = p.result
    by_epoch = [sorted(r["k"] for r in rows) for rows in result.collect_by_epoch(joined)]
    # Window 0 (k=1) goes when both reach 60; window 50 (k=2) too; k=3 at the end.
    assert by_epoch == [[], [], [1, 2], [3]]
    assert marks(result, joined, "window_start") == [0, 60]
    assert result.peak_state_size(joined) == 6


def test_window_join_state_stays_bounded_on_a_long_stream() -> None:
    epochs = 40
    left_ts, right_ts = sb.TestStream(), sb.TestStream()
    for i in range(epochs):
        left_ts.add_epoch([{"k": i % 3, "t": 10 * i + 1, "a": i}])
        right_ts.add_epoch([{"k": i % 3, "t": 10 * i + 2, "b": i}, {"k": 9, "t": 10 * i, "b": -1}])
    with sb.Pipeline() as p:
        left = (p | "left" >> left_ts).with_watermark("t", 0).tumble("t", 10)
        right = (p | "right" >> right_ts).with_watermark("t", 0).tumble("t", 10)
        joined = left.join(right, on=["k", "window_start"], how="left")
    result = p.result
    rows = result.collect(joined)
    assert sorted((r["a"], r["b"]) for r in rows) == [(i, i) for i in range(epochs)]
    # Each epoch's window is cleaned at the end of the next epoch: at most two
    # epochs of rows (3 each) are held at once.
    assert result.peak_state_size(joined) <= 6
    assert result.state_size(joined) == 0


def test_suffix_for_clashing_right_columns(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        left = p | "left" >> sb.Create([{"k": 1, "v": 10, "x": "l"}])
        right = p | "right" >> sb.Create([{"k": 1, "v": 20, "y": "r"}])
        joined = left.join(right, on="k", suffix="_r")
    assert joined.schema.names == ("k", "v", "x", "v_r", "y")
    assert p.result.collect(joined) == [{"k": 1, "v": 10, "x": "l", "v_r": 20, "y": "r"}]


def test_suffix_that_still_clashes_is_refused() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1, "v": 1, "v_right": 2}])
    right = p | "right" >> sb.Create([{"k": 1, "v": 3}])
    with pytest.raises(sb.PipelineError, match="'v' clashes with 'v_right'"):
        left.join(right, on="k")


# Interval joins: purchases within 10 minutes after a click.


def _clicks_and_purchases(
    p: sb.Pipeline,
    clicks: list[list[dict[str, Any]]],
    purchases: list[list[dict[str, Any]]],
    how: str = "inner",
) -> tuple[sb.PCollection, sb.PCollection, sb.PCollection]:
    click_schema = {"user": str, "click_time": datetime}
    purchase_schema = {"user": str, "purchase_time": datetime, "amount": float}
    left = (p | "clicks" >> stream(*clicks, schema=click_schema)).with_watermark(
        "click_time", "0 minutes"
    )
    right = (p | "purchases" >> stream(*purchases, schema=purchase_schema)).with_watermark(
        "purchase_time", "0 minutes"
    )
    joined = left.join(
        right,
        on="user",
        how=how,
        times=("click_time", "purchase_time"),
        within=("0 minutes", "10 minutes"),
    )
    return left, right, joined


def test_interval_join_matches_within_the_bounds_inclusive() -> None:
    clicks = [[{"user": "a", "click_time": minutes(0)}, {"user": "b", "click_time": minutes(0)}]]
    purchases = [
        [
            {"user": "a", "purchase_time": minutes(0), "amount": 1.0},  # at the click: in
            {"user": "a", "purchase_time": minutes(10), "amount": 2.0},  # exactly 10 min: in
            {"user": "a", "purchase_time": minutes(10.5), "amount": 3.0},  # too late
            {"user": "b", "purchase_time": minutes(5), "amount": 4.0},  # in
            {"user": "c", "purchase_time": minutes(5), "amount": 5.0},  # other user
        ]
    ]
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(p, clicks, purchases)
    assert joined.schema.names == ("user", "click_time", "purchase_time", "amount")
    assert sorted((r["user"], r["amount"]) for r in p.result.collect(joined)) == [
        ("a", 1.0),
        ("a", 2.0),
        ("b", 4.0),
    ]


def test_interval_join_purchase_before_click_does_not_match() -> None:
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [[], [{"user": "a", "click_time": minutes(5)}]],
            [[{"user": "a", "purchase_time": minutes(4), "amount": 1.0}], []],
        )
    assert p.result.collect(joined) == []


def test_interval_join_drops_state_once_a_match_is_impossible() -> None:
    # Each epoch: a click at 20*i minutes and a purchase 5 minutes later.
    # After epoch i+1 the right's watermark (20*(i+1) + 5) is past click + 10
    # and the left's (20*(i+1)) past the purchase: both rows of epoch i go.
    epochs = 30
    clicks = [[{"user": "a", "click_time": minutes(20 * i)}] for i in range(epochs)]
    purchases = [
        [{"user": "a", "purchase_time": minutes(20 * i + 5), "amount": float(i)}]
        for i in range(epochs)
    ]
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(p, clicks, purchases)
    result = p.result
    rows = result.collect(joined)
    assert sorted(r["amount"] for r in rows) == [float(i) for i in range(epochs)]
    assert all(r["purchase_time"] - r["click_time"] == timedelta(minutes=5) for r in rows)
    # Held at most: the previous epoch's two rows and this epoch's two.
    assert result.peak_state_size(joined) == 4
    assert result.state_size(joined) == 0


def test_interval_join_keeps_a_click_while_a_match_is_still_possible() -> None:
    # The right's watermark reaches click + 10 minutes exactly: a purchase at
    # click + 10 minutes is still possible, so the click is kept and matches.
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [[{"user": "a", "click_time": minutes(0)}], [], []],
            [
                [{"user": "z", "purchase_time": minutes(10), "amount": 0.0}],
                [{"user": "a", "purchase_time": minutes(10), "amount": 1.0}],
                [{"user": "z", "purchase_time": minutes(11), "amount": 0.0}],
            ],
            how="left",
        )
    by_epoch = p.result.collect_by_epoch(joined)
    assert [(r["user"], r["amount"]) for r in by_epoch[1]] == [("a", 1.0)]
    assert by_epoch[0] == by_epoch[2] == by_epoch[3] == []


def test_left_interval_join_emits_an_unmatched_click_when_the_purchase_window_closes() -> None:
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [[{"user": "a", "click_time": minutes(0)}], [], []],
            [
                [{"user": "z", "purchase_time": minutes(3), "amount": 0.0}],
                [{"user": "z", "purchase_time": minutes(10), "amount": 0.0}],  # wm 10: kept
                [
                    {
                        "user": "z",
                        "purchase_time": minutes(10) + timedelta(milliseconds=1),
                        "amount": 0.0,
                    }
                ],  # wm 10:00.001 > click + 10 minutes
            ],
            how="left",
        )
    by_epoch = p.result.collect_by_epoch(joined)
    assert by_epoch[:2] == [[], []]
    assert by_epoch[2] == [
        {"user": "a", "click_time": minutes(0), "purchase_time": None, "amount": None}
    ]
    assert by_epoch[3] == []


def test_right_interval_join_emits_an_unmatched_purchase_when_no_click_can_come() -> None:
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [
                [{"user": "z", "click_time": minutes(1)}],
                [{"user": "z", "click_time": minutes(5)}],  # wm 5 = purchase - 0: kept
                [{"user": "z", "click_time": minutes(6)}],  # wm 6 > 5: dropped, emitted
            ],
            [[{"user": "a", "purchase_time": minutes(5), "amount": 7.0}], [], []],
            how="right",
        )
    by_epoch = p.result.collect_by_epoch(joined)
    assert by_epoch[:2] == [[], []]
    assert by_epoch[2] == [
        {"user": "a", "click_time": None, "purchase_time": minutes(5), "amount": 7.0}
    ]


@pytest.mark.parametrize("how", ["inner", "right"])
def test_interval_join_does_not_hold_a_row_that_cannot_match(how: str) -> None:
    # After epoch 0 the clicks' watermark is 12:10. A purchase at 12:05 in
    # epoch 1 is not late for its own stream, but no click at 12:10 or later
    # can be at most 0 minutes before it: a match is already impossible, so
    # it is not kept (and, unmatched, a right join emits it at once), even
    # though the clicks' watermark does not move again before the end.
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [[{"user": "z", "click_time": minutes(10)}], []],
            [[], [{"user": "a", "purchase_time": minutes(5), "amount": 7.0}]],
            how=how,
        )
    result = p.result
    assert result.peak_state_size(joined) == 1  # only the click, which can still match
    unmatched = {"user": "a", "click_time": None, "purchase_time": minutes(5), "amount": 7.0}
    assert result.collect_by_epoch(joined) == [[], [unmatched] if how == "right" else [], []]


@pytest.mark.parametrize("how", ["inner", "left"])
def test_interval_join_does_not_hold_a_click_whose_purchase_window_has_passed(how: str) -> None:
    # After epoch 0 the purchases' watermark is 12:30. A click at 12:15 in
    # epoch 1 could only match purchases up to 12:25: none can come.
    with sb.Pipeline() as p:
        _, _, joined = _clicks_and_purchases(
            p,
            [[], [{"user": "a", "click_time": minutes(15)}]],
            [[{"user": "z", "purchase_time": minutes(30), "amount": 1.0}], []],
            how=how,
        )
    result = p.result
    assert result.peak_state_size(joined) == 1  # only the purchase, which can still match
    unmatched = {"user": "a", "click_time": minutes(15), "purchase_time": None, "amount": None}
    assert result.collect_by_epoch(joined) == [[], [unmatched] if how == "left" else [], []]


def test_interval_join_with_bounded_inputs_needs_no_watermark(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        left = p | "left" >> sb.Create([{"k": 1, "lt": 10}, {"k": 1, "lt": 20}])
        right = p | "right" >> sb.Create([{"k": 1, "rt": 12}, {"k": 2, "rt": 12}])
        joined = left.join(right, on="k", how="full", times=("lt", "rt"), within=(-5, 5))
    assert sorted(map(str, p.result.collect(joined))) == sorted(
        map(
            str,
            [
                {"k": 1, "lt": 10, "rt": 12},
                {"k": 1, "lt": 20, "rt": None},
                {"k": 2, "lt": None, "rt": 12},
            ],
        )
    )


# Errors, when the join is applied.


def test_unknown_join_key_names_the_transform_and_column() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1, "a": 1}])
    right = p | "right" >> sb.Create([{"key": 1, "b": 1}])
    with pytest.raises(sb.PipelineError) as info:
        left | "match orders" >> sb.Join(right, on="k")
    message = str(info.value)
    assert "match orders" in message
    assert "right" in message
    assert "unknown column 'k'" in message
    assert "['key', 'b']" in message  # what to pick from
    with pytest.raises(sb.PipelineError, match=r"left side\) key: unknown column 'key'"):
        left.join(right, on="key")


def test_join_key_type_mismatch_is_refused() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1}])
    right = p | "right" >> sb.Create([{"k": "1"}])
    with pytest.raises(sb.PipelineError) as info:
        left | "typed" >> sb.Join(right, on="k")
    message = str(info.value)
    assert "typed" in message
    assert "'k' is int on the left but str on the right" in message
    assert "convert" in message


def test_unbounded_join_without_a_watermark_names_the_missing_one() -> None:
    p = sb.Pipeline()
    left = (p | "left" >> stream([{"k": 1, "t": 1}])).with_watermark("t", 0)
    right = p | "right" >> stream([{"k": 1, "t": 1}])
    with pytest.raises(sb.PipelineError) as info:
        left | "forever" >> sb.Join(right, on=["k", "t"])
    message = str(info.value)
    assert "forever" in message
    assert "'t' has none on the right side" in message
    assert "'k' has none on the left and right side" in message
    assert "with_watermark" in message
    assert "times=" in message


def test_unbounded_interval_join_needs_watermarks_on_both_times() -> None:
    p = sb.Pipeline()
    left = (p | "left" >> stream([{"k": 1, "lt": 1}])).with_watermark("lt", 0)
    right = p | "right" >> stream([{"k": 1, "rt": 1}])
    with pytest.raises(sb.PipelineError, match="keep state forever"):
        left.join(right, on="k", times=("lt", "rt"), within=(0, 5))
    right_wm = right.with_watermark("rt", 0)
    joined = left.join(right_wm, on="k", times=("lt", "rt"), within=(0, 5))
    assert not joined.bounded


def test_bad_join_kind_is_refused() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1}])
    right = p | "right" >> sb.Create([{"k": 1}])
    with pytest.raises(sb.PipelineError) as info:
        left | "kinds" >> sb.Join(right, on="k", how="outer")
    message = str(info.value)
    assert "kinds" in message
    assert "'outer'" in message
    assert "['inner', 'left', 'right', 'full']" in message


def test_times_without_within_and_within_without_times_are_refused() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1, "t": 1}])
    right = p | "right" >> sb.Create([{"k": 1, "t": 1}])
    with pytest.raises(sb.PipelineError, match=r"within=\(lower, upper\)"):
        left.join(right, on="k", times=("t", "t"))
    with pytest.raises(sb.PipelineError, match=r"times=\(left_time, right_time\)"):
        sb.Join(right, on="k", within=(0, 1))


def test_bad_interval_bounds_and_time_columns_are_refused() -> None:
    p = sb.Pipeline()
    left = p | "left" >> sb.Create([{"k": 1, "t": 1, "s": "x"}])
    right = p | "right" >> sb.Create([{"k": 1, "t": 1}])
    with pytest.raises(sb.PipelineError, match="is empty"):
        left.join(right, on="k", times=("t", "t"), within=(5, 1))
    with pytest.raises(sb.PipelineError, match="'s' is str"):
        left.join(right, on="k", times=("s", "t"), within=(0, 1))
    with pytest.raises(sb.PipelineError, match="key column"):
        left.join(right, on=[])


# Properties: the join equals a brute-force nested loop.

KEYS = st.one_of(st.none(), st.integers(0, 3))


def _nested_loop(
    left: list[dict[str, Any]],
    right: list[dict[str, Any]],
    on: Sequence[str],
    how: str,
    columns: Sequence[str],
    match: Any = None,
) -> Counter[tuple[Any, ...]]:
    """The reference: every matching pair, then the unmatched rows the kind keeps."""
    out: Counter[tuple[Any, ...]] = Counter()
    left_hit = [False] * len(left)
    right_hit = [False] * len(right)
    for i, lrow in enumerate(left):
        for j, rrow in enumerate(right):
            same = all(lrow[k] is not None and lrow[k] == rrow[k] for k in on)
            if same and (match is None or match(lrow, rrow)):
                left_hit[i] = right_hit[j] = True
                out[tuple({**rrow, **lrow}[c] for c in columns)] += 1
    if how in ("left", "full"):
        for lrow, hit in zip(left, left_hit, strict=True):
            if not hit:
                out[tuple(lrow.get(c) for c in columns)] += 1
    if how in ("right", "full"):
        for rrow, hit in zip(right, right_hit, strict=True):
            if not hit:
                out[tuple(rrow.get(c) for c in columns)] += 1
    return out


@given(
    left=st.lists(KEYS, max_size=8),
    right=st.lists(KEYS, max_size=8),
    how=st.sampled_from(HOWS),
)
def test_bounded_join_equals_nested_loop(
    left: list[int | None], right: list[int | None], how: str
) -> None:
    left_rows = [{"k": k, "a": i} for i, k in enumerate(left)]
    right_rows = [{"k": k, "b": i} for i, k in enumerate(right)]
    with sb.Pipeline() as p:
        lp = p | "left" >> sb.Create(left_rows, schema={"k": int, "a": int})
        rp = p | "right" >> sb.Create(right_rows, schema={"k": int, "b": int})
        joined = lp.join(rp, on="k", how=how)
    columns = ("k", "a", "b")
    got = Counter(tuple(r[c] for c in columns) for r in p.result.collect(joined))
    assert got == _nested_loop(left_rows, right_rows, ["k"], how, columns)


def _epochs(draw: st.DrawFn, time_column: str, id_column: str) -> list[list[dict[str, Any]]]:
    raw = draw(
        st.lists(
            st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40)), max_size=4),
            min_size=1,
            max_size=5,
        )
    )
    epochs, n = [], 0
    for rows in raw:
        epochs.append([{"k": k, time_column: t, id_column: n + i} for i, (k, t) in enumerate(rows)])
        n += len(rows)
    return epochs


@st.composite
def window_case(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "left": _epochs(draw, "w", "a"),
        "right": _epochs(draw, "w", "b"),
        "delays": (draw(st.integers(0, 10)), draw(st.integers(0, 10))),
        "how": draw(st.sampled_from(HOWS)),
    }


def _marks_after_each_epoch(
    epochs: list[list[dict[str, Any]]], column: str, delay: int, total: int
) -> list[int | None]:
    out: list[int | None] = []
    top: int | None = None
    for index in range(total):
        for row in epochs[index] if index < len(epochs) else []:
            top = row[column] if top is None else max(top, row[column])
        out.append(None if top is None else top - delay)
    return out


def _arrival(result: Any, pcoll: sb.PCollection, id_column: str) -> dict[int, int]:
    return {
        row[id_column]: index
        for index, rows in enumerate(result.collect_by_epoch(pcoll))
        for row in rows
    }


@given(window_case())
def test_window_join_equals_nested_loop_and_keeps_invariant_w(case: dict[str, Any]) -> None:
    how = case["how"]
    total = max(len(case["left"]), len(case["right"]))
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=True))
    left = p | "left" >> stream(*case["left"], schema={"k": int, "w": int, "a": int})
    right = p | "right" >> stream(*case["right"], schema={"k": int, "w": int, "b": int})
    left = left.with_watermark("w", case["delays"][0])
    right = right.with_watermark("w", case["delays"][1])
    joined = left.join(right, on=["k", "w"], how=how)
    result = p.run()  # InvariantViolation if any edge breaks invariant W

    kept_left, kept_right = result.collect(left), result.collect(right)
    columns = ("k", "w", "a", "b")
    got = Counter(tuple(r[c] for c in columns) for r in result.collect(joined))
    assert got == _nested_loop(kept_left, kept_right, ["k", "w"], how, columns)

    # Timing: a match when its second row arrives; an unmatched row in the
    # first epoch after which both sides' watermarks on w exceed its w.
    left_marks = _marks_after_each_epoch(case["left"], "w", case["delays"][0], total)
    right_marks = _marks_after_each_epoch(case["right"], "w", case["delays"][1], total)
    merged = [
        None if lm is None or rm is None else min(lm, rm)
        for lm, rm in zip(left_marks, right_marks, strict=True)
    ]
    left_at, right_at = _arrival(result, left, "a"), _arrival(result, right, "b")
    for index, rows in enumerate(result.collect_by_epoch(joined)):
        for r in rows:
            if r["a"] is not None and r["b"] is not None:
                expected = max(left_at[r["a"]], right_at[r["b"]])
            else:
                expected = next(
                    (i for i, m in enumerate(merged) if m is not None and m > r["w"]), total
                )
            assert index == expected, (r, merged)

    out = marks(result, joined, "w")
    ends = [m for m in merged if m is not None]
    assert set(ends) <= set(out)
    assert out[-1:] == ends[-1:]
    assert marks(result, joined, "k") == []
    assert result.state_size(joined) == 0


@st.composite
def interval_case(draw: st.DrawFn) -> dict[str, Any]:
    lower = draw(st.integers(-8, 8))
    return {
        "left": _epochs(draw, "lt", "a"),
        "right": _epochs(draw, "rt", "b"),
        "delays": (draw(st.integers(0, 10)), draw(st.integers(0, 10))),
        "within": (lower, lower + draw(st.integers(0, 10))),
        "how": draw(st.sampled_from(HOWS)),
    }


@given(interval_case())
def test_interval_join_equals_nested_loop(case: dict[str, Any]) -> None:
    how = case["how"]
    lower, upper = case["within"]
    total = max(len(case["left"]), len(case["right"]))
    p = sb.Pipeline()
    left = p | "left" >> stream(*case["left"], schema={"k": int, "lt": int, "a": int})
    right = p | "right" >> stream(*case["right"], schema={"k": int, "rt": int, "b": int})
    left = left.with_watermark("lt", case["delays"][0])
    right = right.with_watermark("rt", case["delays"][1])
    joined = left.join(right, on="k", how=how, times=("lt", "rt"), within=case["within"])
    result = p.run()

    kept_left, kept_right = result.collect(left), result.collect(right)
    columns = ("k", "lt", "a", "rt", "b")
    got = Counter(tuple(r[c] for c in columns) for r in result.collect(joined))
    expected = _nested_loop(
        kept_left,
        kept_right,
        ["k"],
        how,
        columns,
        match=lambda lrow, rrow: lrow["lt"] + lower <= rrow["rt"] <= lrow["lt"] + upper,
    )
    assert got == expected

    # Unmatched rows go out once the other side's watermark makes a match
    # impossible. (Rows that arrive when a match is already impossible are
    # covered by test_interval_join_does_not_hold_a_row_that_cannot_match.)
    left_marks = _marks_after_each_epoch(case["left"], "lt", case["delays"][0], total)
    right_marks = _marks_after_each_epoch(case["right"], "rt", case["delays"][1], total)
    left_at, right_at = _arrival(result, left, "a"), _arrival(result, right, "b")
    for index, rows in enumerate(result.collect_by_epoch(joined)):
        for r in rows:
            if r["a"] is None:
                bound, other, arrived = r["rt"] - lower, left_marks, right_at[r["b"]]
            elif r["b"] is None:
                bound, other, arrived = r["lt"] + upper, right_marks, left_at[r["a"]]
            else:
                assert index == max(left_at[r["a"]], right_at[r["b"]])
                continue
            first = next((i for i, m in enumerate(other) if m is not None and m > bound), total)
            if first >= arrived:
                assert index == first, (r, other)
            else:
                assert index >= arrived, (r, other)
    assert result.state_size(joined) == 0


# None keys.


def by_epoch(result: Any, pcoll: sb.PCollection) -> list[list[tuple[Any, ...]]]:
    return [
        sorted((tuple(row.values()) for row in rows), key=repr)
        for rows in result.collect_by_epoch(pcoll)
    ]


def epochs_side_by_side(p: sb.Pipeline, outputs: list[sb.PCollection]) -> list[Any]:
    """Each output's rows by epoch (`by_epoch`); on Spark the outputs' queries side by side."""
    result = p.run()
    if isinstance(p.runner, sb.SparkRunner):
        result.prepare(*outputs)
    return [by_epoch(result, pcoll) for pcoll in outputs]


def none_keys_run(runner: Any) -> list[Any]:
    """Left and full window joins of two streams with a None key on each side, by epoch."""
    schema = {"user": str, "t": int}
    p = sb.Pipeline(runner=runner)
    sides = []
    for name, none_t, u_t in (("left", 1, 2), ("right", 3, 4)):
        first = [{"user": None, "t": none_t}, {"user": "u", "t": u_t}]
        rows = p | name >> stream(first, [{"user": "u", "t": 30}], schema=schema)
        tumbled = rows.with_watermark("t", 0).tumble("t", 10)
        sides.append(tumbled.select("user", "window_start", "t"))
    hows = ("left", "full")  # right is left's mirror; full pairs Nones if anything does
    outputs = [sides[0].join(sides[1], on=["user", "window_start"], how=how) for how in hows]
    return epochs_side_by_side(p, outputs)


@pytest.mark.spark
def test_none_keys_never_match_and_outer_sides_emit_them_at_once(
    spark_streams: dict[str, Any],
) -> None:
    """A row whose key holds None matches nothing, not even another None (SQL); an outer side
    emits it unmatched in the epoch it came, not when the watermark passes its window. Spark
    streaming's join state would pair two None keys and hold them: the same rows there."""
    direct = none_keys_run(sb.DirectRunner())
    assert outcome(spark_streams, "none keys") == direct
    left, full = direct
    # the None-key rows come out in epoch 0, though their window closes only in epoch 1
    matched = [[("u", 0, 2, 4)], [("u", 30, 30, 30)], []]
    assert left == [[*matched[0], (None, 0, 1, None)], *matched[1:]]
    assert full == [[*matched[0], (None, 0, 1, None), (None, 0, None, 3)], *matched[1:]]


# Outer interval joins on Spark streaming.


def _interval_sides(p: sb.Pipeline, right_delay: int | None) -> tuple[Any, Any]:
    """Left rows `a` (watermark delay 20); right rows: of `a` again (`right_delay` None) or of
    a second stream with its own `WithWatermark`."""
    schema = {"k": str, "t": int}
    a = (
        p
        | "a"
        >> stream(
            [{"k": "x", "t": 1}, {"k": "y", "t": 2}],
            [{"k": "x", "t": 20}],
            [{"k": "x", "t": 40}],
            schema=schema,
        )
    ).with_watermark("t", 20)
    if right_delay is None:
        return a, a.filter(sb.col("k") == "x").select("k", u="t")
    b = p | "b" >> stream([{"k": "x", "t": 3}], [{"k": "z", "t": 22}], schema=schema)
    return a, b.with_watermark("t", right_delay).select("k", u="t")


def outer_interval_one_watermark_run(runner: Any) -> list[Any]:
    """Left and full interval joins of one `WithWatermark`'s rows with themselves, by epoch."""
    p = sb.Pipeline(runner=runner)
    a, later = _interval_sides(p, None)
    outputs = [
        a.join(later, on="k", how=how, times=("t", "u"), within=(1, 25)) for how in ("left", "full")
    ]
    return epochs_side_by_side(p, outputs)


@pytest.mark.spark
def test_outer_interval_join_of_one_watermark_agrees_on_spark_streaming(
    spark_streams: dict[str, Any],
) -> None:
    """Both sides' watermarks are one `WithWatermark`'s: Spark's one watermark is each side's,
    and unmatched rows come out in the direct runner's epochs."""
    direct = outer_interval_one_watermark_run(sb.DirectRunner())
    assert outcome(spark_streams, "outer interval, one watermark") == direct
    left, full = direct
    assert left[1:3] == [[("x", 1, 20)], [("x", 20, 40)]]
    # u=1 matches no t in [-24, 0]: out in epoch 2, when the watermark (40 - 20) passes 1 - 1
    assert full[2] == [("x", 20, 40), ("x", None, 1)]
    assert ("y", 2, None) in left[3]  # the end of input: no y on the right


def outer_interval_two_watermarks_run(runner: Any) -> list[list[tuple[Any, ...]]]:
    """A left interval join of two streams, each with its own `WithWatermark`, by epoch."""
    p = sb.Pipeline(runner=runner)
    a, b = _interval_sides(p, 0)
    joined = a.join(b, on="k", how="left", times=("t", "u"), within=(0, 5))
    return by_epoch(p.run(), joined)


@pytest.mark.spark
def test_outer_interval_join_of_two_watermarks_on_spark_streaming_is_late_not_different(
    spark_streams: dict[str, Any],
) -> None:
    """Each side's unmatched rows wait for the other side's watermark (the model); Spark's one
    watermark is the minimum of both. With the outer side's watermark behind (delay 20 against
    0), an unmatched row comes out micro-batches later on Spark: the same rows, each no
    earlier than on the direct runner (documented in docs/decisions.md)."""
    direct = outer_interval_two_watermarks_run(sb.DirectRunner())
    spark = outcome(spark_streams, "outer interval, two watermarks")

    def epoch_of(epochs: list[list[tuple[Any, ...]]]) -> dict[tuple[Any, ...], int]:
        return {row: index for index, rows in enumerate(epochs) for row in rows}

    assert sorted(epoch_of(spark), key=repr) == sorted(epoch_of(direct), key=repr)
    assert all(epoch_of(spark)[row] >= at for row, at in epoch_of(direct).items())
    # y at 2 waits for b's watermark (22 > 2 + 5) in the model: epoch 1, not the flush
    assert epoch_of(direct)[("y", 2, None)] == 1
    assert epoch_of(spark)[("y", 2, None)] > 1


def self_join_of_a_session_run(runner: Any) -> list[list[tuple[int, int, int]]]:
    """A Session of a Union of two `WithWatermark`s joined with itself, by epoch."""
    with sb.Pipeline(runner=runner) as p:
        a = (p | "a" >> stream([{"k": 1, "t": 1}], [{"k": 1, "t": 30}])).with_watermark("t", 0)
        b = (p | "b" >> stream([{"k": 2, "t": 2}], [{"k": 2, "t": 40}])).with_watermark("t", 0)
        sessions = a.union(b).session("t", 5)
        joined = sessions.join(sessions.filter(lambda row: True), on=["window_end"])
    return [
        sorted((r["window_end"], r["k"], r["k_right"]) for r in rows)
        for rows in p.result.collect_by_epoch(joined)
    ]


@pytest.mark.spark
def test_spark_streaming_self_joins_a_session_of_a_union_of_two_watermarks(
    spark_streams: dict[str, Any],
) -> None:
    # The two sides read the same Session of a Union of two `WithWatermark`s. Spark reused the
    # first side's shuffle for the second, which hid the restamped watermarks from its
    # watermark propagation: no session closed and the join emitted nothing.
    direct = self_join_of_a_session_run(sb.DirectRunner())
    # Session [1, 7) holds both first rows and closes when the watermark reaches min(30, 40);
    # the others close at the end of input. Each pairs with every row of its session.
    assert direct == [
        [],
        [(7, 1, 1), (7, 1, 2), (7, 2, 1), (7, 2, 2)],
        [(35, 1, 1), (45, 2, 2)],
    ]
    assert outcome(spark_streams, "self join of a session") == direct


SPARK_STREAMS: dict[str, Any] = {
    "none keys": none_keys_run,
    "outer interval, one watermark": outer_interval_one_watermark_run,
    "outer interval, two watermarks": outer_interval_two_watermarks_run,
    "self join of a session": self_join_of_a_session_run,
}
"""The module's Spark streaming runs, by name: each takes a runner."""


@pytest.fixture(scope="module")
def spark_streams(spark_runner: Any) -> dict[str, Any]:
    """Each of `SPARK_STREAMS` on Spark, `SIDE_BY_SIDE` pipelines at once: what it returned,
    or the error it raised (each test reads its own)."""
    return side_by_side(
        {name: functools.partial(run, spark_runner) for name, run in SPARK_STREAMS.items()}
    )
