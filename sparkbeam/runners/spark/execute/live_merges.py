"""Live merges: a `Union` or `Join` where watermarks of different `WithWatermark`s meet, over
sources Spark reads itself (`ReadFiles(streaming=True)`, `ReadFromSpark`), into sinks.

Spark keeps one watermark per query, so each origin (a `WithWatermark` whose
watermark meets another's) runs as a stage query of its own, as over replayed
sources (`queries.StreamingRun`); what differs is the channel between the
queries. Over replayed sources the runner writes each epoch's rows into the
final query's feed itself; live, nobody holds an epoch in hand, so:

- each stage query reads its live source(s), runs the origin's late-row
  filter and writes the surviving rows with Spark's file sink (parquet,
  `stage_sink`) into `<stage>/rows`, with its own checkpoint in
  `<stage>/checkpoint`. The file sink commits a micro-batch's files with one
  entry of its metadata log (`rows/_spark_metadata`) after they are written,
  and writes that batch's entry at most once (a batch run again after a
  failure is skipped or overwrites nothing committed): exactly once;
- the final query reads each stage's `rows` as a file stream (`staged_rows`:
  Spark's file source lists a file sink's output through that metadata log,
  so it sees only committed batches, each whole), declares the origin's
  watermark again on them (`translate.watermark.restamp`, the same column and delay),
  and merges as over replayed sources (`union`/`join` translators,
  `merges`), writing into the user's sink with its own checkpoint;
- the stage queries of one pipeline are shared by all its sinks
  (`queries.LiveStages`): each origin's rows are judged once, and every sink
  reads the same judgement. All queries start together, stop together, and
  start again together on the same checkpoint location (stages first, so
  their `rows` exist when a final query starts).

Why it is exact, watermark by watermark (delays in whole milliseconds, the
model's and Spark's watermark `max - delay` on the same millisecond floor):

1. A stage reads one new file per micro-batch (`translate.sources.live_files`), as the
   direct runner takes one file per epoch, and judges its rows by the
   current batch's watermark (`plan.settings.ONE_WATERMARK`: the filter is the
   query's only stateful operator): the watermark of the files before, the
   model's `WithWatermark` exactly. Its watermark after batch `k` is `wm_k =
   max(t over files <= k) - delay`.
2. That maximum is reached by a surviving row: a late row lies below the
   watermark before it, which is below the maximum. So the final query's
   watermark for the origin, once it has read the stage's batches up to `k`,
   is `wm_k` too; before that it lags behind (the final query reads what the
   stage committed when it triggers), never ahead.
3. A row the stage passed in batch `k` is above `wm_(k-1)`, and the final
   query reads it in the batch after the one that read batch `k - 1` (a
   stage batch's files come together), when its watermark for that origin
   is at most `wm_(k-1)`: above the origin's watermark there, so above the
   minimum of the origins (Spark's `multipleWatermarkPolicy=min`). Under
   `policy="min"` no stateful operator of the final query drops a row of
   the merge as late, whether it judges by the batch's watermark or the one
   before it (`allowMultiple`), and state is cleaned (windows closed,
   unmatched rows of outer joins emitted) by the minimum of the origins'
   watermarks, as the model's merge. The lag of point 2 only delays what
   the final query emits: once every query has processed what is there
   (`processAllAvailable` on each, stages first), the final query's
   watermark is the model's after the same files, and it has emitted what
   the direct runner emits before its end-of-input flush, whatever
   micro-batches the files fell into.
4. `policy="max"`: the merge's late rows (`late_rows()`) are its input rows
   not above the final query's watermark, the latest of the origins',
   judged against the current batch's watermark (`exact.late_filter`), which is
   the model's "rows of an epoch against the merged watermark of the epoch
   before" when a final micro-batch holds one epoch of every stage. Which
   rows are late then depends on which stage batches each final batch
   holds, as on any engine reading live sources (there is no common epoch
   to line them up by): the direct runner's epoch `i` of every source is
   one final batch when each stage has committed its file `i` before the
   final query triggers (as the tests drive it).

A stage's data files are deleted once every final query reading them has
committed the micro-batch that read them (`StagedFiles`), so the stage
directories hold what some reader has not finished, not the whole history. A
final query's progress names the log offset each file source had committed
(`committed_offsets`); the source's log in its checkpoint (`sources/<i>/`)
lists the files each offset took. A batch run again after a failure re-reads
only files of offsets past the last commit, which are not deleted (a file
deleted before its reader planned the batch would lose its rows silently:
Spark's file source skips a file that is gone then); a deleted file stays
listed in the stage's `_spark_metadata`, where a reader that has read it
skips it (a file source keeps the files it has seen in its log and takes
only new ones). The files of a stage batch the driver died while writing are
in no log: they are deleted before the stage starts again
(`delete_unlisted`). Spark's own `cleanSource` is not enough: it deletes a
file after the first reader's batch, while other final queries may not have
read it yet, and it is best effort (files may stay when the driver does not
stop gracefully).

Where every origin reads straight from a live parquet source, none of this
runs (`plan.queries.staged_origins`): each source's reader writes on every
row the watermark of its own files before it (`translate.footers`), so each
origin's filter is a plain comparison that needs no watermark of its query,
and the merge runs in the sink's query over the sources themselves. Points
2 to 4 hold there as written, a source's reader in place of its stage: the
filter passes the same rows, their maximum is the source's, and the sink's
query declares each origin's watermark on them. Each sink's query reads and
judges the files itself, by their footers alone, so two sinks judge a file
alike; a sink added later reads the directories from their first file, as
a new query on any live source does.

An update-mode `CombinePerKey` behind a live merge is refused
(`limits.UPDATE_LIVE_MERGE`): its rows are one per group a final micro-batch
touched, and which stage batches a final batch holds follows the timing
(point 4; the final query may take the first file of one stage alone even
when both are fed in step), where point 3 makes only what the watermark
closes independent of it.

`idle_after` counts epochs, which live sources do not have in common (a
query runs a micro-batch only when its source has new data), so an idle
input where watermarks meet is refused over live sources
(`limits.IDLE_LIVE_MERGE`); `max_drift` holds a source's epochs back, which
only a replayed source allows (`limits.MAX_DRIFT_LIVE`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from sparkbeam.paths import Paths, is_local, join, normalised, read_text
from sparkbeam.runners.spark.translate.sources import Sink
from sparkbeam.transforms.files import SINK_LOG, committed_files


def stage_sink(path: str) -> Sink:
    """A stage query's output: Spark's parquet file sink at `path` (exactly once with the
    stage's checkpoint; readers see committed batches only, through its metadata log)."""

    def attach(frame: DataFrame) -> Any:
        return frame.writeStream.format("parquet").option("path", path)

    return attach


def slug(label: str) -> str:
    """A label as a directory name (a sink's or a stage's, under the checkpoint location)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "sink"


CLEAN_EVERY_SECONDS = 10.0
"""How often a running pipeline looks for stage files every reader has committed."""

_log = logging.getLogger(__name__)


_FILE_SOURCE = re.compile(r"FileStreamSource\[(?P<path>.*)\]")


def committed_offsets(paths: Paths, checkpoint: str, report: Any) -> dict[str, int]:
    """Each file source's log offset (by the directory it reads, `_directory_path`) that the
    query with `checkpoint` has committed, by its last progress `report` (None before its
    first: nothing).

    A report of batch `b` names each source's offsets before the batch
    (`startOffset`: what the query had committed when it began) and after it
    (`endOffset`). Spark reports a batch after it wrote `commits/<b>`; where
    that commit is not there (a trigger that found nothing to run reports
    the next batch's id) the offsets before it count. The offsets file of the
    checkpoint is no help: it does not say which source each of its lines is
    (a source the plan holds twice has two)."""
    if not report:
        return {}
    commit = join(checkpoint, "commits", str(report.get("batchId")))
    bound = "endOffset" if paths.kind(commit) == "file" else "startOffset"
    offsets: dict[str, int] = {}
    for source in report.get("sources") or []:
        named = _FILE_SOURCE.fullmatch(str(source["description"]))
        offset = source[bound]
        offset = json.loads(offset) if isinstance(offset, str) else offset
        if named is not None and isinstance(offset, dict) and "logOffset" in offset:
            offsets[_directory_path(named.group("path"))] = int(offset["logOffset"])
    return offsets


def source_directories(paths: Paths, checkpoint: str) -> dict[str, str]:
    """The file sources' logs of the query with `checkpoint` (`sources/<id>`), by the directory
    each reads (that of its first entry); a log with no entry yet is left out."""
    root = join(checkpoint, "sources")
    if paths.kind(root) != "directory":
        return {}
    found: dict[str, str] = {}
    for name, is_file in paths.list(root):
        if is_file:
            continue
        log = join(root, name)
        files = [n for n, f in paths.list(log) if f and n.split(".")[0].isdigit()]
        for file in sorted(files, key=lambda n: int(n.split(".")[0]))[:1]:
            for line in read_text(paths, join(log, file)).splitlines()[1:2]:
                entry = json.loads(line)
                found[posixpath.dirname(_directory_path(entry["path"]))] = log
    return found


def source_log_entries(paths: Paths, log: str, after: int, through: int) -> list[dict[str, Any]]:
    """The entries of a file source's log `log` (`sources/<id>`: `{"path", "timestamp",
    "batchId"}`) whose offset lies in (`after`, `through`].

    Spark writes offset `n`'s entries to the file `n`, and every
    `compactInterval`-th offset to `n.compact` with every entry up to it;
    files older than the latest compaction are deleted after a delay. So an
    existing compaction at or after `through` holds them all; otherwise the
    latest compaction (where it is past `after`) and the files after it do.
    """
    deltas: set[int] = set()
    compactions: list[int] = []
    for name, is_file in paths.list(log):
        if is_file and name.isdigit():
            deltas.add(int(name))
        elif is_file and name.endswith(".compact") and name[: -len(".compact")].isdigit():
            compactions.append(int(name[: -len(".compact")]))
    covering = [c for c in compactions if c >= through]
    if covering:
        files = [f"{min(covering)}.compact"]
    else:
        latest = max(compactions, default=-1)
        files = [f"{latest}.compact"] if latest > after else []
        first = max(latest, after) + 1
        missing = [n for n in range(first, through + 1) if n not in deltas]
        if missing:
            raise FileNotFoundError(f"{log}: no log file for offset {missing[0]}")
        files += [str(n) for n in range(first, through + 1)]
    entries: list[dict[str, Any]] = []
    for name in files:
        for line in read_text(paths, join(log, name)).splitlines()[1:]:
            if line.strip():
                entry = json.loads(line)
                if after < int(entry["batchId"]) <= through:
                    entries.append(entry)
    return entries


def delete_unlisted(paths: Paths, rows: str) -> int:
    """Delete the data files in a stage's `rows` that its file sink's log (`_spark_metadata`)
    does not list; how many. Run before the stage query starts, when no batch is writing:
    such a file is from a batch that never committed (the driver died while it wrote),
    which the query runs again writing files of other names, and no reader ever lists."""
    listed = committed_files(join(rows, SINK_LOG), paths)
    if listed is None:
        return 0
    present = {name for name, is_file in paths.list(rows) if is_file}
    deleted = 0
    for name in sorted(present):
        if name.startswith(("_", ".")) or name in listed:
            continue
        paths.delete(join(rows, name))
        deleted += 1
        if f".{name}.crc" in present:
            paths.delete(join(rows, f".{name}.crc"))
    return deleted


def _directory_path(uri: str) -> str:
    """The path part of `uri` in one spelling, to compare directories written differently
    (`/tmp/x`, `file:///tmp/x`; `hdfs://nn:8020/x`, `hdfs:///x`)."""
    if is_local(uri):
        return normalised(uri)
    return posixpath.normpath("/" + urllib.parse.unquote(urllib.parse.urlparse(uri).path))


class StagedFiles:
    """Deletes the data files of live stages that every final query reading them committed.

    Each stage's `rows` directory is read by the final queries registered
    with `read_by`. `clean` takes, for each reader, the source offsets of its
    last committed micro-batch (`committed_offsets`) and the files its
    source's log lists up to them (`source_log_entries`; only offsets not
    counted yet), and deletes a file once every reader of its directory has
    committed it. A reader counts from its first report in this driver (a
    query reports every trigger, also one that finds nothing new); what
    that report says was committed is in its checkpoint already, so a driver
    killed at any point (during a batch, during `clean`) loses nothing, and
    the batch that runs again reads only files past its last commit, which
    are still there. While queries run, `start`
    runs `clean` every `CLEAN_EVERY_SECONDS` on a thread of its own.
    """

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.readers: dict[str, set[str]] = {}
        """Each stage's `rows` directory: the checkpoints of the final queries that read it."""
        self.queries: dict[str, Callable[[], Any]] = {}
        """Each reader's checkpoint: its running `StreamingQuery` (None before it starts)."""
        self.logs: dict[str, dict[str, str]] = {}
        """Each reader's checkpoint: its file sources' logs, by the directory each reads."""
        self.counted: dict[str, int] = {}
        """Each source log read: the offset counted through."""
        self.committed: dict[str, dict[str, set[str]]] = {}
        """Each `rows` directory: its files some readers committed, with those readers."""
        self.deleted = 0
        """How many files `clean` deleted so far."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def read_by(self, rows: str, checkpoint: str, query: Callable[[], Any]) -> None:
        """Register the final query with `checkpoint` (`query()`: its running query) as a
        reader of the stage directory `rows`."""
        with self._lock:
            self.readers.setdefault(rows, set()).add(checkpoint)
            self.queries[checkpoint] = query

    def clean(self) -> int:
        """Delete the stage files every reader committed; how many were deleted."""
        with self._lock:
            directories = {_directory_path(rows): rows for rows in self.readers}
            for checkpoint, query_of in sorted(self.queries.items()):
                query = query_of()
                if query is None:
                    continue
                offsets = committed_offsets(self.paths, checkpoint, query.lastProgress)
                for directory, offset in offsets.items():
                    rows = directories.get(directory)
                    if rows is not None and checkpoint in self.readers[rows]:
                        self._count(checkpoint, rows, directory, offset)
            deleted = 0
            for rows, readers in self.readers.items():
                files = self.committed.get(rows, {})
                if not files:
                    continue
                present = {name for name, is_file in self.paths.list(rows) if is_file}
                for name in sorted(files):
                    if name in present and files[name] >= readers:
                        self.paths.delete(join(rows, name))
                        deleted += 1
                        if f".{name}.crc" in present:  # Hadoop's checksum on a local disk
                            self.paths.delete(join(rows, f".{name}.crc"))
                    if name not in present or files[name] >= readers:
                        del files[name]
            self.deleted += deleted
            return deleted

    def _count(self, checkpoint: str, rows: str, directory: str, offset: int) -> None:
        """Count the files of `rows` the reader with `checkpoint` committed up to `offset` of
        its source on them (`directory`: `rows` as `_directory_path` spells it)."""
        log = self._log(checkpoint, directory)
        counted = self.counted.get(log, -1) if log is not None else offset
        if log is None or offset <= counted:
            return
        files = self.committed.setdefault(rows, {})
        for entry in source_log_entries(self.paths, log, counted, offset):
            path = _directory_path(entry["path"])
            if posixpath.dirname(path) == directory:
                files.setdefault(posixpath.basename(path), set()).add(checkpoint)
        self.counted[log] = offset

    def _log(self, checkpoint: str, directory: str) -> str | None:
        """The log of the reader's file source on `directory` (None: none with an entry yet)."""
        logs = self.logs.setdefault(checkpoint, {})
        if directory not in logs:
            logs.update(source_directories(self.paths, checkpoint))
        return logs.get(directory)

    def start(self, every: float = CLEAN_EVERY_SECONDS) -> None:
        """Run `clean` every `every` seconds until `stop` (a failed pass is logged and tried
        again at the next: the files it left are deleted then)."""
        if self._thread is not None or not self.readers:
            return
        self._stopping.clear()

        def run() -> None:
            while not self._stopping.wait(every):
                try:
                    self.clean()
                except Exception:
                    _log.warning("sparkbeam: cleaning live stage files failed", exc_info=True)

        self._thread = threading.Thread(target=run, name="sparkbeam-stage-files", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread `start` started (after the pass it is in)."""
        if self._thread is not None:
            self._stopping.set()
            self._thread.join()
            self._thread = None
