"""Every refusal of the Spark runner, in one place: what it cannot run, where, why and what to
do (one `Refusal` each, in `REFUSALS`).

Call sites raise them with `raise ENTRY.error(node.label, **fields)`: those the graph alone
decides in the plan's phases (`plan/`, `plan.DECIDED`), before any session exists (a collected
PCollection's own before its queries are planned); `OBJECT_COLUMN` from the column types, also
before any session; those the files' contents decide (`PARQUET_*`) when the query reading them
is translated, before any query runs. The docs' "Where each runs" table is generated from this
catalogue and the support matrix (`tests/support/`, `scripts/support_table.py`).
"""

from __future__ import annotations

from sparkbeam.runners.shared.refusals import BATCH, LIVE, STREAMING, Refusal

NO_TRANSLATION = Refusal(
    name="spark-no-translation",
    refused="a primitive transform the Spark runner has no translation for (none of "
    "sparkbeam's own)",
    modes=(BATCH, STREAMING, LIVE),
    reason="{kind} is not supported by the Spark runner on {input} input (it has no "
    "translation of it)",
    advice="run it on the direct runner, or build it from sparkbeam's transforms",
)

EMIT_EVENT = Refusal(
    name="emit-event",
    refused='`WithWatermark(emit="event")`',
    modes=(BATCH, STREAMING, LIVE),
    reason="emit={emit!r} raises the watermark after every row, in arrival order, which Spark "
    "does not keep: it raises the watermark once per micro-batch",
    advice="use emit='periodic' on the Spark runner (the watermark rises once per epoch, as in "
    "Spark)",
)

OBJECT_COLUMN = Refusal(
    name="object-column",
    refused="a column of type `object` (a `Map` schema or a `CombineFn` without `output_type`)",
    modes=(BATCH, STREAMING, LIVE),
    reason="column {column!r} has type {kind}, which Spark cannot hold",
    advice="give it a concrete type (datetime, int, float, str, bool or bytes) where it is "
    "made: {declaration}",
)

PARQUET_UINT64 = Refusal(
    name="parquet-uint64",
    refused="parquet columns of unsigned 64-bit integers (`ReadFiles`)",
    modes=(BATCH, LIVE),
    reason="column {column!r} of {file!r} holds uint64, which Spark's parquet reader cannot read",
    advice="write the files with signed 64-bit integers (int64), or run the pipeline where the "
    "runner reads the files itself (the direct runner, or collected on unbounded input)",
)

PARQUET_LIVE_NANOSECONDS = Refusal(
    name="parquet-live-nanoseconds",
    refused="parquet columns of nanosecond timestamps on a live source "
    "(`ReadFiles(streaming=True)` into a sink)",
    modes=(LIVE,),
    reason="column {column!r} of {file!r} holds nanosecond timestamps: Spark's file source "
    "reads a column of every file in one unit fixed at the start, and a later file in "
    "microseconds would be read as nanoseconds, its times silently wrong",
    advice="write the files in microseconds (df.to_parquet(path, coerce_timestamps='us')), or "
    "read them in a batch job or collected, where the runner reads each file's own unit",
)

IDLE_PROCESSING_TIME = Refusal(
    name="spark-idle-processing-time",
    refused='`WithWatermark(idle_after="30 seconds")` (processing time) on unbounded input',
    modes=(STREAMING, LIVE),
    reason="idle_after={idle_after!r} is processing time, which Spark cannot apply to a source: "
    "a query keeps one watermark, the minimum (or maximum) of all its inputs', with no notion "
    "of an idle input",
    advice="give a number of epochs (idle_after=3), which the Spark runner applies to the "
    "sources it replays (TestStream, Create, ReadFiles collected)",
)

BOUNDED_READ_IN_STREAM = Refusal(
    name="bounded-read-in-stream",
    refused="`ReadFromSpark(..., bounded=True)` in an unbounded pipeline",
    modes=(STREAMING, LIVE),
    reason="a bounded ReadFromSpark cannot feed an unbounded pipeline on Spark (it is a batch "
    "DataFrame, which a streaming query cannot read)",
    advice="read it with bounded=False, or run its part of the pipeline as a batch job",
)

CHAINED_WATERMARKS = Refusal(
    name="chained-watermarks",
    refused="a `WithWatermark` downstream of another one (chained, or meeting in a `Union`/`Join`)",
    modes=(STREAMING, LIVE),
    reason="it follows another WithWatermark on its path; Spark keeps one watermark per query "
    "and refuses to redefine it ('Redefining watermark is disallowed'), so the Spark runner "
    "cannot judge their late rows apart",
    advice="keep one WithWatermark per input branch",
)

POLICIES_MEET = Refusal(
    name="policies-meet",
    refused='`policy="min"` and `policy="max"` merges in one query',
    modes=(STREAMING, LIVE),
    reason="policy={policy!r} meets policy={other!r} of another Union or Join in the same "
    "query; Spark keeps one watermark per query, the earliest or the latest of its inputs",
    advice="give them the same policy",
)

UNION_DERIVED_APART = Refusal(
    name="union-derived-apart",
    refused='a `Union` under `policy="max"` or with an idle input, of a column derived '
    "differently on its inputs",
    modes=(STREAMING, LIVE),
    reason="{column!r} is derived differently on its inputs (different windows, shifts or "
    "truncations), so under policy='max' or with an idle input Spark's one watermark cannot "
    "judge its rows",
    advice="derive it alike on every input",
)

JOIN_KEY_DERIVED_APART = Refusal(
    name="join-key-derived-apart",
    refused="a window `Join` whose key is derived differently on its two sides",
    modes=(STREAMING, LIVE),
    reason="{key!r} is derived differently on the two sides (different window sizes or shifts), "
    "so Spark's one watermark can neither clean the join's state by it nor judge its rows "
    "(policy='max', idle inputs)",
    advice="derive it alike on both sides",
)

MERGED_DERIVED_APART = Refusal(
    name="merged-derived-apart",
    refused="keying state or late rows on a column derived differently on the inputs of a "
    "`Union` or `Join` where watermarks of several `WithWatermark`s meet (windows of different "
    "sizes, shifts or truncations)",
    modes=(STREAMING, LIVE),
    reason="the watermark of {column!r} is, from {merge}, the minimum of its inputs' "
    "watermarks derived differently on each; Spark keeps one watermark per query, the minimum "
    "of the WithWatermarks' before any derivation, which cannot tell which input holds it "
    "back: groups would close late",
    advice="derive it alike on every input (the same window on each), key this transform on a "
    "column derived alike (such as the event time), or window after the Union",
)

INTERVAL_JOIN_MAX = Refusal(
    name="interval-join-max",
    refused='`policy="max"` or `idle_after` at a `Join` with no window key (an interval join)',
    modes=(STREAMING, LIVE),
    reason="policy='max' or an idle input (idle_after) at a Join with no window key (a column "
    "of `on` watermarked on both sides) is not supported by the Spark runner on unbounded "
    "input (Spark cleans an interval join's state by the query's one watermark, the model by "
    "each side's own)",
    advice="join on a window key, or use policy='min' without idle_after",
)

HELD_WINDOW_START = Refusal(
    name="held-window-start",
    refused="keying state or late rows on a `Session`'s `window_start` other than by a "
    "`CombinePerKey` right after the `Session`",
    modes=(STREAMING, LIVE),
    reason="the watermark of {column!r} comes from a Session's window_start, which the model "
    "holds at the start of the oldest open session of any key; Spark's stateful operators see "
    "one key at a time and cannot follow it here (only a CombinePerKey right after the Session "
    "can)",
    advice="key this transform on window_end (or a column derived from it) instead, or run the "
    "pipeline on the direct runner",
)

DROPPED_ROWS_MEET = Refusal(
    name="dropped-rows-meet",
    refused="late or invalid rows of a `WithWatermark` in a query where its watermark meets "
    "another's",
    modes=(STREAMING, LIVE),
    reason="the rows {source} drops meet the watermark of another WithWatermark in this query, "
    "which Spark would judge them by",
    advice="collect or write each WithWatermark's dropped rows on their own",
)

MAX_DRIFT_WITH_IDLE = Refusal(
    name="max-drift-with-idle",
    refused="`max_drift` and `idle_after` in one pipeline",
    modes=(STREAMING,),
    reason="max_drift together with idle_after ({idle}) is not supported by the Spark runner "
    "yet (its alignment does not leave idle inputs out of the slowest one, as the model does)",
    advice="use one of them, or run the pipeline on the direct runner",
)

COLLECT_LIVE = Refusal(
    name="collect-live",
    refused="`collect` (and the other results) of a PCollection read from a live source",
    modes=(LIVE,),
    reason="reads {source}, a source with no end that the Spark runner cannot replay for collect",
    advice="send its rows to a sink (WriteFiles or ForEachBatch) and run the pipeline, or test "
    "it with a TestStream",
)

LIVE_AND_REPLAYED = Refusal(
    name="live-and-replayed",
    refused="a live and a replayed source in one query",
    modes=(LIVE,),
    reason="reads {live} (Spark reads it as it grows) and {replayed} (replayed epoch by epoch) "
    "in one query; Spark cannot line their epochs up",
    advice="read both through Spark (ReadFiles(streaming=True), ReadFromSpark)",
)

IDLE_LIVE_MERGE = Refusal(
    name="idle-live-merge",
    refused="`WithWatermark(idle_after=n)` (epochs) where watermarks of different "
    "`WithWatermark`s meet, over live sources",
    modes=(LIVE,),
    reason="idle_after counts epochs, which live sources do not have in common: Spark runs a "
    "query's micro-batch only when its source has new data, so an input that brings nothing "
    "runs no micro-batch to count, and nothing lines it up with the other inputs of "
    "{target}",
    advice="drop idle_after (the merge then waits for every input's watermark), or run the "
    "pipeline over replayed sources (TestStream, ReadFiles collected)",
)

MAX_DRIFT_LIVE = Refusal(
    name="max-drift-live",
    refused="`max_drift` over live sources",
    modes=(LIVE,),
    reason="max_drift holds back a source's epochs, which the Spark runner can do only for "
    "sources it replays (TestStream, Create, ReadFiles collected); {source} is read by Spark "
    "itself, which has no watermark alignment",
    advice="drop max_drift, or run the pipeline on the direct runner",
)

UPDATE_WITHOUT_WATERMARK = Refusal(
    name="update-without-watermark",
    refused='`CombinePerKey(emit="update")` on a stream with no `WithWatermark` upstream',
    modes=(STREAMING, LIVE),
    reason="a running aggregate's groups close only at the end of input, which reaches a "
    "Spark query as its watermark; with no WithWatermark upstream the query has none, and "
    "its groups would never get their last row",
    advice="apply WithWatermark upstream (any column; the aggregate need not be keyed on "
    "it), or run the pipeline on the direct runner",
)

UPDATE_LATENESS_APART = Refusal(
    name="update-lateness-apart",
    refused='`CombinePerKey(emit="update")` reading the watermarks of `WithWatermark`s with '
    "different `allowed_lateness`",
    modes=(STREAMING, LIVE),
    reason="its on-time rows come when the estimate (the watermark plus allowed_lateness) "
    "passes a group, and Spark keeps one watermark per query: with allowed_lateness "
    "{first_lateness} at {first} and {other_lateness} at {other}, the estimate is no "
    "function of that watermark",
    advice="give both WithWatermarks the same allowed_lateness (their delays may differ), or "
    "run the pipeline on the direct runner",
)

UPDATE_HELD_KEY = Refusal(
    name="update-held-key",
    refused='`CombinePerKey(emit="update")` keyed on a `Session`\'s `window_start`',
    modes=(STREAMING, LIVE),
    reason="the watermark of {column!r} comes from a Session's window_start, which the model "
    "holds at the start of the oldest open session of any key; the update stream's on-time "
    "and closing rows need it per group, which Spark's stateful operators cannot follow",
    advice="use emit='close' right after the Session, or key the update stream on "
    "window_end, or run the pipeline on the direct runner",
)

UPDATE_AFTER_HELD_ROWS = Refusal(
    name="update-after-held-rows",
    refused='`CombinePerKey(emit="update")` downstream of a `Session`, a `Sort`, a '
    "`CombinePerKey` or an outer `Join`",
    modes=(BATCH, STREAMING, LIVE),
    reason="{upstream} ({kind}) holds rows until the watermark passes them, so some of this "
    "CombinePerKey's rows reach it only when a later watermark or the end of input lets them "
    "out, where the direct runner gives their groups other panes than Spark can: a batch job "
    "aggregates every row at once, and a stream's timers fire before the rows let out in "
    "the same micro-batch",
    advice="use emit='close' here (or .finals() of an update stream made before {upstream}), "
    "or run the pipeline on the direct runner",
)

UPDATE_LIVE_MERGE = Refusal(
    name="update-live-merge",
    refused='`CombinePerKey(emit="update")` downstream of a `Union` or `Join` where watermarks '
    "of different `WithWatermark`s meet, over live sources",
    modes=(LIVE,),
    reason="an update stream has one row per group an epoch touched, and over live sources "
    "each input of {merge} runs as a query of its own: the merge's query reads what those "
    "have written when it runs a micro-batch, one file of each input or several, so which "
    "rows share an update, and how many updates a group gets, would depend on timing, "
    "not on the files",
    advice="use emit='close' here (its rows do not depend on the micro-batches), or run "
    "the pipeline over replayed sources (TestStream, ReadFiles collected) or on the direct "
    "runner",
)

REFUSALS = (
    NO_TRANSLATION,
    EMIT_EVENT,
    UPDATE_WITHOUT_WATERMARK,
    UPDATE_LATENESS_APART,
    UPDATE_HELD_KEY,
    UPDATE_AFTER_HELD_ROWS,
    UPDATE_LIVE_MERGE,
    OBJECT_COLUMN,
    PARQUET_UINT64,
    PARQUET_LIVE_NANOSECONDS,
    IDLE_PROCESSING_TIME,
    BOUNDED_READ_IN_STREAM,
    CHAINED_WATERMARKS,
    POLICIES_MEET,
    UNION_DERIVED_APART,
    JOIN_KEY_DERIVED_APART,
    MERGED_DERIVED_APART,
    INTERVAL_JOIN_MAX,
    HELD_WINDOW_START,
    DROPPED_ROWS_MEET,
    MAX_DRIFT_WITH_IDLE,
    COLLECT_LIVE,
    LIVE_AND_REPLAYED,
    IDLE_LIVE_MERGE,
    MAX_DRIFT_LIVE,
)
"""The Spark runner's refusals, in the order docs/support.md lists them."""
