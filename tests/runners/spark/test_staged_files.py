"""Which stage files of a live merge may go (`live_merges.StagedFiles`), on checkpoints laid out
as Spark lays them out (`commits/`, `sources/<id>/` with compactions), without Spark: the
Spark side runs in `test_live_merges.py`."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from sparkbeam.paths import DriverPaths
from sparkbeam.runners.spark.execute.live_merges import (
    StagedFiles,
    committed_offsets,
    delete_unlisted,
    source_log_entries,
)

PATHS = DriverPaths()


def write_log(log: str, name: str, entries: list[tuple[str, int]]) -> None:
    """A file of a file source's log: a version line, then one entry per (path, offset)."""
    os.makedirs(log, exist_ok=True)
    lines = ["v1"] + [
        json.dumps({"path": path, "timestamp": 1, "batchId": offset}) for path, offset in entries
    ]
    with open(os.path.join(log, name), "w") as handle:
        handle.write("\n".join(lines))


def test_the_log_entries_of_offsets_come_from_compactions_and_the_files_after_them(
    tmp_path: Any,
) -> None:
    """Offsets 0-9 compacted into `9.compact` (files 0-8 deleted), 10 and 11 in files of their
    own: every range of offsets is read whole, whichever files hold it."""
    log = str(tmp_path / "sources" / "0")
    write_log(log, "9.compact", [(f"/r/f{n}", n) for n in range(10)])
    write_log(log, "10", [("/r/f10", 10)])
    write_log(log, "11", [("/r/f11", 11)])

    def paths(after: int, through: int) -> list[str]:
        return [entry["path"] for entry in source_log_entries(PATHS, log, after, through)]

    assert paths(-1, 11) == [f"/r/f{n}" for n in range(12)]
    assert paths(3, 5) == ["/r/f4", "/r/f5"]
    assert paths(9, 11) == ["/r/f10", "/r/f11"]
    assert paths(10, 11) == ["/r/f11"]
    write_log(log, "12", [("/r/f12", 12)])
    write_log(log, "19.compact", [(f"/r/f{n}", n) for n in range(20)])
    os.remove(os.path.join(log, "10"))  # Spark deletes what a compaction holds
    assert paths(9, 12) == ["/r/f10", "/r/f11", "/r/f12"]
    os.remove(os.path.join(log, "11"))
    os.remove(os.path.join(log, "19.compact"))
    with pytest.raises(FileNotFoundError):  # a gap is an error, never no files
        source_log_entries(PATHS, log, 9, 11)


class Reader:
    """A final query's checkpoint and the progress Spark reports for it."""

    def __init__(self, root: str, name: str, rows: str) -> None:
        self.checkpoint = os.path.join(root, name)
        self.rows = rows
        self.log = os.path.join(self.checkpoint, "sources", "0")
        self.lastProgress: dict[str, Any] | None = None
        os.makedirs(os.path.join(self.checkpoint, "commits"), exist_ok=True)

    def batch(self, batch: int, offset: int, files: list[str], commit: bool = True) -> None:
        """Batch `batch` reads `files` as its source's offset `offset` (and commits)."""
        write_log(self.log, str(offset), [(f"file://{self.rows}/{f}", offset) for f in files])
        if commit:
            open(os.path.join(self.checkpoint, "commits", str(batch)), "w").close()
        source = {
            "description": f"FileStreamSource[file:{self.rows}]",
            "startOffset": {"logOffset": offset - 1} if offset else None,
            "endOffset": {"logOffset": offset},
        }
        self.lastProgress = {"batchId": batch, "sources": [source]}


def test_a_stage_file_goes_once_every_reader_committed_the_batch_that_read_it(
    tmp_path: Any,
) -> None:
    """Two readers of one stage directory: a file one of them read stays; a batch reported but
    not committed counts for nothing; once both committed a file it is deleted (with its
    checksum), and a driver started again counts the checkpoints afresh."""
    rows = str(tmp_path / "stage-a" / "rows")
    os.makedirs(os.path.join(rows, "_spark_metadata"))
    for name in ("p1", "p2", "p3", ".p1.crc"):
        open(os.path.join(rows, name), "w").close()
    first, second = (Reader(str(tmp_path), name, rows) for name in ("first", "second"))
    files = StagedFiles(PATHS)
    for reader in (first, second):
        files.read_by(rows, reader.checkpoint, lambda reader=reader: reader)

    def left() -> list[str]:
        return sorted(os.listdir(rows))

    first.batch(0, 0, ["p1", "p2"])
    assert files.clean() == 0
    second.batch(0, 0, ["p1"])
    second.batch(1, 1, ["p2"], commit=False)  # running, or killed: run again after a restart
    assert committed_offsets(PATHS, second.checkpoint, second.lastProgress) == {rows: 0}
    assert files.clean() == 1
    assert left() == ["_spark_metadata", "p2", "p3"]

    again = StagedFiles(PATHS)  # a driver started again
    for reader in (first, second):
        again.read_by(rows, reader.checkpoint, lambda reader=reader: reader)
    open(os.path.join(second.checkpoint, "commits", "1"), "w").close()
    first.batch(1, 1, ["p3"])
    assert again.clean() == 1
    assert left() == ["_spark_metadata", "p3"]
    second.batch(2, 2, ["p3"])
    assert again.clean() == 1
    assert left() == ["_spark_metadata"]
    assert again.clean() == 0


def test_files_of_a_stage_batch_that_never_committed_are_deleted_before_it_starts(
    tmp_path: Any,
) -> None:
    """The stage's log lists p1 and p2 (a compaction, then a batch of its own); p3 was written
    by a batch the driver died in: deleted, with its checksum, and nothing else."""
    rows = str(tmp_path / "rows")
    log = os.path.join(rows, "_spark_metadata")
    write_log(log, "0", [(f"file://{rows}/p0", 0)])  # an old file the compaction holds too
    write_log(log, "9.compact", [(f"file://{rows}/p{n}", n) for n in range(2)])
    write_log(log, "10", [(f"file://{rows}/p2", 10)])
    for name in ("p1", "p2", "p3", ".p3.crc", ".p2.crc"):
        open(os.path.join(rows, name), "w").close()
    assert delete_unlisted(PATHS, rows) == 1
    assert sorted(os.listdir(rows)) == [".p2.crc", "_spark_metadata", "p1", "p2"]
    assert delete_unlisted(PATHS, rows) == 0
