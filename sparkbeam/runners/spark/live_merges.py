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
  watermark again on them (`streaming.restamp`, the same column and delay),
  and merges as over replayed sources (`union`/`join` translators,
  `merges`), writing into the user's sink with its own checkpoint;
- the stage queries of one pipeline are shared by all its sinks
  (`queries.LiveStages`): each origin's rows are judged once, and every sink
  reads the same judgement. All queries start together, stop together, and
  start again together on the same checkpoint location (stages first, so
  their `rows` exist when a final query starts).

Why it is exact, watermark by watermark (delays in whole milliseconds, the
model's and Spark's watermark `max - delay` on the same millisecond floor):

1. A stage reads one new file per micro-batch (`live.live_files`), as the
   direct runner takes one file per epoch, and judges its rows by the
   current batch's watermark (`queries.ONE_WATERMARK`: the filter is the
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
   judged against the current batch's watermark (`late_filter`), which is
   the model's "rows of an epoch against the merged watermark of the epoch
   before" when a final micro-batch holds one epoch of every stage. Which
   rows are late then depends on which stage batches each final batch
   holds, as on any engine reading live sources (there is no common epoch
   to line them up by): the direct runner's epoch `i` of every source is
   one final batch when each stage has committed its file `i` before the
   final query triggers (as the tests drive it).

Not done yet: a stage's `rows` are kept as long as its checkpoint (they grow
with the input, as a file source's directory does); deleting them needs
every final query reading them to have committed past them (Spark's file
source `cleanSource` would delete them after the first reader's batch).

`idle_after` counts epochs, which live sources do not have in common (a
query runs a micro-batch only when its source has new data), so an idle
input where watermarks meet is refused over live sources
(`limits.IDLE_LIVE_MERGE`); `max_drift` holds a source's epochs back, which
only a replayed source allows (`limits.MAX_DRIFT_LIVE`).
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sparkbeam.graph import Node
from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.live import Sink


def stage_sink(path: str) -> Sink:
    """A stage query's output: Spark's parquet file sink at `path` (exactly once with the
    stage's checkpoint; readers see committed batches only, through its metadata log)."""

    def attach(frame: DataFrame) -> Any:
        return frame.writeStream.format("parquet").option("path", path)

    return attach


def staged_rows(spark: SparkSession, node: Node, path: str) -> DataFrame:
    """The rows a stage query wrote for `node` (a `WithWatermark`) at `path`, as a file stream:
    every committed batch not read yet, in one micro-batch (no file limit)."""
    schema = spark_schema(node.info.schema, node.label)
    return spark.readStream.schema(schema).parquet(path)


def slug(label: str) -> str:
    """A label as a directory name (a sink's or a stage's, under the checkpoint location)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "sink"
