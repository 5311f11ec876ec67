"""Nothing is lost (issue 8): for every `WithWatermark`, rows out + late rows + invalid rows =
rows in, on both runners, and the dropped rows are the input rows that are not passed on.

Direct runner: random epochs of two sources (integer times, some `None`), random
delays and emit modes, an `idle_after` on one and a `Union` with a random
policy, whose own late rows close the account there too. Spark runner (batch,
one epoch): random rows of a `Create`, against the direct runner.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import sparkbeam as sb

Row = dict[str, Any]
SCHEMA = {"t": int, "id": int}

times = st.integers(-5, 60).map(lambda t: None if t < 0 else t)
slow_times = st.integers(-3, 30).map(lambda t: None if t < 0 else t)


@st.composite
def epochs(draw: st.DrawFn, source: int) -> list[list[Row]]:
    """Source 1 runs ahead of source 2 (later times), so policy='max' finds late rows."""
    count = draw(st.integers(2, 5))
    out = []
    for epoch in range(count):
        values = draw(st.lists(times if source == 1 else slow_times, min_size=1, max_size=5))
        out.append([{"t": t, "id": source * 1000 + epoch * 10 + i} for i, t in enumerate(values)])
    return out


def stream(rows: list[list[Row]]) -> sb.TestStream:
    ts = sb.TestStream(SCHEMA)
    for epoch in rows:
        ts.add_epoch(epoch)
    return ts


def ids(rows: list[Row]) -> Counter[int]:
    return Counter(row["id"] for row in rows)


def check_account(
    result: Any, w: sb.PCollection, given_rows: list[Row], late: Any, bad: Any
) -> None:
    metrics = result.metrics()[w.node.label]
    kept, late_rows, invalid = result.collect(w), result.collect(late), result.collect(bad)
    assert metrics.rows_in == len(given_rows)
    assert metrics.rows_in == metrics.rows_out + metrics.late_rows + metrics.invalid_rows
    assert (metrics.rows_out, metrics.late_rows, metrics.invalid_rows) == (
        len(kept),
        len(late_rows),
        len(invalid),
    )
    assert ids(kept) + ids(late_rows) + ids(invalid) == ids(given_rows)
    assert all(row["t"] is None for row in invalid)
    assert all(row["t"] < row["late_watermark"] for row in late_rows)


@given(
    first=epochs(1),
    second=epochs(2),
    delays=st.tuples(st.integers(0, 10), st.integers(0, 10)),
    emit=st.sampled_from(["periodic", "event"]),
    idle_after=st.one_of(st.none(), st.integers(1, 3)),
    policy=st.sampled_from(["min", "max"]),
)
def test_nothing_is_lost_on_the_direct_runner(
    first: list[list[Row]],
    second: list[list[Row]],
    delays: tuple[int, int],
    emit: str,
    idle_after: int | None,
    policy: str,
) -> None:
    p = sb.Pipeline()
    a = (p | "a" >> stream(first)).with_watermark("t", delays[0], emit=emit)
    b = (p | "b" >> stream(second)).with_watermark("t", delays[1], idle_after=idle_after)
    merged = a.union(b, policy=policy)
    dropped = [(a, a.late_rows(), a.invalid_rows()), (b, b.late_rows(), b.invalid_rows())]
    merged_late = merged.late_rows()
    result = p.run()
    for w, late, bad in dropped:
        given_rows = [row for epoch in (first if w is a else second) for row in epoch]
        check_account(result, w, given_rows, late, bad)
    union = result.metrics()[merged.node.label]
    assert union.rows_in == union.rows_out + union.late_rows
    assert ids(result.collect(merged)) + ids(result.collect(merged_late)) == ids(
        result.collect(a)
    ) + ids(result.collect(b))
    if policy == "min" and idle_after is None:
        assert result.collect(merged_late) == []
    event(f"late at a filter: {result.late_count(a) + result.late_count(b) > 0}")
    event(f"late at the union: {union.late_rows > 0}")


@pytest.mark.spark
@settings(max_examples=4)
@given(rows=st.lists(times, max_size=8), delay=st.integers(0, 20))
def test_nothing_is_lost_on_both_runners_over_bounded_input(
    spark_runner: Any, rows: list[int | None], delay: int
) -> None:
    given_rows = [{"t": t, "id": i} for i, t in enumerate(rows)]
    found = []
    for runner in (sb.DirectRunner(), spark_runner):
        p = sb.Pipeline(runner=runner)
        w = (p | sb.Create(given_rows, schema=SCHEMA)).with_watermark("t", delay)
        late, bad = w.late_rows(), w.invalid_rows()
        result = p.run()
        check_account(result, w, given_rows, late, bad)
        found.append((ids(result.collect(w)), ids(result.collect(bad)), result.metrics()))
    assert found[0][:2] == found[1][:2]
    direct, spark = (metrics[w.node.label] for *_, metrics in found)
    assert direct.watermarks == spark.watermarks
    assert direct.watermark_lag == spark.watermark_lag
