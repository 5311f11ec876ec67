"""Production edges: `ReadFromSpark` (any of Spark's connectors) and `ForEachBatch` (a callback).

- `ReadFromSpark(format, options=None, schema=None, bounded=False)` reads
  through `spark.readStream.format(format).options(**options)` (or
  `spark.read` when `bounded=True`): Kafka, Kinesis, Delta, files, anything
  Spark has a connector for. It runs on the Spark runner only; the direct
  runner refuses it (test a pipeline with a `TestStream` or `ReadFiles` of
  sample rows instead). `schema=` names the columns the pipeline uses and
  their types; Spark's columns of those names are cast to them. For `kafka`
  and `rate` the connector's fixed schema is the default.
- `ForEachBatch(fn)` calls `fn(rows, batch_id)` with each batch's rows (a
  list of dicts, the same values `collect` gives) and passes the rows on
  unchanged, on both runners: per micro-batch on Spark, per epoch (and once
  for the end-of-input flush) on the direct runner; a batch with no rows is
  not passed. Batch ids increase; after a restart from a checkpoint Spark
  runs the batch it was in again with the same id (at least once: make the
  callback idempotent on the id, as with Spark's `foreachBatch`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError, described
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields
from sparkbeam.schema import Row, Schema
from sparkbeam.transforms.validation import single_input
from sparkbeam.updates import UpdateStream

KNOWN_SCHEMAS: dict[str, Schema] = {
    "kafka": Schema.of(
        {
            "key": bytes,
            "value": bytes,
            "topic": str,
            "partition": int,
            "offset": int,
            "timestamp": _dt.datetime,
            "timestampType": int,
        }
    ),
    "rate": Schema.of({"timestamp": _dt.datetime, "value": int}),
}
"""The fixed schemas of connectors that have one (the default `schema=` for them)."""


@dataclass(frozen=True, eq=False, init=False)
class ReadFromSpark(PrimitiveTransform):
    """Rows from one of Spark's connectors: `ReadFromSpark("kafka", {"subscribe": "orders", ...})`.

    Spark runner only. Unbounded unless `bounded=True` (then a batch read).

    Args:
        format: The connector's name, as for `spark.readStream.format(...)`
            (`"kafka"`, `"rate"`, `"delta"`, ...).
        options: The connector's options, passed to Spark as they are.
        schema: Column names and types of the rows the pipeline uses (`kafka` and
            `rate` have theirs built in).
        bounded: `True` for a batch read (`spark.read`) instead of a stream.
    """

    format: str
    options: tuple[tuple[str, str], ...]
    schema: Schema | None
    bounded: bool

    def __init__(
        self,
        format: str,
        options: Mapping[str, Any] | None = None,
        schema: Schema | Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        bounded: bool = False,
    ) -> None:
        if not isinstance(format, str) or not format:
            raise PipelineError(f"ReadFromSpark: format={format!r}; give a Spark source name")
        pairs = tuple(sorted((str(k), str(v)) for k, v in (options or {}).items()))
        schema = None if schema is None else Schema.of(schema, "ReadFromSpark")
        init_fields(self, format, pairs, None if schema is None else Schema.of(schema), bounded)

    def default_label(self) -> str:
        return f"ReadFromSpark({self.format})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if inputs:
            raise PipelineError(f"{label}: ReadFromSpark is a source; apply it to the pipeline")
        schema = self.schema or KNOWN_SCHEMAS.get(self.format)
        if schema is None:
            raise PipelineError(
                f"{label}: Spark's {self.format!r} source has no schema sparkbeam knows; give "
                "schema= (a dict of the column names the pipeline uses to their types)"
            )
        return EdgeInfo(schema, bounded=self.bounded)


@dataclass(frozen=True, eq=False, init=False)
class ForEachBatch(PrimitiveTransform):
    """Calls `fn(rows, batch_id)` with the rows of each batch; the rows pass on unchanged.

    Args:
        fn: Called as `fn(rows, batch_id)`: the batch's rows (a list of dicts) and
            its id; after a failure a batch runs again with the same id.
    """

    fn: Callable[[list[Row], int], Any]

    def partition_keys(self) -> tuple[str, ...] | None:
        return ()

    def __init__(self, fn: Callable[[list[Row], int], Any]) -> None:
        if not callable(fn):
            raise PipelineError(
                f"ForEachBatch: {fn!r} is not callable; give a function fn(rows, batch_id)"
            )
        init_fields(self, fn)

    def default_label(self) -> str:
        return f"ForEachBatch({getattr(self.fn, '__name__', type(self.fn).__name__)})"

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """An update stream passes on as it is (the callback gets its change rows)."""
        return single_input(inputs, label).updates

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return single_input(inputs, label)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Rows pass on unchanged, and so do their watermarks."""
        return WatermarkRule(passing(inputs[0].schema.names))


def call_batch(
    fn: Callable[[list[Row], int], Any], rows: list[Row], batch_id: int, label: str, mark: str = ""
) -> None:
    """`fn(rows, batch_id)` of a `ForEachBatch`; an exception of it a `PipelineError` naming
    the transform, the exception, where it was raised and the batch, the original its cause
    (`mark` before the message: how a Spark worker's error is found again on the driver)."""
    try:
        fn(rows, batch_id)
    except Exception as exc:
        raise PipelineError(
            f"{mark}{label}: the function raised {described(exc)} on batch {batch_id} "
            f"({len(rows)} rows); a streaming sink with a checkpoint calls it again with that "
            "batch when the pipeline runs again"
        ) from exc
