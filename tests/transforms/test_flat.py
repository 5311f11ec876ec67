"""FlatMap and Partition (SPEC section 7): rows, watermarks as `Map` / `Filter`, bad values."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import by_n, repeat, row_multiset
from tests.agreement.test_streaming import assert_agree_epoch_by_epoch

START = datetime(2026, 4, 1, 10, 0)
ROWS = [
    {"k": "a", "n": 2, "t": START},
    {"k": "b", "n": 0, "t": START + timedelta(seconds=30)},
    {"k": "c", "n": 3, "t": START + timedelta(minutes=1)},
    {"k": "d", "n": None, "t": START + timedelta(minutes=2)},
]
SCHEMA = {"k": str, "n": int, "t": datetime}


REPEATED = [
    {"k": "a", "i": 0, "t": START},
    {"k": "a", "i": 1, "t": START},
    {"k": "c", "i": 0, "t": START + timedelta(minutes=1)},
    {"k": "c", "i": 1, "t": START + timedelta(minutes=1)},
    {"k": "c", "i": 2, "t": START + timedelta(minutes=1)},
]


# --- FlatMap -----------------------------------------------------------------------------


def test_flat_map_gives_zero_or_more_rows_per_row(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = (p | sb.Create(ROWS, schema=SCHEMA)).flat_map(
        repeat, schema={"k": str, "i": int, "t": datetime}
    )
    assert row_multiset(p.run().collect(out)) == row_multiset(REPEATED)


def test_flat_map_with_a_generator_and_the_input_schema() -> None:
    def twice(row: dict[str, Any]) -> Any:
        yield row
        yield {**row, "n": -1}

    p = sb.Pipeline()
    out = p | sb.Create(ROWS[:1], schema=SCHEMA) | sb.FlatMap(twice)
    assert p.run().collect(out) == [ROWS[0], {**ROWS[0], "n": -1}]


def test_flat_map_keeps_the_watermarks_it_is_told_to_keep() -> None:
    stream = sb.TestStream(SCHEMA).add_epoch(ROWS[:2]).add_epoch(ROWS[2:])
    p = sb.Pipeline()
    marked = p | stream | sb.WithWatermark("t", delay=timedelta(0))
    schema = {"k": str, "i": int, "t": datetime}
    kept = marked.flat_map(repeat, schema=schema, keeps=["t"])
    dropped = marked.flat_map(repeat, schema=schema)
    assert kept.watermarked_columns == {"t"}
    assert dropped.watermarked_columns == frozenset()
    result = p.run()
    assert [m.column for m in result.watermarks(kept)] and all(
        m.column == "t" for m in result.watermarks(kept)
    )
    assert result.watermarks(dropped) == []


def test_flat_map_breaking_its_keeps_promise_is_caught() -> None:
    """A row whose kept time is moved is a `DataError` naming the `FlatMap` (issue 19)."""

    def earlier(row: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**row, "t": row["t"] - timedelta(hours=1)}]

    stream = sb.TestStream(SCHEMA).add_epoch(ROWS[:2]).add_epoch(ROWS[2:])
    p = sb.Pipeline()
    (p | stream).with_watermark("t", timedelta(0)).flat_map(earlier, keeps=["t"])
    with pytest.raises(sb.DataError, match=r"^FlatMap\(earlier\): keeps=\['t'\]"):
        p.run()


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda row: {"k": "x"}, "return an iterable of row dicts"),
        (lambda row: None, "return an iterable of row dicts"),
        (lambda row: [{"k": "x"}], "missing column"),
        (lambda row: 1 // 0, "ZeroDivisionError"),
    ],
)
def test_flat_map_bad_output_is_a_data_error_naming_the_transform(fn: Any, message: str) -> None:
    p = sb.Pipeline()
    p | sb.Create(ROWS, schema=SCHEMA) | "explode" >> sb.FlatMap(fn)
    with pytest.raises(sb.DataError, match=f"explode.*{message}|{message}.*explode"):
        p.run()


def test_flat_map_refuses_a_keep_it_cannot_keep() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create(ROWS, schema=SCHEMA)
    with pytest.raises(sb.PipelineError, match="keeps"):
        rows | sb.FlatMap(repeat, schema={"k": str}, keeps=["t"])
    with pytest.raises(sb.PipelineError, match="callable"):
        sb.FlatMap("not a function")  # type: ignore[arg-type]


# --- Partition ---------------------------------------------------------------------------


def test_partition_splits_rows_among_n_outputs(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    outputs = p | sb.Create(ROWS, schema=SCHEMA) | sb.Partition(by_n, 3)
    assert isinstance(outputs, tuple) and len(outputs) == 3
    result = p.run()
    got = [row_multiset(result.collect(output)) for output in outputs]
    assert got == [
        row_multiset([ROWS[1], ROWS[2], ROWS[3]]),
        row_multiset([]),
        row_multiset([ROWS[0]]),
    ]
    assert all(output.schema == outputs[0].schema for output in outputs)
    assert outputs[0].schema == sb.Schema.of(SCHEMA)


def test_partition_fluent_and_its_watermarks() -> None:
    stream = sb.TestStream(SCHEMA).add_epoch(ROWS[:2]).add_epoch(ROWS[2:])
    p = sb.Pipeline()
    marked = (p | stream).with_watermark("t", timedelta(0))
    even, odd = marked.partition(by_n, 2)
    assert even.watermarked_columns == odd.watermarked_columns == {"t"}
    result = p.run()
    assert result.watermarks(even) == result.watermarks(odd) == result.watermarks(marked)
    assert result.collect_by_epoch(odd) == [[], [ROWS[2]], []]


@pytest.mark.parametrize("index", [3, -1, "0", None, True])
def test_partition_index_out_of_range_is_a_data_error(index: Any) -> None:
    p = sb.Pipeline()
    p | sb.Create(ROWS, schema=SCHEMA) | "split" >> sb.Partition(lambda row, n: index, 3)
    with pytest.raises(sb.DataError, match=r"split.*integer in \[0, 3\).*'k': 'a'"):
        p.run()


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_partition_needs_a_positive_count(n: Any) -> None:
    with pytest.raises(sb.PipelineError, match="at least 1"):
        sb.Partition(by_n, n)


def test_partition_calls_fn_once_per_row_on_the_direct_runner() -> None:
    calls: list[str] = []

    def counted(row: dict[str, Any], n: int) -> int:
        calls.append(row["k"])
        return 0

    p = sb.Pipeline()
    outputs = p | sb.Create(ROWS, schema=SCHEMA) | sb.Partition(counted, 4)
    result = p.run()
    assert sorted(calls) == ["a", "b", "c", "d"]
    assert len(result.collect(outputs[0])) == 4


# --- both runners on unbounded input -------------------------------------------------------


def flat_and_partitioned(p: sb.Pipeline) -> tuple[dict[str, sb.PCollection], list[Any]]:
    stream = sb.TestStream(SCHEMA).add_epoch(ROWS[:2]).add_epoch(ROWS[2:])
    marked = (p | stream).with_watermark("t", timedelta(0))
    repeated = marked.flat_map(repeat, schema={"k": str, "i": int, "t": datetime}, keeps=["t"])
    first, second = marked.partition(by_n, 2)
    counted = repeated.tumble("t", "1 minute").combine_per_key(["window_start", "k"], n=sb.Count())
    return {"repeated": repeated, "first": first, "second": second, "counted": counted}, [marked]


@pytest.mark.spark
def test_runners_agree_on_flat_map_and_partition_streaming(spark_runner: Any) -> None:
    assert_agree_epoch_by_epoch(flat_and_partitioned, spark_runner)
