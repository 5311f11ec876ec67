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
