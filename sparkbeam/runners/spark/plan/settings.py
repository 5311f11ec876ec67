"""The Spark settings a streaming query starts with, each with why: which a query needs
follows from its plan (`streaming_query.QueryPlan.settings`) or, for `STATE_STORE`,
`CHANGELOG` and `MAX_POLICY`, from what its translators made (`execute.streaming`)."""

from __future__ import annotations

STATE_STORE = (
    "spark.sql.streaming.stateStore.providerClass",
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
)
"""`transformWithState` needs the RocksDB state store: a query that holds one starts with it.
The other queries keep the session's provider (Spark's default, HDFS-backed, is the faster of
the two for a windowed aggregation: `benchmarks/state_store.py`). Whether a query holds one
follows from the pipeline alone, so a query started again from its checkpoint starts with the
provider it was created with (Spark also keeps the provider in the checkpoint)."""

CHANGELOG = ("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
"""With RocksDB, each micro-batch's commit writes the batch's changes instead of a checkpoint of
the whole store (a snapshot every `minDeltasForSnapshot` batches, in the background): in the
idle-inputs test's four queries, whose pass-through `transformWithState`s hold no state, the
commit times summed over their batches went from 3.9, 3.7, 8.3 and 5.1 s to 2.6, 3.3, 5.9 and
4.2 s (their joins' and aggregations' too), and the live benchmark's deduplication on RocksDB
from 3.53x to 3.17x the hand-written time. Spark reads a checkpoint written either way, so a
query started again on a checkpoint made without it goes on."""

NO_EXCHANGE_REUSE = ("spark.sql.exchange.reuse", "false")
"""A query where a subtree is read twice (a `Join` or `Union` of a PCollection with a copy of
itself) plans it twice; with exchange reuse Spark reads the second copy's shuffle from the
first (`ReusedExchangeExec`), and the `withWatermark`s below that shuffle are then out of the
operator tree that Spark's watermark propagation (`WatermarkPropagator`) walks: the stateful
operators above it got no watermark (a Session after a Union of two restamped `WithWatermark`s,
self-joined, never closed a session). Turning reuse off computes the shuffle twice and
changes no row. The late-row filter's dedup keys on `uuid()`, whose seed differs between the
copies, so a plan with the filter in the same query was never reused."""

ONE_WATERMARK = ("spark.sql.streaming.statefulOperator.allowMultiple", "false")
"""Spark's stateful operators drop late input by the previous batch's watermark (and evict
state by the current one), so that rows one operator emits are not late for the next. That
is the model's watermark only when a no-data batch runs between two data batches, as when
the runner feeds epochs; a live source with a backlog runs data batches back to back. With
this setting every operator judges by the current batch's watermark: exact for the
late-row filter and one operator after it (rows it passes lie above that watermark), wrong
for an operator after another (what the first emits would be late for the second). The plan
decides which queries start with it (`late_filters`)."""

MAX_POLICY = ("spark.sql.streaming.multipleWatermarkPolicy", "max")
"""Spark's watermark of a query is the latest of its `withWatermark`s' instead of the earliest:
`policy="max"` where watermarks of different `WithWatermark`s meet."""
