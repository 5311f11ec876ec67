"""Dropped rows as data: `late_rows()` and `invalid_rows()` (issue 8, item 1).

Rule under test: `w.late_rows()` holds every row the `WithWatermark` that
produced `w` dropped as late, with the watermark it was judged against in
`late_watermark`, emitted in the epoch it was dropped; `w.invalid_rows()`
every row it dropped for a `None` event time. They are ordinary
PCollections with no watermark. `Union`/`Join` late rows are in
`tests/transforms/test_policies.py`.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import pytest

import sparkbeam as sb


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 4, 1, 10, minute, second)


def stream(*epochs: list[dict[str, Any]], schema: Any = None) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def test_late_rows_carry_the_watermark_they_were_judged_against_in_their_epoch() -> None:
    p = sb.Pipeline()
    events = p | stream(
        [{"t": at(10), "k": "a"}],
        [{"t": at(4), "k": "late"}, {"t": at(5), "k": "on time"}, {"t": at(12), "k": "b"}],
        [{"t": at(6), "k": "late again"}],
    )
    w = events.with_watermark("t", "5 minutes")
    late = w.late_rows()
    result = p.run()
    assert result.collect_by_epoch(late) == [
        [],
        [{"t": at(4), "k": "late", "late_watermark": at(5)}],
        [{"t": at(6), "k": "late again", "late_watermark": at(7)}],
        [],
    ]
    assert result.late_count(w) == 2
    assert late.schema.describe() == "t: datetime, k: str, late_watermark: datetime"
    assert late.watermarked_columns == frozenset()
    assert result.watermarks(late) == []


def test_late_rows_of_emit_event_each_get_the_watermark_at_their_arrival() -> None:
    p = sb.Pipeline()
    w = (p | stream([{"t": 10}, {"t": 7}, {"t": 20}, {"t": 15}, {"t": 8}])).with_watermark(
        "t", 2, emit="event"
    )
    late = sb.late_rows(w)
    result = p.run()
    assert result.collect(late) == [
        {"t": 7, "late_watermark": 8},
        {"t": 15, "late_watermark": 18},
        {"t": 8, "late_watermark": 18},
    ]
    assert [r["t"] for r in result.collect(w)] == [10, 20]


def test_invalid_rows_are_the_rows_with_no_event_time(runner: Any) -> None:
    rows = [{"t": 3, "v": "a"}, {"t": None, "v": "b"}, {"t": 1, "v": "c"}, {"t": None, "v": "d"}]
    with sb.Pipeline(runner=runner) as p:
        w = (p | sb.Create(rows)).with_watermark("t", 1)
        invalid = w.invalid_rows()
        late = w.late_rows()
    result = p.result
    assert Counter(r["v"] for r in result.collect(invalid)) == Counter(["b", "d"])
    assert result.collect(late) == []  # bounded input is one epoch: nothing is judged late
    assert invalid.schema == w.schema
    assert result.invalid_count(w) == 2


def test_late_rows_are_a_normal_pcollection_counted_written_and_unioned_back(
    runner: Any, tmp_path: Any
) -> None:
    rows = [{"t": 5, "v": 1}, {"t": None, "v": 2}, {"t": 9, "v": 3}]
    with sb.Pipeline(runner=runner) as p:
        w = (p | sb.Create(rows)).with_watermark("t", 1)
        invalid = w.invalid_rows().select("v")
        written = invalid.write_files(str(tmp_path / "invalid"), format="json")
        counted = invalid.combine_per_key([], n=sb.Count())
        back = w.select("v").union(invalid)
    result = p.result
    assert result.collect(counted) == [{"n": 1}]
    assert result.collect(written) == [{"v": 2}]
    assert Counter(r["v"] for r in result.collect(back)) == Counter([1, 2, 3])
    check = sb.Pipeline()
    reread = check | sb.ReadFiles(str(tmp_path / "invalid"), "json", schema={"v": int})
    assert check.run().collect(reread) == [{"v": 2}]


def test_late_rows_downstream_of_a_union_back_into_the_stream() -> None:
    p = sb.Pipeline()
    w = (p | stream([{"t": 10}], [{"t": 1}, {"t": 11}])).with_watermark("t", 0)
    repaired = w.late_rows().select(t=sb.col("late_watermark"))
    merged = w.union(repaired)
    result = p.run()
    assert sorted(r["t"] for r in result.collect(merged)) == [10, 10, 11]


def test_no_rows_are_kept_for_dropped_rows_nobody_reads() -> None:
    p = sb.Pipeline()
    w = (p | stream([{"t": 10}], [{"t": 1}, {"t": None}])).with_watermark("t", 0)
    result = p.run()
    (operator,) = result.units[w.node.id]
    assert operator.sides == frozenset()
    assert (result.late_count(w), result.invalid_count(w)) == (1, 1)


def test_late_rows_with_parallel_units_and_fail_over_are_the_units_drops_once() -> None:
    epochs = [[{"t": 10 * i + j} for j in range(4)] + [{"t": 0}, {"t": None}] for i in range(4)]
    runs = []
    for runner in (
        sb.DirectRunner(parallelism=2),
        sb.DirectRunner(parallelism=2, checkpoint_every=1, fail_at=[9, 30]),
    ):
        p = sb.Pipeline(runner=runner)
        w = (p | stream(*epochs)).with_watermark("t", 0)
        late, invalid = w.late_rows(), w.invalid_rows()
        result = p.run()
        assert len(result.collect(late)) == result.late_count(w) > 0
        assert len(result.collect(invalid)) == result.invalid_count(w) == 4
        runs.append(result.collect_by_epoch(late))
    assert runs[0] == runs[1]


# --- bad input ---------------------------------------------------------------------------


def test_invalid_rows_come_only_from_with_watermark() -> None:
    p = sb.Pipeline()
    pc = p | sb.Create([{"t": 1}])
    with pytest.raises(sb.PipelineError, match="dropped by WithWatermark"):
        pc.invalid_rows()


def test_late_rows_of_a_transform_that_drops_none_are_refused() -> None:
    p = sb.Pipeline()
    pc = (p | sb.Create([{"t": 1}])).with_watermark("t", 0).tumble("t", 10)
    with pytest.raises(
        sb.PipelineError, match=r"drops no late rows.*WithWatermark, Union and Join"
    ):
        pc.late_rows()


def test_late_rows_of_a_union_without_watermark_are_refused() -> None:
    p = sb.Pipeline()
    a, b = p | "a" >> sb.Create([{"t": 1}]), p | "b" >> sb.Create([{"t": 2}])
    with pytest.raises(sb.PipelineError, match="carries no watermark"):
        a.union(b).late_rows()


def test_a_column_named_late_watermark_is_refused() -> None:
    p = sb.Pipeline()
    w = (p | sb.Create([{"t": 1, "late_watermark": 2}])).with_watermark("t", 0)
    with pytest.raises(sb.PipelineError, match="already has a column 'late_watermark'"):
        w.late_rows()


def test_late_rows_of_mixed_watermark_types_are_refused() -> None:
    p = sb.Pipeline()
    rows = [{"t": at(1), "n": 1}]
    a = (p | "a" >> sb.Create(rows)).with_watermark("t", "1 minute").with_watermark("n", 0)
    b = (p | "b" >> sb.Create(rows)).with_watermark("t", "1 minute").with_watermark("n", 0)
    with pytest.raises(sb.PipelineError, match="different types"):
        a.union(b, policy="max").late_rows()


def by_epoch(result: Any, pcoll: sb.PCollection) -> list[list[tuple[Any, ...]]]:
    """Each epoch's rows in a fixed order (the runners may emit an epoch's rows in any)."""
    return [
        sorted(tuple(map(repr, row.values())) for row in rows)
        for rows in result.collect_by_epoch(pcoll)
    ]


@pytest.mark.spark
def test_late_and_invalid_rows_on_spark_streaming_are_the_direct_runners(
    spark_runner: Any,
) -> None:
    def run(runner: Any) -> dict[str, Any]:
        p = sb.Pipeline(runner=runner)
        events = p | "events" >> stream(
            [{"t": at(10), "k": "a"}],
            [
                {"t": at(4), "k": "late"},
                {"t": None, "k": "no time"},
                {"t": at(5), "k": "on time"},
                {"t": at(12), "k": "b"},
            ],
            [{"t": at(6), "k": "late again"}, {"t": None, "k": "no time again"}],
        )
        w = events.with_watermark("t", "5 minutes")
        late, invalid = w.late_rows(), w.invalid_rows()
        written: list[dict[str, Any]] = []
        late.for_each_batch(lambda rows, batch: written.extend(rows))
        ints = (p | "ints" >> stream([{"t": 10}], [{"t": 1}, {"t": 11}], [])).with_watermark("t", 0)
        back = ints.union(ints.late_rows().select(t=sb.col("late_watermark")))
        result = p.run()
        outputs = [late, invalid, back]
        if isinstance(runner, sb.SparkRunner):
            result.prepare(*outputs, w)  # w's own query counts its late and invalid rows
        return {
            "epochs": [by_epoch(result, pc) for pc in outputs],
            "written": sorted(row["k"] for row in written),
            "late": [r["late_watermark"] for r in result.collect(late)],
            "counts": (result.late_count(w), result.invalid_count(w), result.late_count(ints)),
        }

    direct, spark = run(sb.DirectRunner()), run(spark_runner)
    assert spark == direct
    assert direct["written"] == ["late", "late again"]
    assert direct["late"] == [at(5), at(7)]
    assert direct["counts"] == (2, 2, 1)
    assert [len(rows) for rows in direct["epochs"][1]] == [0, 1, 1, 0]
    unioned_back = sorted(row for rows in direct["epochs"][2] for row in rows)
    assert unioned_back == [("10",), ("10",), ("11",)]
