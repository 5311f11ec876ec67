"""`WithWatermark`: the watermark filter (RisingWave's WatermarkFilter).

Rule: `wm = floor_to_ms(max event time seen) - delay` on a `datetime` column
(`max - delay` on an integer column). A row with `column < wm` is late: it is
dropped and counted (`late_count`). A row whose event time is `None` is dropped
and counted apart (`invalid_count`). Each chunk is filtered with the watermark
from before it.

- `emit="periodic"` (default; one Spark micro-batch): the watermark is raised
  at the end of each epoch, so rows of epoch `i` are judged against the
  watermark of epoch `i - 1`.
- `emit="event"` (RisingWave's pseudocode, FLIP-296's on-event): the watermark
  is raised after every row.

Output watermarks: `W(column, wm)` after the rows it follows, never
decreasing; watermarks from upstream pass through (on `column` itself the
output is the larger of the upstream and the filter's own).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

import attrs

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.schema import Schema
from sparkbeam.time import Duration, floor_to_ms
from sparkbeam.transforms.validation import duration_on, require_time_column, single_input

EMIT_MODES = ("periodic", "event")


@attrs.frozen
class WithWatermark(PrimitiveTransform):
    """Declare `column` an event time with out-of-orderness `delay`; drop late rows."""

    column: str
    delay: Duration
    emit: str = "periodic"

    def default_label(self) -> str:
        return f"WithWatermark({self.column})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        require_time_column(source.schema, self.column, label)
        self.delay_units(source.schema, label)
        if self.emit not in EMIT_MODES:
            raise PipelineError(
                f"{label}: emit={self.emit!r} is not a mode; use emit='periodic' (the watermark "
                "rises at the end of each epoch) or emit='event' (after every row)"
            )
        return attrs.evolve(source, watermarked=source.watermarked | {self.column})

    def delay_units(self, schema: Schema, label: str = "WithWatermark") -> int:
        """The delay in the column's units (microseconds for datetimes, whole milliseconds)."""
        return duration_on(schema, self.column, self.delay, "delay", label, whole_millis=True)

    def watermark_function(self, schema: Schema) -> WatermarkFunction:
        """The function from the maximum event time seen to the watermark."""
        return WatermarkFunction(
            self.delay_units(schema), schema.type_of(self.column) is _dt.datetime
        )


@attrs.frozen
class WatermarkFunction:
    """`wm = floor_to_ms(max_time) - delay` (datetime columns) or `max_time - delay`."""

    delay: int
    in_millis: bool

    def __call__(self, max_time: int) -> int:
        if self.in_millis:
            return floor_to_ms(max_time) - self.delay
        return max_time - self.delay
