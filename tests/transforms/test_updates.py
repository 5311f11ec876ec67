"""Early results: `CombinePerKey(emit="update")`, `finals()`, and what may read an update stream.

Per epoch, one `"EARLY"` row per group the epoch touched (its value so far),
then one `"ON_TIME"` last row per group the watermark passed at the epoch's
end (the group is then dropped); the end of input closes the rest. With no
allowed lateness, no row is `"LATE"`. Examples for each rule, on the direct
runner; the properties over random epochs are in
tests/runners/direct/test_update_properties.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.errors import InvariantViolation
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.runners.direct.checks import EdgeCheck
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.runners.direct.runner import OPERATORS
from sparkbeam.schema import Schema
from sparkbeam.transforms.validation import single_input
from sparkbeam.updates import UpdateStream

SCHEMA = {"k": str, "t": int, "v": int}
RUNNERS = [
    pytest.param(lambda: sb.DirectRunner(), id="one-unit"),
    pytest.param(lambda: sb.DirectRunner(parallelism=3), id="three-units"),
]


def stream_of(*epochs: list[dict[str, Any]]) -> sb.TestStream:
    stream = sb.TestStream(SCHEMA)
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def pane(timing: str, index: int, last: bool) -> dict[str, Any]:
    return {"pane_timing": timing, "pane_index": index, "pane_is_last": last}


def early(index: int) -> dict[str, Any]:
    return pane("EARLY", index, False)


def on_time(index: int) -> dict[str, Any]:
    return pane("ON_TIME", index, True)


def shown(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in rows)


def steps(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """An epoch's rows as (step 1, step 2), each in any order (parallel units interleave
    groups), after checking that every step-1 row comes before every step-2 row."""
    closing = [row["pane_timing"] == "ON_TIME" or row["pane_is_last"] for row in rows]
    assert closing == sorted(closing), f"a step-1 row after a step-2 row: {rows}"
    first = [row for row, c in zip(rows, closing, strict=True) if not c]
    second = [row for row, c in zip(rows, closing, strict=True) if c]
    return shown(first), shown(second)


def updates_of(
    make_runner: Callable[[], sb.DirectRunner], stream: sb.TestStream, build: Callable[..., Any]
) -> list[tuple[list[str], list[str]]]:
    with sb.Pipeline(runner=make_runner()) as p:
        updates = build(p | stream)
    return [steps(rows) for rows in p.result.collect_by_epoch(updates)]


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_a_window_touched_and_closed_in_one_epoch_emits_two_rows_then(
    make_runner: Callable[[], sb.DirectRunner],
) -> None:
    """Epoch 1 brings a row to window 0 and moves the watermark past it: its update, then
    its closing row, in that order."""
    stream = stream_of(
        [{"k": "a", "t": 1, "v": 1}],
        [{"k": "a", "t": 2, "v": 10}, {"k": "a", "t": 15, "v": 100}],
    )

    def build(rows: sb.PCollection) -> sb.PCollection:
        windows = rows.with_watermark("t", 0).tumble("t", 10)
        return windows.combine_per_key(["window_start"], emit="update", total=sb.Sum("v"))

    assert updates_of(make_runner, stream, build) == [
        (shown([{"window_start": 0, "total": 1, **early(0)}]), []),
        (
            shown(
                [
                    {"window_start": 0, "total": 11, **early(1)},
                    {"window_start": 10, "total": 100, **early(0)},
                ]
            ),
            shown([{"window_start": 0, "total": 11, **on_time(2)}]),
        ),
        ([], shown([{"window_start": 10, "total": 100, **on_time(1)}])),
    ]


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_a_hop_row_updates_both_its_windows(make_runner: Callable[[], sb.DirectRunner]) -> None:
    """t=7 lies in the hopping windows starting at 0 and 5 (size 10, every 5): one row
    updates both; t=20 then closes both (window_start's watermark 15)."""
    stream = stream_of(
        [{"k": "a", "t": 7, "v": 1}],
        [{"k": "a", "t": 8, "v": 2}],
        [{"k": "a", "t": 25, "v": 4}],
    )

    def build(rows: sb.PCollection) -> sb.PCollection:
        windows = rows.with_watermark("t", 0).hop("t", 10, 5)
        return windows.combine_per_key(["window_start"], emit="update", total=sb.Sum("v"))

    got = updates_of(make_runner, stream, build)
    assert got[0] == (
        shown(
            [
                {"window_start": 0, "total": 1, **early(0)},
                {"window_start": 5, "total": 1, **early(0)},
            ]
        ),
        [],
    )
    assert got[1] == (
        shown(
            [
                {"window_start": 0, "total": 3, **early(1)},
                {"window_start": 5, "total": 3, **early(1)},
            ]
        ),
        [],
    )
    assert got[2] == (
        shown(
            [
                {"window_start": 20, "total": 4, **early(0)},
                {"window_start": 25, "total": 4, **early(0)},
            ]
        ),
        shown(
            [
                {"window_start": 0, "total": 3, **on_time(2)},
                {"window_start": 5, "total": 3, **on_time(2)},
            ]
        ),
    )
    assert got[3] == (
        [],
        shown(
            [
                {"window_start": 20, "total": 4, **on_time(1)},
                {"window_start": 25, "total": 4, **on_time(1)},
            ]
        ),
    )


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_a_bounded_create_gives_one_epoch_of_early_rows_then_the_final_ones(
    make_runner: Callable[[], sb.DirectRunner],
) -> None:
    rows = [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 2, "v": 2}, {"k": "a", "t": 3, "v": 3}]
    with sb.Pipeline(runner=make_runner()) as p:
        updates = (p | sb.Create(rows)).combine_per_key("k", emit="update", total=sb.Sum("v"))
        finals = updates.finals()
        closed = (p | "again" >> sb.Create(rows)).combine_per_key("k", total=sb.Sum("v"))
    result = p.result
    assert [steps(epoch) for epoch in result.collect_by_epoch(updates)] == [
        (shown([{"k": "a", "total": 4, **early(0)}, {"k": "b", "total": 2, **early(0)}]), []),
        ([], shown([{"k": "a", "total": 4, **on_time(1)}, {"k": "b", "total": 2, **on_time(1)}])),
    ]
    assert [shown(e) for e in result.collect_by_epoch(finals)] == [
        shown(e) for e in result.collect_by_epoch(closed)
    ]


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_a_running_aggregate_without_a_watermarked_key_runs_on_unbounded_input(
    make_runner: Callable[[], sb.DirectRunner],
) -> None:
    """No key carries a watermark: each epoch updates the groups it touched, and only the
    end of input closes them."""
    stream = stream_of(
        [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 1, "v": 5}],
        [{"k": "a", "t": 2, "v": 2}],
        [],
    )

    def build(rows: sb.PCollection) -> sb.PCollection:
        return rows.combine_per_key("k", emit="update", total=sb.Sum("v"), n=sb.Count())

    assert updates_of(make_runner, stream, build) == [
        (
            shown(
                [
                    {"k": "a", "total": 1, "n": 1, **early(0)},
                    {"k": "b", "total": 5, "n": 1, **early(0)},
                ]
            ),
            [],
        ),
        (shown([{"k": "a", "total": 3, "n": 2, **early(1)}]), []),
        ([], []),
        (
            [],
            shown(
                [
                    {"k": "a", "total": 3, "n": 2, **on_time(2)},
                    {"k": "b", "total": 5, "n": 1, **on_time(1)},
                ]
            ),
        ),
    ]


def test_without_a_watermarked_key_unbounded_input_is_still_refused_in_close_mode() -> None:
    rows = sb.Pipeline() | stream_of([{"k": "a", "t": 1, "v": 1}])
    with pytest.raises(sb.PipelineError, match="emit='update' for a running aggregate"):
        rows.combine_per_key("k", total=sb.Sum("v"))


def test_late_rows_are_dropped_before_the_update_stream_so_no_row_is_late() -> None:
    """Without allowed lateness, a row behind the watermark is dropped by WithWatermark:
    the window it would have corrected is closed already, and no LATE row follows."""
    stream = stream_of(
        [{"k": "a", "t": 3, "v": 1}],
        [{"k": "a", "t": 12, "v": 2}],
        [{"k": "a", "t": 4, "v": 100}],
    )
    with sb.Pipeline() as p:
        watermarked = (p | stream).with_watermark("t", 0)
        updates = watermarked.tumble("t", 10).combine_per_key(
            ["window_start"], emit="update", total=sb.Sum("v")
        )
    rows = p.result.collect(updates)
    assert p.result.late_count(watermarked) == 1
    assert {row["pane_timing"] for row in rows} == {"EARLY", "ON_TIME"}
    assert [row["total"] for row in rows if row["window_start"] == 0] == [1, 1]


def test_the_update_stream_carries_the_key_columns_watermarks() -> None:
    stream = stream_of([{"k": "a", "t": 3, "v": 1}], [{"k": "a", "t": 25, "v": 2}])
    with sb.Pipeline() as p:
        windows = (p | stream).with_watermark("t", 0).tumble("t", 10)
        updates = windows.combine_per_key(["k", "window_start"], emit="update", n=sb.Count())
        finals = updates.finals()
    assert updates.watermarked_columns == frozenset({"window_start"})
    assert finals.watermarked_columns == frozenset({"window_start"})
    assert p.result.watermarks(updates) == [
        sb.Watermark("window_start", 0),
        sb.Watermark("window_start", 20),
    ]


def test_pane_columns_follow_the_aggregates() -> None:
    rows = sb.Pipeline() | stream_of([{"k": "a", "t": 3, "v": 1}])
    updates = rows.with_watermark("t", 0).combine_per_key(
        ["t", "k"], emit="update", n=sb.Count(), total=sb.Sum("v")
    )
    assert updates.schema == Schema.of(
        {
            "t": int,
            "k": str,
            "n": int,
            "total": int,
            "pane_timing": str,
            "pane_index": int,
            "pane_is_last": bool,
        }
    )
    assert updates.finals().schema == Schema.of({"t": int, "k": str, "n": int, "total": int})


def test_a_str_given_as_emit_is_the_mode_never_an_aggregate() -> None:
    close = sb.CombinePerKey("k", emit="close", n=sb.Count())
    update = sb.CombinePerKey("k", emit="update", n=sb.Count())
    assert close.aggregates == update.aggregates == (("n", sb.Count()),)
    assert (close.emit, update.emit) == ("close", "update")
    assert sb.CombinePerKey("k", n=sb.Count()).emit == "close"
    with pytest.raises(sb.PipelineError, match="emit='later' is not a mode"):
        sb.CombinePerKey("k", emit="later", n=sb.Count())
    with pytest.raises(sb.PipelineError, match="an aggregate needs another name"):
        sb.CombinePerKey("k", emit=sb.Count())  # type: ignore[arg-type]


def test_an_aggregate_named_like_a_pane_column_is_refused_in_update_mode() -> None:
    rows = sb.Pipeline() | sb.Create([{"k": "a", "v": 1}])
    with pytest.raises(sb.PipelineError, match="pane_index"):
        rows.combine_per_key("k", emit="update", pane_index=sb.Count())
    assert rows.combine_per_key("k", pane_index=sb.Count()).schema.names == ("k", "pane_index")


def test_emit_update_under_an_event_watermark_is_refused() -> None:
    rows = sb.Pipeline() | stream_of([{"k": "a", "t": 3, "v": 1}])
    windows = rows.with_watermark("t", 0, emit="event").tumble("t", 10)
    with pytest.raises(sb.PipelineError, match=r"emit='event'.*emit='periodic'"):
        windows.combine_per_key(["window_start"], emit="update", n=sb.Count())
    windows.combine_per_key(["window_start"], n=sb.Count())


def test_finals_of_an_append_stream_is_refused() -> None:
    rows = sb.Pipeline() | sb.Create([{"k": "a", "v": 1}])
    with pytest.raises(sb.PipelineError, match=r"finals\(\) reads an update stream"):
        rows.combine_per_key("k", n=sb.Count()).finals()


@pytest.fixture
def updates() -> sb.PCollection:
    stream = stream_of([{"k": "a", "t": 3, "v": 1}])
    windows = (sb.Pipeline() | stream).with_watermark("t", 0).tumble("t", 10)
    return windows.combine_per_key(["k", "window_start"], emit="update", n=sb.Count())


KEPT = ["k", "window_start", "pane_timing", "pane_index", "pane_is_last"]

REFUSED: dict[str, Callable[[sb.PCollection], Any]] = {
    "CombinePerKey": lambda u: u.combine_per_key("k", n=sb.Count()),
    "Join": lambda u: u.join(u.finals(), on="k"),
    "Join (update stream as the other side)": lambda u: u.finals().join(u, on="k"),
    "Union": lambda u: u.union(u),
    "Sort": lambda u: u.sort("window_start"),
    "Session": lambda u: u.session("window_start", 5),
    "Tumble": lambda u: u.tumble("window_start", 10),
    "Hop": lambda u: u.hop("window_start", 10, 5),
    "WithWatermark": lambda u: u.with_watermark("window_start", 0),
    "a Filter function": lambda u: u.filter(lambda row: row["pane_is_last"]),
    "a Filter on a value": lambda u: u.filter(sb.col("n") > 1),
    "FlatMap": lambda u: u.flat_map(lambda row: [row], keeps=KEPT),
    "Partition": lambda u: u.partition(lambda row, n: 0, 2),
    "a Map without keeps": lambda u: u.map(lambda row: row),
    "a Select without a pane column": lambda u: u.select("k", "window_start", "n"),
    "a Select renaming a key": lambda u: u.select(
        "window_start", "n", "pane_timing", "pane_index", "pane_is_last", key="k"
    ),
    "with_columns replacing a key": lambda u: u.with_columns(k=sb.col("k").upper()),
}


@pytest.mark.parametrize("apply", REFUSED.values(), ids=REFUSED.keys())
def test_what_does_not_keep_upserts_is_refused_when_applied(
    updates: sb.PCollection, apply: Callable[[sb.PCollection], Any]
) -> None:
    count = len(updates.pipeline.nodes)
    with pytest.raises(sb.PipelineError) as info:
        apply(updates)
    message = str(info.value)
    assert "finals()" in message and "emit='close'" in message, message
    assert "CombinePerKey(k, window_start)" in message, message
    assert len(updates.pipeline.nodes) <= count + 1  # at most the finals() of a Join's side


def test_what_keeps_upserts_is_accepted_and_stays_an_update_stream(
    updates: sb.PCollection, tmp_path: Any
) -> None:
    seen: list[list[dict[str, Any]]] = []
    mapped = updates.map(lambda row: {**row, "n": row["n"] * 10}, keeps=KEPT)
    selected = mapped.select(*KEPT, "n")
    widened = selected.with_columns(double=sb.col("n") * 2)
    kept = widened.filter(sb.col("pane_timing") == "EARLY")
    written = kept.write_files(str(tmp_path / "out"), format="json")
    called = written.for_each_batch(lambda rows, batch: seen.append(rows))
    for pcoll in (mapped, selected, widened, kept, written, called):
        assert pcoll.info.updates is not None
        assert pcoll.info.updates.keys == ("k", "window_start")
    result = updates.pipeline.run()
    row = {"k": "a", "window_start": 0, **early(0), "n": 10, "double": 20}
    assert result.collect(called) == [row]
    assert seen == [[row]]
    assert list(result.to_pandas(updates).columns) == ["k", "window_start", "n", *KEPT[2:]]


def test_a_filter_on_pane_columns_passes_the_pane_checks() -> None:
    """Keeping only the final rows leaves gaps in pane_index: the checks know the stream is
    filtered."""
    stream = stream_of([{"k": "a", "t": 3, "v": 1}], [{"k": "a", "t": 4, "v": 1}])
    with sb.Pipeline() as p:
        updates = (
            (p | stream).with_watermark("t", 0).combine_per_key("k", emit="update", n=sb.Count())
        )
        lasts = updates.filter(sb.col("pane_is_last"))
        earlier = updates.filter(~sb.col("pane_is_last") & (sb.col("pane_index") > 0))
    assert p.result.collect(lasts) == [{"k": "a", "n": 2, **on_time(2)}]
    assert p.result.collect(earlier) == [{"k": "a", "n": 2, **early(1)}]


def test_checkpoints_failures_and_rescaling_keep_the_panes() -> None:
    stream = stream_of(
        [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 2, "v": 1}],
        [{"k": "a", "t": 5, "v": 1}, {"k": "c", "t": 12, "v": 1}],
        [{"k": "b", "t": 13, "v": 1}],
        [{"k": "a", "t": 31, "v": 1}],
    )

    def run(runner: sb.DirectRunner) -> list[list[str]]:
        with sb.Pipeline(runner=runner) as p:
            windows = (p | stream).with_watermark("t", 0).tumble("t", 10)
            updates = windows.combine_per_key(["k", "window_start"], emit="update", n=sb.Count())
        return [shown(rows) for rows in p.result.collect_by_epoch(updates)]

    expected = run(sb.DirectRunner())
    for runner in (
        sb.DirectRunner(parallelism=2, checkpoint_every=1, fail_at=[9, 40]),
        sb.DirectRunner(parallelism=2, rescale={1: 3}),
        sb.DirectRunner(parallelism=2, schedule="random", seed=7),
    ):
        assert run(runner) == expected


UPDATES = UpdateStream(("k",), "CombinePerKey(k)")
PANE_SCHEMA = Schema.of(
    {"k": str, "n": int, "pane_timing": str, "pane_index": int, "pane_is_last": bool}
)


def pane_chunk(*rows: tuple[str, int, bool]) -> Chunk:
    return Chunk.from_rows(
        PANE_SCHEMA.names,
        [(key, 1, "ON_TIME" if last else "EARLY", index, last) for key, index, last in rows],
    )


BROKEN = {
    "a first index that is not 0": ([("a", 1, False)], "first, with pane_index 1"),
    "a gap": ([("a", 0, False), ("a", 2, False)], "pane_index 2, not 1"),
    "an index repeated": ([("a", 0, False), ("a", 0, True)], "pane_index 0, not 1"),
    "a row after the last": ([("a", 0, True), ("a", 1, False)], "after its group's last row"),
}


@pytest.mark.parametrize(("rows", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_the_edge_checks_catch_broken_pane_rules(
    rows: list[tuple[str, int, bool]], message: str
) -> None:
    check = EdgeCheck("CombinePerKey(k)", PANE_SCHEMA, UPDATES)
    with pytest.raises(InvariantViolation, match=message):
        check.chunk(pane_chunk(*rows))


def test_the_edge_checks_want_a_last_row_per_group_by_the_end_of_input() -> None:
    check = EdgeCheck("CombinePerKey(k)", PANE_SCHEMA, UPDATES)
    check.chunk(pane_chunk(("a", 0, False), ("b", 0, False), ("b", 1, True)))
    with pytest.raises(InvariantViolation, match=re.escape("group {'k': 'a'} had no last row")):
        check.end()


def test_a_group_passed_by_the_watermark_after_its_last_row_is_forgotten() -> None:
    schema = Schema.of(
        {"w": int, "n": int, "pane_timing": str, "pane_index": int, "pane_is_last": bool}
    )
    check = EdgeCheck("CombinePerKey(w)", schema, UpdateStream(("w",), "CombinePerKey(w)"))
    check.chunk(Chunk.from_rows(schema.names, [(0, 1, "ON_TIME", 0, True)]))
    assert check.panes is not None and check.panes.closed == {(0,)}
    check.watermark(sb.Watermark("w", 10))
    assert check.panes.closed == set()
    check.end()


class LosesLastRows(PrimitiveTransform):
    """A test-only transform that passes an update stream on without its last rows, and
    says the stream is whole: the runner's checks must notice."""

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        return single_input(inputs, label).updates

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return single_input(inputs, label)


class LosesLastRowsOperator(Operator):
    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        keep = [not last for last in chunk.columns["pane_is_last"]]
        return [chunk.compress(keep, sum(keep))]


@pytest.fixture
def loses_last_rows() -> Iterator[None]:
    OPERATORS[LosesLastRows] = LosesLastRowsOperator
    try:
        yield
    finally:
        OPERATORS.pop(LosesLastRows, None)


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_the_runner_checks_every_update_stream_edge_to_the_end(
    make_runner: Callable[[], sb.DirectRunner], loses_last_rows: None
) -> None:
    p = sb.Pipeline(runner=make_runner())
    rows = p | stream_of([{"k": "a", "t": 3, "v": 1}])
    rows.combine_per_key("k", emit="update", n=sb.Count()) | LosesLastRows()
    with pytest.raises(InvariantViolation, match=r"LosesLastRows.*had no last row"):
        p.run()
