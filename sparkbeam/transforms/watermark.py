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

Dropped rows are data too: `late_rows()` on the output gives every late row
with the watermark it was judged against (`late_watermark`), and
`invalid_rows()` every row whose event time was `None` (`transforms.late`).

- `idle_after`: a whole number of epochs `>= 1`, or a duration of processing
  time (a `timedelta` or a string such as `"30 seconds"`). An input that
  brings no rows for that long is marked idle: a `Union`, `Join` or exchange
  downstream leaves it out of the minimum of their inputs' watermarks until
  it brings rows again (Flink's idleness). Its rows below the combined
  watermark when it comes back are late there (`late_rows()` of the `Union`
  or `Join`). Epochs are counted by the direct runner; processing time needs
  a source that has one (neither runner has one yet: refused when run).
- `max_drift`: a duration on `column` (an integer on an integer column). When
  this input's watermark is more than `max_drift` ahead of the slowest other
  `WithWatermark` it meets in a `Union` or `Join`, the runner holds back the
  further epochs of its sources until the others catch up (Flink's watermark
  alignment), so the state of the `Union`/`Join` downstream stays bounded.

- `allowed_lateness`: a duration like `delay` (default 0). The estimate is
  `E = floor_to_ms(max) - delay` and the watermark `W = E - allowed_lateness`:
  rows below `W` are late and `W` is the in-band watermark, so everything
  behaves as with `delay + allowed_lateness`, except an update-mode
  `CombinePerKey`, which reads `E` (`Watermark.estimate`) for its on-time rows.

On bounded input (one epoch) neither changes anything: no input is idle for
an epoch, and there is no later epoch to hold back.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.schema import Schema
from sparkbeam.time import Duration, describe_duration, duration_micros, floor_to_ms, shown_value
from sparkbeam.transforms.validation import duration_on, require_time_column, single_input

EMIT_MODES = ("periodic", "event")
IdleAfter = int | _dt.timedelta | str
"""A number of epochs (an integer) or a duration of processing time."""


@dataclass(frozen=True)
class WithWatermark(PrimitiveTransform):
    """Declare `column` an event time with out-of-orderness `delay`; drop late rows.

    Args:
        column: The event-time column (`datetime` or integer).
        delay: How far behind the largest time seen the watermark stays: a
            `timedelta`, interval text (`"5 minutes"`) or, on an integer column,
            an integer.
        emit: `"periodic"`: the watermark rises at the end of each epoch;
            `"event"`: after every row (direct runner only).
        idle_after: An input without rows for this many epochs (an integer), or
            this long (a duration), stops holding back the watermark where
            inputs meet.
        max_drift: How far this watermark may run ahead of the slowest other
            one it meets before its sources are held back (a duration).
        allowed_lateness: How far behind the estimate `floor_to_ms(max) - delay`
            the watermark stays (a duration like `delay`, default 0): rows down
            to `estimate - allowed_lateness` are kept, and an update-mode
            `CombinePerKey` emits its on-time row at the estimate and late
            corrections until the watermark passes the group.
    """

    column: str
    delay: Duration
    emit: str = "periodic"
    idle_after: IdleAfter | None = field(default=None, kw_only=True)
    max_drift: Duration | None = field(default=None, kw_only=True)
    allowed_lateness: Duration = field(default=0, kw_only=True)

    def holds_state(self) -> bool:
        return True

    def default_label(self) -> str:
        return f"WithWatermark({self.column})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        shown = [("delay", describe_duration(self.delay))]
        if self.emit != "periodic":
            shown.append(("emit", self.emit))
        if self.idle_after is not None:
            idle = self.idle_after
            epochs = isinstance(idle, int) and not isinstance(idle, bool)
            shown.append(("idle_after", f"{idle} epochs" if epochs else describe_duration(idle)))
        if self.max_drift is not None:
            shown.append(("max_drift", describe_duration(self.max_drift)))
        if self.allowed_lateness != 0:
            shown.append(("allowed_lateness", describe_duration(self.allowed_lateness)))
        return tuple(shown)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        require_time_column(source.schema, self.column, label)
        self.delay_units(source.schema, label)
        self.lateness_units(source.schema, label)
        if self.emit not in EMIT_MODES:
            raise PipelineError(
                f"{label}: emit={self.emit!r} is not a mode; use emit='periodic' (the watermark "
                "rises at the end of each epoch) or emit='event' (after every row)"
            )
        self.idle_epochs(label)
        self.idle_time(label)
        self.drift_units(source.schema, label)
        return source

    def raises_watermark_per_row(self) -> bool:
        return self.emit == "event"

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Upstream watermarks pass through; `column`'s own is the filter's (on `column`, the
        larger of the two)."""
        return WatermarkRule(passing(inputs[0].schema.names), own=(self.column,))

    def idle_epochs(self, label: str = "WithWatermark") -> int | None:
        """`idle_after` as a number of epochs (None when not set or given as a duration)."""
        value = self.idle_after
        if value is None or isinstance(value, (str, _dt.timedelta)):
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise PipelineError(
                f"{label}: idle_after={value!r} is neither a number of epochs nor a duration; "
                "give a whole number of epochs (idle_after=3) or a duration of processing "
                "time (idle_after='30 seconds')"
            )
        if value < 1:
            raise PipelineError(
                f"{label}: idle_after={value!r} epochs must be at least 1 (an input is idle "
                "after that many epochs without rows)"
            )
        return value

    def idle_time(self, label: str = "WithWatermark") -> int | None:
        """`idle_after` as microseconds of processing time (None unless given as a duration)."""
        value = self.idle_after
        if not isinstance(value, (str, _dt.timedelta)):
            return None
        try:
            micros = duration_micros(value)
        except ValueError as exc:
            raise PipelineError(f"{label}: idle_after: {exc}") from None
        if micros <= 0:
            raise PipelineError(
                f"{label}: idle_after must be a positive duration, got {shown_value(value)}"
            )
        return micros

    def drift_units(self, schema: Schema, label: str = "WithWatermark") -> int | None:
        """`max_drift` in the column's units (None when not set)."""
        if self.max_drift is None:
            return None
        return duration_on(schema, self.column, self.max_drift, "max_drift", label)

    def delay_units(self, schema: Schema, label: str = "WithWatermark") -> int:
        """The delay in the column's units (microseconds for datetimes, whole milliseconds)."""
        return duration_on(schema, self.column, self.delay, "delay", label, whole_millis=True)

    def lateness_units(self, schema: Schema, label: str = "WithWatermark") -> int:
        """`allowed_lateness` in the column's units (validated like `delay`)."""
        return duration_on(
            schema, self.column, self.allowed_lateness, "allowed_lateness", label, whole_millis=True
        )

    def watermark_delay_units(self, schema: Schema, label: str = "WithWatermark") -> int:
        """How far the watermark stays behind `floor_to_ms(max)`: `delay + allowed_lateness`.

        Every transform but an update-mode `CombinePerKey` sees only the watermark, so
        this pipeline behaves exactly as one whose delay is this total.
        """
        return self.delay_units(schema, label) + self.lateness_units(schema, label)

    def watermark_function(self, schema: Schema) -> WatermarkFunction:
        """The function from the maximum event time seen to the watermark `W = E - lateness`."""
        return WatermarkFunction(
            self.watermark_delay_units(schema), schema.type_of(self.column) is _dt.datetime
        )

    def estimate_function(self, schema: Schema) -> WatermarkFunction:
        """The function from the maximum event time seen to the estimate `E = floor_to_ms(max) -
        delay` (the watermark where `allowed_lateness` is 0)."""
        return WatermarkFunction(
            self.delay_units(schema), schema.type_of(self.column) is _dt.datetime
        )


@dataclass(frozen=True)
class WatermarkFunction:
    """`wm = floor_to_ms(max_time) - delay` (datetime columns) or `max_time - delay`."""

    delay: int
    in_millis: bool

    def __call__(self, max_time: int) -> int:
        if self.in_millis:
            return floor_to_ms(max_time) - self.delay
        return max_time - self.delay
