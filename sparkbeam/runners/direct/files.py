"""Direct operators for `ReadFiles` and `WriteFiles`: json and csv with the standard
library, parquet with pyarrow (formats as in `transforms.files`)."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sparkbeam.errors import DataError
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner, SourceOperator
from sparkbeam.schema import Columns, Row, Schema, columns_to_rows, rows_to_columns, type_name
from sparkbeam.time import from_micros, to_micros
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files, parquet_schema

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


def read_json(path: str, schema: Schema, label: str) -> Iterator[Row]:
    with open(path, encoding="utf-8") as lines:
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
                row[name] = value
            yield row


def read_csv(path: str, schema: Schema, label: str) -> Iterator[Row]:
    with open(path, encoding="utf-8", newline="") as handle:
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


def read_parquet(path: str, schema: Schema, label: str) -> Iterator[Columns]:
    # Parquet needs pyarrow, an optional dependency: imported only when used.
    import pyarrow.parquet as pq

    from sparkbeam.arrow import from_arrow

    found = parquet_schema(path, label)
    for name, kind in schema.fields:
        if name not in found or found.type_of(name) is not kind:
            has = type_name(found.type_of(name)) if name in found else "no such column"
            raise DataError(
                f"{label}: schema says column {name!r} is {type_name(kind)}, but {path!r} has "
                f"{has} (a file added after the pipeline was built?); fix the files or schema="
            )
    # Batch by batch: one chunk's worth of the file in memory at a time, and no
    # `pyarrow.dataset` (whose import pulls in pandas: a fifth of a second).
    batches = pq.ParquetFile(path).iter_batches(ROWS_PER_CHUNK, columns=list(schema.names))
    for batch in batches:
        if batch.num_rows:
            yield from_arrow(batch, schema)


def read_file(path: str, format: str, schema: Schema, label: str) -> Iterable[Chunk]:
    """The chunks of one file, checked against `schema` (`DataError` names file and row)."""
    if format == "parquet":
        for columns in read_parquet(path, schema, label):
            size = len(next(iter(columns.values()), []))
            yield Chunk(columns, size)
        return
    rows = read_json(path, schema, label) if format == "json" else read_csv(path, schema, label)
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROWS_PER_CHUNK:
            yield Chunk(rows_to_columns(batch, schema, f"{label} ({path})"), len(batch))
            batch = []
    if batch:
        yield Chunk(rows_to_columns(batch, schema, f"{label} ({path})"), len(batch))


class ReadFilesOperator(SourceOperator):
    """All files in epoch 0, or, with `streaming=True`, one file per epoch."""

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, ReadFiles)
        self.transform = transform
        self.files = data_files(transform.path, node.label)
        self.epoch_count = len(self.files) if transform.streaming else 1

    def epoch(self, epoch: int) -> Iterable[Chunk]:
        if self.transform.streaming:
            files = self.files[epoch : epoch + 1]
        else:
            files = self.files if epoch == 0 else []
        for path in files:
            yield from read_file(path, self.transform.format, self.node.info.schema, self.label)


def _text(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def write_files(path: str, format: str, mode: str, schema: Schema, chunks: Sequence[Chunk]) -> None:
    if os.path.exists(path) and mode == "overwrite":
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.makedirs(path, exist_ok=True)
    target = os.path.join(path, f"part-00000.{format}")
    if format == "parquet":
        import pyarrow.parquet as pq

        from sparkbeam.arrow import to_arrow

        columns = {name: [v for chunk in chunks for v in chunk.columns[name]] for name in schema}
        pq.write_table(to_arrow(columns, schema, path), target)
        return
    rows = [row for chunk in chunks for row in columns_to_rows(chunk.columns, schema)]
    with open(target, "w", encoding="utf-8", newline="") as handle:
        if format == "json":
            for row in rows:
                record = {name: _text(value) for name, value in row.items() if value is not None}
                handle.write(json.dumps(record) + "\n")
        else:
            writer = csv.writer(handle)
            writer.writerow(schema.names)
            for row in rows:
                writer.writerow(["" if v is None else _text(v) for v in row.values()])


class WriteFilesOperator(Operator):
    """Keeps the rows it passes on and writes them all at the end of input.

    With parallel units it runs as one unit (behind an exchange that gathers
    every row), so one file is written. Checkpoint: the chunks kept so far.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, WriteFiles)
        self.transform = node.transform
        self.chunks: list[Chunk] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.chunks.append(chunk)
        return [chunk]

    def on_end(self) -> list[Message]:
        t = self.transform
        write_files(t.path, t.format, t.mode, self.node.info.schema, self.chunks)
        self.chunks = []
        return []

    def snapshot(self) -> list[Chunk]:
        return list(self.chunks)  # chunks are not changed once emitted

    def restore(self, state: list[Chunk]) -> None:
        self.chunks = list(state)

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        kept = [chunk for state in states for chunk in state]
        return [kept] + [[] for _ in range(units - 1)]
