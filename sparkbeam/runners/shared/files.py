"""Reading files on the driver: json lines and csv with the standard library, parquet with
pyarrow (formats as in `transforms.files`), each file opened through a `sparkbeam.paths.Paths`.

The direct runner reads every file this way; the Spark runner reads the files
of the sources it replays epoch by epoch.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
from collections.abc import Iterator
from typing import Any, Final

from sparkbeam.arrow import from_arrow
from sparkbeam.errors import DataError
from sparkbeam.paths import DRIVER, Paths
from sparkbeam.schema import Columns, Row, Schema, rows_to_columns, type_name
from sparkbeam.time import from_micros, to_micros
from sparkbeam.transforms.files import parquet_footer, parquet_mismatch, unreadable_parquet

ROWS_PER_CHUNK = 8192


def _parse_text(text: str, kind: type) -> Any:
    if kind is str:
        return text
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"not a boolean: {text!r}")
        return text.lower() == "true"
    if kind is _dt.datetime:
        return _timestamp(text)
    raise ValueError(f"cannot read a {type_name(kind)} from text")


def _timestamp(text: str) -> _dt.datetime:
    value = _dt.datetime.fromisoformat(text.replace(" ", "T", 1))
    return from_micros(to_micros(value))


def _bad(path: str, where: str, column: str, value: Any, kind: type, label: str) -> DataError:
    return DataError(
        f"{label}: {path!r} {where}: column {column!r} should be {type_name(kind)} but holds "
        f"{value!r}; fix the file or schema=",
        value,
    )


NOT_A_NUMBER_TEXT: Final = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}
"""The strings JSON holds for floats that are no number (as Spark writes and reads them)."""


def _text(path: str, paths: Paths) -> io.TextIOWrapper:
    return io.TextIOWrapper(paths.open_input(path), encoding="utf-8", newline="")


def read_json(path: str, schema: Schema, label: str, paths: Paths = DRIVER) -> Iterator[Row]:
    with _text(path, paths) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{label}: {path!r} line {number} is not JSON ({exc})") from None
            if not isinstance(record, dict):
                raise DataError(f"{label}: {path!r} line {number} is not a JSON object")
            row: Row = {}
            for name, kind in schema.fields:
                value = record.get(name)
                if kind is _dt.datetime and isinstance(value, str):
                    try:
                        value = _timestamp(value)
                    except ValueError:
                        raise _bad(path, f"line {number}", name, value, kind, label) from None
                elif kind is float and isinstance(value, str) and value in NOT_A_NUMBER_TEXT:
                    value = NOT_A_NUMBER_TEXT[value]
                row[name] = value
            yield row


def read_csv(path: str, schema: Schema, label: str, paths: Paths = DRIVER) -> Iterator[Row]:
    with _text(path, paths) as handle:
        reader = csv.DictReader(handle)
        missing = [name for name in schema.names if name not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{label}: {path!r} has no column(s) {missing} in its header row")
        for number, record in enumerate(reader, start=2):
            row: Row = {}
            for name, kind in schema.fields:
                text = record[name]
                try:
                    row[name] = None if text in ("", None) else _parse_text(text, kind)
                except ValueError:
                    raise _bad(path, f"line {number}", name, text, kind, label) from None
            yield row


def read_parquet(
    path: str, schema: Schema, label: str, paths: Paths = DRIVER, origin: str = "schema="
) -> Iterator[Columns]:
    """One parquet file's rows as columns, in batches; a `DataError` naming the column, the
    file's type and `schema`'s (which `origin` gave) when they differ (`parquet_mismatch`)."""
    # Parquet needs pyarrow, an optional dependency: imported only when used.
    import pyarrow as pa
    import pyarrow.parquet as pq

    mismatch = parquet_mismatch(label, path, parquet_footer(path, label, paths), schema, origin)
    if mismatch is not None:
        raise DataError(mismatch)
    # Batch by batch: one chunk's worth of the file in memory at a time, and no
    # `pyarrow.dataset` (whose import pulls in pandas: a fifth of a second).
    with paths.open_input(path) as handle:
        try:
            file = pq.ParquetFile(handle)
            batches = file.iter_batches(ROWS_PER_CHUNK, columns=list(schema.names))
            for batch in batches:
                if batch.num_rows:
                    _require_microseconds(batch, schema, path, label)
                    yield from_arrow(batch, schema)
        except (pa.ArrowException, OSError) as exc:
            raise unreadable_parquet(path, label, exc) from exc


def _require_microseconds(batch: Any, schema: Schema, path: str, label: str) -> None:
    """A `DataError` naming the column, the file and the time when a nanosecond timestamp of
    `batch` is finer than a microsecond, which sparkbeam's times (and Spark's) cannot hold."""
    import pyarrow as pa

    for name, kind in schema.fields:
        array = batch.column(name)
        if kind is not _dt.datetime or not pa.types.is_timestamp(array.type):
            continue
        if array.type.unit != "ns":
            continue
        for nanos in array.cast(pa.int64()).to_pylist():
            if nanos is not None and nanos % 1000:
                micros = from_micros(nanos // 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
                shown = f"{micros}{nanos % 1000:03d}"
                raise DataError(finer_than_a_microsecond(label, name, repr(path), shown))


def finer_than_a_microsecond(label: str, column: str, file: str, time: str) -> str:
    """What a `DataError` says of a nanosecond timestamp `time` (shown to the nanosecond) in
    `column` of `file` (quoted) that is not a whole microsecond, on both runners."""
    return (
        f"{label}: column {column!r} of {file} holds a time finer than a microsecond ({time}); "
        "times are kept in microseconds: write the file with microsecond timestamps (pyarrow's "
        "coerce_timestamps='us', allow_truncated_timestamps=True), or round them first"
    )


def read_file(
    path: str,
    format: str,
    schema: Schema,
    label: str,
    paths: Paths = DRIVER,
    origin: str = "schema=",
) -> Iterator[Columns]:
    """One file's rows as columns, in batches, checked against `schema` (`DataError` names
    the file and the row; `origin`: what gave the schema, for a parquet file's); read
    through `paths`."""
    if format == "parquet":
        yield from read_parquet(path, schema, label, paths, origin)
        return
    reader = read_json if format == "json" else read_csv
    rows = reader(path, schema, label, paths)
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROWS_PER_CHUNK:
            yield rows_to_columns(batch, schema, f"{label} ({path})")
            batch = []
    if batch:
        yield rows_to_columns(batch, schema, f"{label} ({path})")
