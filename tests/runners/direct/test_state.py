"""State bounded by the watermark, on the direct runner.

For each stateful operator (CombinePerKey after Tumble, Sort, Session, window
join, interval join) a stream of N epochs and one of 100 * N epochs of the same
periodic data must reach the same peak state (`result.peak_state_size`): the
watermark releases what the operator holds. After the end-of-input flush
nothing is held (`result.state_size` is 0).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import sparkbeam as sb

SHORT = 4
LONG = 100 * SHORT

Build = Callable[[sb.Pipeline, int], sb.PCollection]


def _epochs(
    p: sb.Pipeline, label: str, epochs: int, rows: Callable[[int], list[dict]]
) -> sb.PCollection:
    ts = sb.TestStream()
    for i in range(epochs):
        ts.add_epoch(rows(i))
    return p | label >> ts


def combine_after_tumble(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    rows = _epochs(
        p, "events", epochs, lambda i: [{"k": j % 2, "t": 10 * i + j} for j in (1, 4, 7)]
    )
    return (
        rows.with_watermark("t", 5)
        .tumble("t", 10)
        .combine_per_key(["k", "window_start", "window_end"], n=sb.Count())
    )


def sort(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    rows = _epochs(p, "events", epochs, lambda i: [{"t": 10 * i + j} for j in (7, 1, 4)])
    return rows.with_watermark("t", 5).sort("t")


def sort_with_keys(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    rows = _epochs(
        p, "events", epochs, lambda i: [{"k": j % 2, "t": 10 * i + j} for j in (7, 1, 4)]
    )
    return rows.with_watermark("t", 5).sort("t", keys="k")


def session(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    rows = _epochs(
        p,
        "visits",
        epochs,
        lambda i: [{"user": u, "t": 100 * i + j} for u in ("a", "b") for j in (0, 3, 6)],
    )
    return rows.with_watermark("t", 0).session("t", 5, keys="user")


def window_join(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    left = _epochs(p, "left", epochs, lambda i: [{"k": i % 3, "t": 10 * i + 1, "a": i}])
    right = _epochs(
        p,
        "right",
        epochs,
        lambda i: [{"k": i % 3, "t": 10 * i + 2, "b": i}, {"k": 7, "t": 10 * i + 3, "b": -i}],
    )
    return (
        left.with_watermark("t", 0)
        .tumble("t", 10)
        .join(right.with_watermark("t", 0).tumble("t", 10), on=["k", "window_start"], how="full")
    )


def interval_join(p: sb.Pipeline, epochs: int) -> sb.PCollection:
    clicks = _epochs(p, "clicks", epochs, lambda i: [{"user": i % 2, "ct": 20 * i}])
    purchases = _epochs(
        p,
        "purchases",
        epochs,
        lambda i: [{"user": i % 2, "pt": 20 * i + 5}, {"user": 9, "pt": 20 * i + 6}],
    )
    return clicks.with_watermark("ct", 0).join(
        purchases.with_watermark("pt", 0),
        on="user",
        how="full",
        times=("ct", "pt"),
        within=(0, 10),
    )


BUILDS = [combine_after_tumble, sort, sort_with_keys, session, window_join, interval_join]


def _run(build: Build, epochs: int) -> tuple[int, int, int]:
    p = sb.Pipeline()
    out = build(p, epochs)
    result = p.run()
    return result.peak_state_size(out), result.state_size(out), len(result.collect(out))


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.__name__)
def test_peak_state_does_not_grow_with_stream_length(build: Build) -> None:
    short_peak, short_left, short_rows = _run(build, SHORT)
    long_peak, long_left, long_rows = _run(build, LONG)
    assert short_peak > 0  # the operator does hold state
    assert long_peak <= short_peak + 1, (short_peak, long_peak)
    assert short_left == long_left == 0  # everything flushed at the end
    # The long run did process 100 times the data.
    assert long_rows >= 90 * short_rows


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.__name__)
def test_exact_peaks_on_periodic_data(build: Build) -> None:
    expected = {
        # 2 groups of the previous window + 2 of this one, before the watermark.
        "combine_after_tumble": 4,
        # 2 rows left (>= 10i + 2) + the next epoch's 3.
        "sort": 5,
        "sort_with_keys": 5,
        # 2 users' sessions of 3 rows each, previous epoch + this one.
        "session": 12,
        # previous epoch's 3 rows + this epoch's 3.
        "window_join": 6,
        # previous epoch's click and 2 purchases + this epoch's 3.
        "interval_join": 6,
    }[build.__name__]
    assert _run(build, 2 * SHORT)[0] == expected


def test_state_grows_without_a_releasing_watermark() -> None:
    # Control: a delay longer than the stream keeps everything until the end,
    # so the peak grows with the stream (the measurement can see growth).
    def held(epochs: int) -> int:
        p = sb.Pipeline()
        rows = _epochs(p, "events", epochs, lambda i: [{"t": 10 * i + 1}])
        out = rows.with_watermark("t", 10 * LONG).sort("t")
        result = p.run()
        assert result.state_size(out) == 0
        return result.peak_state_size(out)

    assert held(SHORT) == SHORT
    assert held(LONG) == LONG


def test_bounded_input_holds_everything_until_the_flush() -> None:
    rows = [{"k": i % 5, "t": i} for i in range(50)]
    with sb.Pipeline() as p:
        source = p | sb.Create(rows)
        sorted_rows = source.sort("t")
        groups = source.combine_per_key("k", n=sb.Count())
        sessions = source.session("t", 1, keys="k")
    result = p.result
    assert result.peak_state_size(sorted_rows) == 50
    assert result.peak_state_size(groups) == 5
    assert result.peak_state_size(sessions) == 50
    for pcoll in (sorted_rows, groups, sessions):
        assert result.state_size(pcoll) == 0
