"""Hypothesis properties of early results (`emit="update"`) on the direct runner.

Over random epochs, keys and shapes (tumbling and hopping windows, a group on
the event time itself, a running aggregate without a watermarked key), on
one unit and on parallel units:

- `finals()` equals the same pipeline with `emit="close"`, epoch by epoch;
- after every epoch, the latest row of each group (its highest `pane_index`)
  is the aggregate of the rows kept (not late) so far, as a bounded
  aggregate over them gives;
- the pane rules: per group, indexes 0, 1, 2, ... in emission order, one
  last row, `"ON_TIME"`, and nothing after it; every other row `"EARLY"`
  (no allowed lateness: no `"LATE"`; with it, `"EARLY"` rows, at most one
  `"ON_TIME"`, then `"LATE"` rows, the last row either); per epoch, the step-1 rows (one for
  each group the epoch touched, and only those) before the step-2 rows; the
  end of input only closes groups;
- parallel units give parallelism 1's rows, epoch by epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb

Row = dict[str, Any]
SCHEMA = {"k": str, "t": int, "v": int}
AGGREGATES = {"n": sb.Count(), "total": sb.Sum("v"), "top": sb.Max("v")}
SHAPES = ("tumble", "hop", "event time", "running")

rows = st.fixed_dictionaries(
    {"k": st.sampled_from("abc"), "t": st.integers(0, 40), "v": st.integers(-5, 5)}
)
epochs_of_rows = st.lists(st.lists(rows, max_size=6), min_size=1, max_size=5)

RUNNERS: list[Any] = [
    pytest.param(lambda: sb.DirectRunner(), id="one-unit"),
    pytest.param(lambda: sb.DirectRunner(parallelism=3), id="three-units"),
    pytest.param(
        lambda: sb.DirectRunner(parallelism=2, schedule="random", seed=3, checkpoint_every=1),
        id="two-units-random",
    ),
]


def grouped(rows: sb.PCollection, shape: str) -> tuple[sb.PCollection, tuple[str, ...]]:
    """The rows each group is made of, and the key columns, for `shape`."""
    if shape == "tumble":
        return rows.tumble("t", 10), ("k", "window_start")
    if shape == "hop":
        return rows.hop("t", 10, 5), ("window_start",)
    if shape == "event time":
        return rows, ("t",)
    return rows, ("k",)


def build(
    p: sb.Pipeline, epochs: list[list[Row]], shape: str, delay: int, lateness: int = 0
) -> tuple[sb.PCollection, sb.PCollection, sb.PCollection, sb.PCollection, tuple[str, ...]]:
    """The grouped rows, the update stream, its finals and the `emit="close"` twin."""
    stream = sb.TestStream(SCHEMA)
    for epoch in epochs:
        stream.add_epoch(epoch)
    watermarked = (p | stream).with_watermark("t", delay, allowed_lateness=lateness)
    members, keys = grouped(watermarked, shape)
    updates = members.combine_per_key(list(keys), emit="update", **AGGREGATES)
    closed = (
        members.combine_per_key(list(keys), **AGGREGATES)
        if shape != "running"
        else updates.finals()  # close mode needs a watermarked key on unbounded input
    )
    return members, updates, updates.finals(), closed, keys


def shown(rows: list[Row]) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in rows)


def aggregate(rows: list[Row], keys: tuple[str, ...]) -> dict[tuple[Any, ...], Row]:
    """A bounded aggregate of `rows` per group, computed here."""
    out: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        group = out.setdefault(key, {"n": 0, "total": 0, "top": None})
        group["n"] += 1
        group["total"] += row["v"]
        group["top"] = row["v"] if group["top"] is None else max(group["top"], row["v"])
    return out


def is_closing(row: Row) -> bool:
    return row["pane_timing"] == "ON_TIME" or row["pane_is_last"]


@pytest.mark.parametrize("make_runner", RUNNERS)
@given(
    epochs=epochs_of_rows,
    shape=st.sampled_from(SHAPES),
    delay=st.integers(0, 6),
    lateness=st.sampled_from([0, 0, 3, 8]),
)
def test_update_stream_rules(
    make_runner: Callable[[], sb.DirectRunner],
    epochs: list[list[Row]],
    shape: str,
    delay: int,
    lateness: int,
) -> None:
    p = sb.Pipeline(runner=make_runner())
    members, updates, finals, closed, keys = build(p, epochs, shape, delay, lateness)
    result = p.run()
    by_epoch = result.collect_by_epoch(updates)
    kept = result.collect_by_epoch(members)

    # finals() is emit="close", epoch by epoch
    assert [shown(e) for e in result.collect_by_epoch(finals)] == [
        shown(e) for e in result.collect_by_epoch(closed)
    ]

    latest: dict[tuple[Any, ...], Row] = {}
    next_index: dict[tuple[Any, ...], int] = {}
    ended: set[tuple[Any, ...]] = set()
    passed: set[tuple[Any, ...]] = set()
    """Groups whose `"ON_TIME"` row came (or that were born late): only `"LATE"` follows."""
    so_far: list[Row] = []
    for number, (rows, added) in enumerate(zip(by_epoch, kept, strict=True)):
        closing = [is_closing(row) for row in rows]
        assert closing == sorted(closing), f"epoch {number}: a step-1 row after a step-2 row"
        step_one = [tuple(row[k] for k in keys) for row in rows if not is_closing(row)]
        touched = {tuple(row[k] for k in keys) for row in added}
        at_end = number == len(by_epoch) - 1
        assert sorted(map(repr, step_one)) == ([] if at_end else sorted(map(repr, touched)))
        step_two = [tuple(row[k] for k in keys) for row in rows if is_closing(row)]
        assert len(step_two) == len(set(step_two))
        for row in rows:
            key = tuple(row[k] for k in keys)
            assert key not in ended, f"a row after the last of {key}: {row}"
            assert row["pane_index"] == next_index.get(key, 0)
            next_index[key] = row["pane_index"] + 1
            timing = row["pane_timing"]
            if not lateness:
                assert timing == ("ON_TIME" if row["pane_is_last"] else "EARLY")
            elif timing == "EARLY":
                assert key not in passed and not row["pane_is_last"], row
            elif timing == "ON_TIME":
                assert key not in passed, f"a second on-time row: {row}"
                passed.add(key)
            else:
                assert timing == "LATE", row
                passed.add(key)
            if row["pane_is_last"]:
                ended.add(key)
            latest[key] = {name: row[name] for name in AGGREGATES}
        so_far += added
        assert latest == aggregate(so_far, keys), f"after epoch {number}"
    assert ended == set(latest), "a group without its last row"

    if make_runner is not RUNNERS[0].values[0]:
        one = sb.Pipeline()
        _, reference, _, _, _ = build(one, epochs, shape, delay, lateness)
        expected = one.run().collect_by_epoch(reference)
        assert [shown(e) for e in by_epoch] == [shown(e) for e in expected]
