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
Where the query reads none of its late rows and it is the source's only
`WithWatermark` (`Mark.drops`), the reader drops them itself and writes no
column. A file of many rows is read as several partitions, row ranges of it
(`PART_ROWS`, `row_ranges`), each with the file's watermarks.

Files are taken in name order (as the direct runner takes them), at most
`FILES_PER_BATCH` per micro-batch. A file that appears with a name before
one already read is refused with an error naming it: its rows would be
judged by a watermark that already moved past them. A file whose footer has
no usable statistics of the time column (INT96 timestamps, as Spark writes
them; a writer that left statistics out) has that one column read on the
driver instead. A replayed batch after a restart gets the same files and
watermarks, from the offset log.

The reader also counts what the `WithWatermark`s' observations would (`Counts`:
rows, rows with no time, late rows, largest times), as it plans each batch on
the driver: from the footers, reading the time column only of the row groups
its watermark falls inside (`late_rows`; for the next batch's files, while a
batch runs: `FootersReader._count_ahead`). The counts travel in the batch's end
offset, which the offset log keeps (a replayed batch counts the same), and the
runner reads them from the query's progress (`batch_counts`): no aggregate
over every row in the query.

This module runs in Spark's Python processes (the source's planner and its
readers), which may have only pyspark, pandas and pyarrow: it imports nothing
else, and the runner pickles it by value (`live_footers`), so that those
processes never import sparkbeam (a quarter of a second each, on the loaded
2-core test machine).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeGuard, cast

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

PART_ROWS = 500_000
"""The fewest rows of a partition: a file of more rows is read as several partitions, up to
the session's parallelism (option `parallelism`), so that Spark turns its rows into its own
on several cores (a Python source's Arrow batches become Spark's rows in the task that
reads them: the slow part of a big file). Cut at row-group edges where the file has enough
row groups; a cut inside a row group decodes that group in both partitions."""


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
    drops: bool = False
    """The reader drops the rows late by this watermark itself and writes no `column`
    (nothing in the query reads the late rows)."""

    def watermark(self, latest: int | None) -> int | None:
        """The model's watermark after the largest event time `latest` (None: no watermark)."""
        if latest is None:
            return None
        floored = latest - latest % 1000 if self.in_millis else latest
        return floored - self.delay


@dataclass(frozen=True)
class MarkCounts:
    """The metric keys under which the reader counts one mark's `WithWatermark` (the runner's
    names, `plan.keys`): its input rows with a time and with none, their largest time, the
    rows its filter passes and their largest time."""

    rows: str
    invalid: str
    latest: str
    kept: str
    kept_latest: str


@dataclass(frozen=True)
class Counts:
    """What the reader counts of each micro-batch, carried in its end offset: the source's
    rows under `rows`, and per mark (`MarkCounts`, in the order of the marks)."""

    marks: tuple[MarkCounts, ...]
    rows: str


def options_of(
    path: str,
    marks: Sequence[Mark],
    label: str,
    counts: Counts | None = None,
    parallelism: int = 1,
) -> dict[str, str]:
    """The reader's options (Spark lower-cases the keys)."""
    options = {
        "path": path,
        "marks": json.dumps(
            [[m.column, m.time, m.is_datetime, m.delay, m.in_millis, m.drops] for m in marks]
        ),
        "label": label,
        "files_per_batch": str(FILES_PER_BATCH),
        "parallelism": str(parallelism),
        "part_rows": str(PART_ROWS),
    }
    if counts is not None:
        keys = [[c.rows, c.invalid, c.latest, c.kept, c.kept_latest] for c in counts.marks]
        options["counts"] = json.dumps({"marks": keys, "rows": counts.rows})
    return options


def batch_counts(start: str | dict | None, end: str | dict | None) -> dict[str, int]:
    """What a reader counted of the micro-batch from offset `start` to `end` (as a query's
    progress gives them: JSON text or parsed), by metric key; nothing for a batch that read
    no new file (a no-data batch, an idle trigger) or another source's offsets."""
    before, after = _parsed(start), _parsed(end)
    if after is None or "counts" not in after or after == before:
        return {}
    return dict(after["counts"])


def _parsed(offset: str | dict | None) -> dict | None:
    """An offset as a dict; None for one of another source (not a JSON object)."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return None
    return offset if isinstance(offset, dict) else None


@dataclass
class FilePartition(InputPartition):
    """The rows `first` to `end` (exclusive; None: to the last) of one file of a micro-batch,
    with the watermark of each mark its rows are judged by."""

    path: str
    watermarks: list[int | None]
    first: int = 0
    end: int | None = None


def row_ranges(groups: Sequence[int], parallelism: int, part_rows: int) -> list[tuple[int, int]]:
    """A file's rows (`groups`: the rows of each row group) cut into up to `parallelism`
    ranges `(first, end)` of about the same size, in order, and none where a range would hold
    fewer than `part_rows` rows (`PART_ROWS`). Each cut is the even one moved to the nearest
    row-group edge within a quarter of a range (no group decoded twice), else left inside
    its group."""
    total = sum(groups)
    parts = max(1, min(parallelism, total // max(1, part_rows)))
    edges = list(itertools.accumulate(groups))[:-1]
    near = total // parts // 4
    cuts = []
    for i in range(1, parts):
        cut = i * total // parts
        edge = min(edges, key=lambda edge: abs(edge - cut), default=cut)
        cuts.append(edge if abs(edge - cut) <= near else cut)
    bounds = [0, *cuts, total]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _rows_in_range(
    parquet: pq.ParquetFile, columns: list[str], first: int, end: int | None
) -> Iterator[pa.RecordBatch]:
    """`columns` of the rows `first` to `end` of `parquet` as Arrow batches: only the row
    groups that hold them are decoded."""
    metadata = parquet.metadata
    if first == 0 and end is None:
        yield from parquet.iter_batches(columns=columns)
        return
    end = metadata.num_rows if end is None else end
    groups, start, position = [], 0, None
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        if start < end and start + rows > first:
            groups.append(group)
            position = start if position is None else position
        start += rows
    if position is None:
        return
    for batch in parquet.iter_batches(row_groups=groups, columns=columns):
        low, high = max(first - position, 0), min(end - position, batch.num_rows)
        if high > low:
            yield batch if high - low == batch.num_rows else batch.slice(low, high - low)
        position += batch.num_rows
        if position >= end:
            return  # the rest of its last group: not decoded


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


@dataclass(frozen=True)
class Summary:
    """One time column of one file: its rows, how many hold no time, and the smallest and
    largest time (microseconds since the epoch for datetimes; None: no time at all)."""

    rows: int
    nulls: int
    smallest: int | None
    latest: int | None


def summary(path: str, column: str, is_datetime: bool) -> Summary:
    """`Summary` of `column` in the parquet file at `path`, from its footer's statistics where
    every row group has them (INT64 or INT32 values, null counts), else from the column itself
    (INT96 timestamps, a writer that left statistics out)."""
    parquet = open_parquet(path)
    if parquet.schema_arrow.get_field_index(column) < 0:
        return Summary(parquet.metadata.num_rows, 0, None, None)  # refused by `read`
    groups = _group_summaries(parquet, column, is_datetime)
    if groups is None:
        return _read_summary(parquet, column, is_datetime)
    nulls = 0
    smallest: int | None = None
    latest: int | None = None
    for group in groups:
        nulls += group.nulls
        smallest = _min(smallest, group.smallest)
        latest = _max(latest, group.latest)
    return Summary(parquet.metadata.num_rows, nulls, smallest, latest)


def _group_summaries(
    parquet: pq.ParquetFile, column: str, is_datetime: bool
) -> list[Summary] | None:
    """`Summary` of `column` in each row group, from the footer's statistics; None where a
    group has none usable (INT96 timestamps, statistics left out), or `column` is nested."""
    metadata = parquet.metadata
    leaves = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    if column not in leaves:
        return None
    index = leaves.index(column)
    scale = _micros_per_unit(parquet.schema_arrow.field(column).type) if is_datetime else 1
    physical = metadata.schema.column(index).physical_type
    if scale is None or physical not in ("INT64", "INT32"):
        return None
    groups = []
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        stats = metadata.row_group(group).column(index).statistics
        if rows == 0:
            groups.append(Summary(0, 0, None, None))
        elif stats is None or not stats.has_null_count:
            return None
        elif stats.null_count == rows:
            groups.append(Summary(rows, rows, None, None))  # no time: no bounds either
        elif not stats.has_min_max:
            return None
        else:
            bounds = int(stats.min_raw) * scale, int(stats.max_raw) * scale
            groups.append(Summary(rows, stats.null_count, *bounds))
    return groups


def _micros_per_unit(kind: pa.DataType) -> int | None:
    if pa.types.is_timestamp(kind):
        return MICROS_PER_UNIT[kind.unit]
    return None


def _times(parquet: pq.ParquetFile, column: str, is_datetime: bool) -> pa.Array | pa.ChunkedArray:
    """The values of `column`, as integers in the units the watermark compares (microseconds
    for datetimes)."""
    return _as_units(parquet.read(columns=[column]).column(0), is_datetime)


def _as_units(values: pa.Array | pa.ChunkedArray, is_datetime: bool) -> pa.Array | pa.ChunkedArray:
    """Event times as integers in the units the watermark compares (microseconds for
    datetimes)."""
    if is_datetime:
        return values.cast(pa.timestamp("us", tz="UTC"), safe=False).cast(pa.int64())
    return values.cast(pa.int64())


def _read_summary(parquet: pq.ParquetFile, column: str, is_datetime: bool) -> Summary:
    """`Summary` of `column`, read (a footer with no usable statistics)."""
    values = _times(parquet, column, is_datetime)
    bounds = pc.min_max(values).as_py()
    return Summary(len(values), values.null_count, bounds["min"], bounds["max"])


def late_rows(path: str, column: str, is_datetime: bool, watermark: int) -> int:
    """The rows of the file at `path` whose time in `column` lies below `watermark`: counted
    from the footer for each row group wholly on one side of it, read for the others (every
    group, where the footer has no usable statistics)."""
    parquet = open_parquet(path)
    groups = _group_summaries(parquet, column, is_datetime)
    if groups is None:
        return _late(_times(parquet, column, is_datetime), watermark)
    late = 0
    for index, group in enumerate(groups):
        if group.smallest is None or group.smallest >= watermark:
            continue  # no time, or none below the watermark
        if group.latest is not None and group.latest < watermark:
            late += group.rows - group.nulls
            continue
        values = parquet.read_row_group(index, columns=[column]).column(0)
        late += _late(_as_units(values, is_datetime), watermark)
    return late


def _late(values: pa.Array | pa.ChunkedArray, watermark: int) -> int:
    return int(pc.sum(pc.less(values, arrow_int64(watermark))).as_py() or 0)


def arrow_int64(value: int) -> pa.Int64Scalar:
    """`value` as an Arrow scalar, made from its bytes: the first time pyarrow turns a Python
    value into an Arrow one (`pa.scalar`, a Python operand of `pyarrow.compute`) it imports
    pandas, about half a second in each new Python process Spark starts for a query."""
    data = pa.py_buffer(value.to_bytes(8, sys.byteorder, signed=True))
    return cast(pa.Int64Scalar, pa.Array.from_buffers(pa.int64(), 1, [None, data])[0])


Latest = dict[str, int | None]
"""The largest time of each event time column (None: none yet)."""

LateKey = tuple[str, str, int]
"""A file's name, one of its time columns and a watermark: its late rows by them."""


class FootersReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets `{"last": the last file read or None, "latest": the largest time of each event
    time column through it, "files": the names the batch ending there read, "counts": what
    it counted of them (with the option `counts`: `Counts`)}`; everything a batch needs
    follows from its two offsets (a batch replayed after a restart reads the same files with
    the same watermarks)."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.directory = options["path"]
        self.marks = [Mark(*fields) for fields in json.loads(options["marks"])]
        self.times = {mark.time: mark.is_datetime for mark in self.marks}
        self.label = options.get("label", "ReadFiles")
        counts = json.loads(options["counts"]) if "counts" in options else None
        self.counts = (
            None
            if counts is None
            else Counts(tuple(MarkCounts(*keys) for keys in counts["marks"]), counts["rows"])
        )
        self.files_per_batch = int(options.get("files_per_batch", "1"))
        self.parallelism = int(options.get("parallelism", "1"))
        self.part_rows = int(options.get("part_rows", str(PART_ROWS)))
        self.known: set[str] | None = None
        """The names listed last time: a new name before the last read is refused."""
        self.until: str | None = None
        """With `Trigger.AvailableNow`: the last file there when the query started."""
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: Future[dict[LateKey, int]] | None = None
        """The late rows of the files after the last batch's, counted while it runs."""

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pool": None, "_ahead": None}  # the planner's own

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
        latest: Latest = dict(start["latest"])
        counts: dict[str, int | None] = {}
        for name in names:
            summaries = self._summaries(name)
            if self.counts is not None:
                self._count(counts, name, latest, summaries)
            latest = _after(latest, summaries)
        offset = {"last": names[-1], "latest": latest, "files": names}
        if self.counts is not None:
            offset["counts"] = counts
            self._count_ahead(names[-1], latest)
        return offset

    def _count_ahead(self, last: str, latest: Latest) -> None:
        """Count, in a thread of the source's process while the batch ending at `last` runs,
        the late rows of the files the next batch will likely take (`_late_rows` then finds
        them): a file's time column read on the driver is otherwise a pause between batches
        (about 15 ms for a million rows of one row group)."""
        following = [name for name in (self.known or ()) if name > last]
        if self.until is not None:
            following = [name for name in following if name <= self.until]
        following = sorted(following)[: self.files_per_batch]
        if not following:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="sparkbeam-footers")
        self._ahead = self._pool.submit(self._late_ahead, following, latest)

    def _late_ahead(self, names: list[str], latest: Latest) -> dict[LateKey, int]:
        late = {}
        for name in names:
            summaries = self._summaries(name)
            for mark in self.marks:
                watermark = mark.watermark(latest[mark.time])
                if _may_hold_late(watermark, summaries[mark.time]):
                    late[(name, mark.time, watermark)] = self._read_late(name, mark, watermark)
            latest = _after(latest, summaries)
        return late

    def _late_rows(self, name: str, mark: Mark, watermark: int) -> int:
        """The rows of the file `name` below `watermark` by `mark`'s time: counted ahead
        (`_count_ahead`), or now."""
        if self._ahead is not None:
            try:
                counted = self._ahead.result().get((name, mark.time, watermark))
            except Exception:  # counted now instead, which raises what it raises
                counted = None
            if counted is not None:
                return counted
        return self._read_late(name, mark, watermark)

    def _read_late(self, name: str, mark: Mark, watermark: int) -> int:
        """The rows of the file `name` below `watermark` by `mark`'s time, read from its
        time column (`late_rows`)."""
        path = os.path.join(self.directory, name)
        return late_rows(path, mark.time, mark.is_datetime, watermark)

    def _count(
        self,
        counts: dict[str, int | None],
        name: str,
        latest: Latest,
        summaries: dict[str, Summary],
    ) -> None:
        """Add to `counts` the file `name`'s rows as each mark's filter judges them, with the
        watermark of the files before it (`latest`): from its footer, and its time column
        read only where the footer's smallest time lies below the watermark."""
        assert self.counts is not None
        rows = next(iter(summaries.values())).rows  # the file's, in every summary
        counts[self.counts.rows] = (counts.get(self.counts.rows) or 0) + rows
        for mark, keys in zip(self.marks, self.counts.marks, strict=True):
            of = summaries[mark.time]
            watermark = mark.watermark(latest[mark.time])
            late = self._late_rows(name, mark, watermark) if _may_hold_late(watermark, of) else 0
            valid = of.rows - of.nulls
            for key, value in (
                (keys.rows, valid),
                (keys.invalid, of.nulls),
                (keys.kept, valid - late),
            ):
                counts[key] = (counts.get(key) or 0) + value
            if of.latest is not None:
                counts[keys.latest] = _max(counts.get(keys.latest), of.latest)
                if watermark is None or of.latest >= watermark:  # the largest row passes
                    counts[keys.kept_latest] = _max(counts.get(keys.kept_latest), of.latest)

    def _summaries(self, name: str) -> dict[str, Summary]:
        """Each event time column of the file `name` (`summary`)."""
        path = os.path.join(self.directory, name)
        try:
            return {
                time: summary(path, time, is_datetime) for time, is_datetime in self.times.items()
            }
        except (OSError, pa.ArrowException) as exc:
            raise self._unreadable(path, exc) from None

    def _ranges(self, path: str) -> list[tuple[int, int]] | None:
        """The row ranges the file at `path` is read in (`row_ranges`); None: as one."""
        if self.parallelism < 2:
            return None
        try:
            metadata = open_parquet(path).metadata
        except (OSError, pa.ArrowException) as exc:
            raise self._unreadable(path, exc) from None
        groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        ranges = row_ranges(groups, self.parallelism, self.part_rows)
        return ranges if len(ranges) > 1 else None

    def _unreadable(self, path: str, exc: Exception) -> FootersError:
        return FootersError(
            f"{PIPELINE_ERROR_MARK}{self.label}: cannot read the footer of {path!r} "
            f"({exc}): a file must be whole when its name appears; write it under a name "
            "that starts with '.' or '_' (which the source skips) and rename it when done"
        )

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == end:
            return []
        names = end["files"]
        latest = dict(start["latest"])
        partitions: list[InputPartition] = []
        for i, name in enumerate(names):
            if i:  # the files before this one moved it on (the last file's footer: unneeded)
                latest = _after(latest, self._summaries(names[i - 1]))
            watermarks = [mark.watermark(latest[mark.time]) for mark in self.marks]
            path = os.path.join(self.directory, name)
            ranges = self._ranges(path)
            if ranges is None:
                partitions.append(FilePartition(path, watermarks))
            else:
                partitions.extend(FilePartition(path, watermarks, a, b) for a, b in ranges)
        return partitions

    def commit(self, end: dict) -> None:
        pass

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        file = cast(FilePartition, partition)  # pickled by value: no `isinstance`
        target = to_arrow_schema(self.schema, timezone="UTC")
        written: list[tuple[Mark, int | None]] = []
        dropping: list[tuple[Mark, int | None]] = []
        for mark, watermark in zip(self.marks, file.watermarks, strict=True):
            (dropping if mark.drops else written).append((mark, watermark))
        names = target.names[: len(target.names) - len(written)]
        parquet = open_parquet(file.path)
        present = set(parquet.schema_arrow.names)
        missing = [name for name in names if name not in present]
        if missing:
            raise FootersError(
                f"{PIPELINE_ERROR_MARK}{self.label}: {file.path!r} has no column(s) "
                f"{missing}; fix schema= or the files"
            )
        for batch in _rows_in_range(parquet, names, file.first, file.end):
            columns = [
                _cast(batch.column(i), target.field(name).type, name, file.path, self.label)
                for i, name in enumerate(names)
            ]
            rows = batch.num_rows
            for _, watermark in written:
                columns.append(  # one value repeated: 0.15 ms, a list 3.4 ms
                    pa.nulls(rows, pa.int64())
                    if watermark is None
                    else pa.repeat(arrow_int64(watermark), rows)
                )
            made = pa.RecordBatch.from_arrays(columns, schema=target)
            for mark, watermark in dropping:
                if watermark is not None:  # rows with no time pass, as the filter's do
                    times = _as_units(made.column(names.index(mark.time)), mark.is_datetime)
                    kept = pc.greater_equal(times, arrow_int64(watermark))
                    kept = pc.or_kleene(pc.is_null(times), kept)
                    made = made.filter(kept)
            if made.num_rows:
                yield made


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


def _may_hold_late(watermark: int | None, of: Summary) -> TypeGuard[int]:
    """Whether a file whose time column `of` summarises may hold rows below `watermark`
    (None: no watermark yet): its footer's smallest time lies below it."""
    return watermark is not None and of.smallest is not None and of.smallest < watermark


def _after(latest: Latest, summaries: dict[str, Summary]) -> Latest:
    """`latest` moved on by a file's `summaries`."""
    return {time: _max(before, summaries[time].latest) for time, before in latest.items()}


def _max(a: int | None, b: int | None) -> int | None:
    """The larger of `a` and `b`, None standing for no value."""
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    """The smaller of `a` and `b`, None standing for no value."""
    return b if a is None else a if b is None else min(a, b)
