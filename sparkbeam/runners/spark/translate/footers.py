"""A live directory of parquet files read by a Python streaming source that knows, before Spark
reads a row, the model's watermark every row is judged by: from the files' footers.

The model judges the rows of each new file (an epoch) by the watermark after
the files before it: `floor_ms(max) - delay` of their largest event time (`E
- L` with `allowed_lateness`; `max - delay` on an integer time). A parquet
file's footer holds the minimum and maximum of each column per row group, so
the driver knows each new file's largest time without reading its rows. The
offsets carry the last file read and the running maximum through it; each
file's partition carries the watermark of the files before it, written on
its rows as a constant column (one per `WithWatermark` reading the source,
with its delay). The `WithWatermark` then filters with a plain comparison
(`exact.late_filter.epoch_watermark_filter`, as for an epoch the runner
feeds): no state, no shuffle; its late rows are the comparison inverted.

Files are taken in name order (as the direct runner takes them), at most
`FILES_PER_BATCH` per micro-batch. A file that appears with a name before
one already read is refused with an error naming it: its rows would be
judged by a watermark that already moved past them. A file whose footer has
no usable statistics of the time column (INT96 timestamps, as Spark writes
them; a writer that left statistics out) has that one column read on the
driver instead. A replayed batch after a restart gets the same files and
watermarks, from the offset log.

This module runs in Spark's Python processes (the source's planner and its
readers), which may have only pyspark, pandas and pyarrow: it imports nothing
else, and the runner pickles it by value (`live_footers`), so that those
processes never import sparkbeam (a quarter of a second each, on the loaded
2-core test machine).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

PIPELINE_ERROR_MARK = "sparkbeam.PipelineError: "
"""`python_functions.PIPELINE_ERROR_MARK`: the runner turns the message after it into a
`PipelineError` (`engine_errors`)."""


class FootersError(Exception):
    """A refusal of the reader, raised in Spark's Python process, its message marked."""


SOURCE_NAME = "sparkbeam_parquet_footers"

FILES_PER_BATCH = 1
"""New files per micro-batch: one, an epoch as on the direct runner."""


MICROS_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


@dataclass(frozen=True)
class Mark:
    """One `WithWatermark` reading the source: the column its rows carry its watermark in,
    its event time column (`time`, a datetime or an integer) and its watermark function
    (`transforms.watermark.WatermarkFunction`)."""

    column: str
    time: str
    is_datetime: bool
    delay: int
    in_millis: bool

    def watermark(self, latest: int | None) -> int | None:
        """The model's watermark after the largest event time `latest` (None: no watermark)."""
        if latest is None:
            return None
        floored = latest - latest % 1000 if self.in_millis else latest
        return floored - self.delay


def options_of(path: str, marks: Sequence[Mark], label: str) -> dict[str, str]:
    """The reader's options (Spark lower-cases the keys)."""
    return {
        "path": path,
        "marks": json.dumps(
            [[m.column, m.time, m.is_datetime, m.delay, m.in_millis] for m in marks]
        ),
        "label": label,
        "files_per_batch": str(FILES_PER_BATCH),
    }


@dataclass
class FilePartition(InputPartition):
    """One file of a micro-batch, with the watermark of each mark its rows are judged by."""

    path: str
    watermarks: list[int | None]


class ParquetFootersSource(DataSource):
    """The source Spark registers (`SOURCE_NAME`); it needs the schema given to the reader."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FootersReader(schema, dict(self.options))


def _data_files(directory: str) -> list[str]:
    """The directory's data files by name (hidden, temporary and Spark's metadata left out)."""
    names = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith((".", "_")) or not entry.is_file():
                continue
            names.append(entry.name)
    return sorted(names)


def open_parquet(path: str) -> pq.ParquetFile:
    """A parquet file with INT96 timestamps (Spark's own) in microseconds, as Spark reads them."""
    return pq.ParquetFile(path, coerce_int96_timestamp_unit="us")


def latest_time(path: str, column: str, is_datetime: bool) -> int | None:
    """The largest non-null time of `column` in the parquet file at `path` (microseconds since
    the epoch for datetimes), from its footer's statistics where every row group has them
    (INT64 or INT32 values), else from the column itself (INT96 timestamps, a writer that left
    statistics out); None when it holds none (an empty file)."""
    parquet = open_parquet(path)
    metadata = parquet.metadata
    kinds = parquet.schema_arrow
    if kinds.get_field_index(column) < 0:
        return None  # refused by `read`, with the file named
    leaves = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    if column not in leaves:
        return _read_latest(parquet, column, is_datetime)
    index = leaves.index(column)
    scale = _micros_per_unit(kinds.field(column).type) if is_datetime else 1
    physical = metadata.schema.column(index).physical_type
    latest: int | None = None
    for group in range(metadata.num_row_groups):
        if metadata.row_group(group).num_rows == 0:
            continue
        chunk = metadata.row_group(group).column(index)
        stats = chunk.statistics
        usable = stats is not None and stats.has_min_max
        if scale is None or physical not in ("INT64", "INT32") or not usable:
            return _read_latest(parquet, column, is_datetime)
        value = int(stats.max_raw) * scale
        latest = value if latest is None else max(latest, value)
    return latest


def _micros_per_unit(kind: pa.DataType) -> int | None:
    if pa.types.is_timestamp(kind):
        return MICROS_PER_UNIT[kind.unit]
    return None


def _read_latest(parquet: pq.ParquetFile, column: str, is_datetime: bool) -> int | None:
    """The largest time of `column`, read (a footer with no usable statistics)."""
    values = parquet.read(columns=[column]).column(0)
    if is_datetime:
        values = values.cast(pa.timestamp("us", tz="UTC"), safe=False).cast(pa.int64())
    latest = pc.max(values).as_py()
    return None if latest is None else int(latest)


Latest = dict[str, int | None]
"""The largest time of each event time column (None: none yet)."""


class FootersReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets `{"last": the last file read or None, "latest": the largest time of each event
    time column through it, "files": the names the batch ending there read}`; everything a
    batch needs follows from its two offsets (a batch replayed after a restart reads the same
    files with the same watermarks)."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.directory = options["path"]
        self.marks = [Mark(*fields) for fields in json.loads(options["marks"])]
        self.times = {mark.time: mark.is_datetime for mark in self.marks}
        self.label = options.get("label", "ReadFiles")
        self.files_per_batch = int(options.get("files_per_batch", "1"))
        self.known: set[str] | None = None
        """The names listed last time: a new name before the last read is refused."""
        self.until: str | None = None
        """With `Trigger.AvailableNow`: the last file there when the query started."""

    def initialOffset(self) -> dict:
        return {"last": None, "latest": {time: None for time in self.times}, "files": []}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.files_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        names = _data_files(self.directory)
        self.until = names[-1] if names else ""

    def _new_files(self, last: str | None) -> list[str]:
        """The files after `last` by name; refuses a name before it that was not there at the
        last listing (one this reader made: after a restart, every name before `last` is
        taken as read)."""
        names = _data_files(self.directory)
        if last is not None and self.known is not None:
            for name in names:
                if name < last and name not in self.known:
                    raise FootersError(
                        f"{PIPELINE_ERROR_MARK}{self.label}: "
                        f"{os.path.join(self.directory, name)!r} appeared after "
                        f"{os.path.join(self.directory, last)!r} was read, and its name "
                        "sorts before it: the source reads files in name order, and its rows "
                        "would be judged by a watermark already past them; publish files "
                        "under names that sort after those already there (a time stamp or "
                        "a sequence number first), or start a new query on a new checkpoint"
                    )
        self.known = set(names)
        new = [name for name in names if last is None or name > last]
        if self.until is not None:
            new = [name for name in new if name <= self.until]
        return new

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        names = self._new_files(start["last"])
        if not isinstance(limit, ReadAllAvailable) and isinstance(limit, ReadMaxFiles):
            names = names[: max(1, limit.max_files)]
        if not names:
            return start
        latest = dict(start["latest"])
        for name in names:
            latest = self._after(latest, name)
        return {"last": names[-1], "latest": latest, "files": names}

    def _after(self, latest: Latest, name: str) -> Latest:
        """`latest` moved on by the file `name`."""
        path = os.path.join(self.directory, name)
        try:
            return {
                time: _max(latest[time], latest_time(path, time, is_datetime))
                for time, is_datetime in self.times.items()
            }
        except (OSError, pa.ArrowException) as exc:
            raise FootersError(
                f"{PIPELINE_ERROR_MARK}{self.label}: cannot read the footer of {path!r} "
                f"({exc}): a file must be whole when its name appears; write it under a name "
                "that starts with '.' or '_' (which the source skips) and rename it when done"
            ) from None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == end:
            return []
        names = end["files"]
        latest = dict(start["latest"])
        partitions: list[InputPartition] = []
        for name in names:
            watermarks = [mark.watermark(latest[mark.time]) for mark in self.marks]
            partitions.append(FilePartition(os.path.join(self.directory, name), watermarks))
            latest = self._after(latest, name)
        return partitions

    def commit(self, end: dict) -> None:
        pass

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        file = cast(FilePartition, partition)  # pickled by value: no `isinstance`
        target = to_arrow_schema(self.schema, timezone="UTC")
        names = target.names[: len(target.names) - len(self.marks)]
        parquet = open_parquet(file.path)
        present = set(parquet.schema_arrow.names)
        missing = [name for name in names if name not in present]
        if missing:
            raise FootersError(
                f"{PIPELINE_ERROR_MARK}{self.label}: {file.path!r} has no column(s) "
                f"{missing}; fix schema= or the files"
            )
        for batch in parquet.iter_batches(columns=names):
            columns = [
                _cast(batch.column(i), target.field(name).type, name, file.path, self.label)
                for i, name in enumerate(names)
            ]
            for mark, watermark in zip(self.marks, file.watermarks, strict=True):
                columns.append(
                    pa.array([watermark] * batch.num_rows, target.field(mark.column).type)
                )
            yield pa.RecordBatch.from_arrays(columns, schema=target)


def _cast(values: pa.Array, kind: pa.DataType, name: str, path: str, label: str) -> pa.Array:
    if values.type == kind:
        return values
    if pa.types.is_timestamp(values.type) and values.type.unit == "ns":
        raise FootersError(
            f"{PIPELINE_ERROR_MARK}{label}: {path!r} holds column {name!r} in nanoseconds; "
            "a live source reads microseconds: write the files with "
            "coerce_timestamps='us'"
        )
    return values.cast(kind)


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
