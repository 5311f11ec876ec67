"""Results as frames (SPEC section 8): `to_pandas` and `to_arrow` equal `collect`, on both runners,
with the schema's types (`None`s, datetimes and empty results included); `metrics()` as a table.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import sparkbeam as sb

T0 = datetime(2026, 4, 1, 10, 0)
SCHEMA = {
    "id": int,
    "t": datetime,
    "n": int,
    "x": float,
    "s": str,
    "ok": bool,
    "flag": bool,
}
ROWS = [
    {"id": 1, "t": T0, "n": 5, "x": 1.5, "s": "a", "ok": True, "flag": False},
    {
        "id": 2,
        "t": T0 + timedelta(microseconds=7),
        "n": None,
        "x": None,
        "s": None,
        "ok": None,
        "flag": True,
    },
    {"id": 3, "t": None, "n": -(2**63), "x": -0.25, "s": "ü", "ok": False, "flag": True},
    {
        "id": 4,
        "t": datetime(1970, 1, 1),
        "n": 2**63 - 1,
        "x": 3.0,
        "s": "",
        "ok": True,
        "flag": False,
    },
]
PANDAS_TYPES = {
    "id": "int64",
    "t": "datetime64[us]",
    "n": "Int64",
    "x": "float64",
    "s": "object",
    "ok": "boolean",
    "flag": "bool",
}
ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("t", pa.timestamp("us")),
        ("n", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("ok", pa.bool_()),
        ("flag", pa.bool_()),
    ]
)


def pandas_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as `collect` gives them: `NaT`, `NA` and `NaN` as `None`, Python values."""
    rows = []
    for record in frame.to_dict("records"):
        row = {}
        for name, value in record.items():
            if (
                value is pd.NaT
                or value is pd.NA
                or (isinstance(value, float) and math.isnan(value))
            ):
                value = None
            elif isinstance(value, pd.Timestamp):
                value = value.to_pydatetime()
            elif hasattr(value, "item"):  # numpy scalars
                value = value.item()
            row[name] = value
        rows.append(row)
    return rows


def check_frames(result: Any, pcoll: sb.PCollection, pandas_types: dict[str, str]) -> None:
    rows = result.collect(pcoll)
    frame = result.to_pandas(pcoll)
    assert list(frame.columns) == list(pcoll.schema.names)
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == pandas_types
    assert pandas_rows(frame) == rows
    table = result.to_arrow(pcoll)
    assert table.column_names == list(pcoll.schema.names)
    assert table.to_pylist() == rows


def test_to_pandas_and_to_arrow_equal_collect(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        rows = p | sb.Create(ROWS, schema=SCHEMA)
        none = rows.filter(lambda row: False)
    result = p.result
    assert sorted(result.collect(rows), key=lambda row: row["id"]) == ROWS
    check_frames(result, rows, PANDAS_TYPES)
    assert result.to_arrow(rows).schema == ARROW_SCHEMA
    empty_types = {**PANDAS_TYPES, "n": "int64", "ok": "bool"}
    check_frames(result, none, empty_types)
    assert result.to_arrow(none).schema == ARROW_SCHEMA
    assert result.to_arrow(none).num_rows == 0
    assert len(result.to_pandas(none)) == 0


def test_frames_keep_collect_order_on_a_stream() -> None:
    stream = sb.TestStream({"k": str, "t": datetime, "v": int})
    stream.add_epoch([{"k": "a", "t": T0 + timedelta(minutes=m), "v": m} for m in (3, 1, 2)])
    stream.add_epoch([{"k": "b", "t": T0 + timedelta(minutes=m), "v": None} for m in (9, 4)])
    with sb.Pipeline() as p:
        ordered = (p | stream).with_watermark("t", "1 minute").sort("t")
    frame = p.result.to_pandas(ordered)
    assert pandas_rows(frame) == p.result.collect(ordered)
    assert [row["v"] for row in pandas_rows(frame)] == [1, 2, 3, None, None]
    assert str(frame["v"].dtype) == "Int64"
    assert p.result.to_arrow(ordered).to_pylist() == p.result.collect(ordered)


@pytest.mark.spark
def test_frames_equal_collect_on_spark_streaming(spark_runner: Any) -> None:
    stream = sb.TestStream({"k": str, "t": datetime, "v": int})
    stream.add_epoch([{"k": "a", "t": T0, "v": 1}, {"k": None, "t": T0, "v": None}])
    stream.add_epoch([{"k": "b", "t": T0 + timedelta(minutes=3), "v": 2}])
    with sb.Pipeline(runner=spark_runner) as p:
        watermarked = (p | stream).with_watermark("t", "1 minute")
        per_minute = watermarked.tumble("t", "1 minute").combine_per_key(
            ["window_start", "k"], total=sb.Sum("v"), n=sb.Count()
        )
    result = p.result
    rows = result.collect(per_minute)
    assert len(rows) == 3
    frame = result.to_pandas(per_minute)
    assert pandas_rows(frame) == rows
    types = {name: str(dtype) for name, dtype in frame.dtypes.items()}
    assert types == {
        "window_start": "datetime64[us]",
        "k": "object",
        "total": "Int64",
        "n": "int64",
    }
    table = result.to_arrow(per_minute)
    assert table.to_pylist() == rows
    assert table.schema.field("window_start").type == pa.timestamp("us")


def test_metrics_repr_is_a_table() -> None:
    with sb.Pipeline() as p:
        rows = p | "orders" >> sb.Create([{"t": T0}, {"t": None}])
        rows.with_watermark("t", "5 minutes").tumble("t", "1 minute")
    metrics = p.result.metrics()
    assert isinstance(metrics, dict)  # a dict of the transforms' metrics, shown as a table
    assert list(metrics) == ["orders", "WithWatermark(t)", "Tumble(t)"]
    watermarked = metrics["WithWatermark(t)"]
    assert (watermarked.rows_in, watermarked.rows_out, watermarked.invalid_rows) == (2, 1, 1)
    lines = repr(metrics).splitlines()
    assert lines[0].split() == [
        "transform",
        "rows",
        "in",
        "rows",
        "out",
        "late",
        "invalid",
        "state",
        "watermarks",
        "(lag)",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["orders", "WithWatermark(t)", "Tumble(t)"]
    assert lines[2].split()[1:6] == ["2", "1", "0", "1", "0/0"]
    assert "t=2026-04-01 09:55:00 (5 minutes)" in lines[2]
    assert str(metrics) == repr(metrics)


def test_metrics_print_lags_as_a_person_writes_them() -> None:
    """A negative lag printed as `(-1 day, 23:59:00)`: now as the durations of a pipeline
    are written (`-1 minute`, `2 hours 5 minutes`)."""
    from sparkbeam.metrics import PipelineMetrics

    lags = {"t": timedelta(minutes=-1), "u": timedelta(hours=2, minutes=5), "n": -3}
    marks = {"t": T0, "u": T0, "n": 7}
    metrics = PipelineMetrics(
        {"x": sb.TransformMetrics(1, 1, watermarks=marks, watermark_lag=lags)}
    )
    line = metrics.table().splitlines()[1]
    assert "t=2026-04-01 10:00:00 (-1 minute)" in line
    assert "u=2026-04-01 10:00:00 (2 hours 5 minutes)" in line
    assert "n=7 (-3)" in line
