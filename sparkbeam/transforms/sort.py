"""`Sort`: RisingWave's event-time sort.

Rows are buffered; when `W(column, wm)` arrives, every buffered row with
`column < wm` is emitted in `column` order (ties in arrival order), then the
watermark is forwarded. With `keys`, the order holds within each key. End of
input flushes the buffer in order. Output watermarks: `W(column, wm)` after
the rows it released; other watermarks are dropped (held rows could break
them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields, needs_watermark
from sparkbeam.transforms.validation import column_names, require_time_column, single_input


@dataclass(frozen=True, init=False)
class Sort(PrimitiveTransform):
    """Emit rows in `column` order as the watermark on `column` releases them.

    Args:
        column: The event-time column to sort by; it must carry a watermark.
        keys: Column(s) to sort within: rows come out in `column` order per key.
    """

    column: str
    keys: tuple[str, ...]

    def holds_state(self) -> bool:
        return True

    def partition_keys(self) -> tuple[str, ...] | None:
        return self.keys

    def __init__(self, column: str, keys: str | Sequence[str] = ()) -> None:
        init_fields(self, column, column_names(keys, "keys", "Sort"))

    def default_label(self) -> str:
        return f"Sort({self.column})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("keys", ", ".join(self.keys)),) if self.keys else ()

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        require_time_column(source.schema, self.column, label)
        for key in self.keys:
            source.schema.require(key, f"{label} key")
        if not source.bounded and self.column not in source.watermarked:
            raise PipelineError(
                f"{label}: sorting unbounded input on {self.column!r} needs a watermark on "
                f"{self.column!r} to release rows; "
                f"{needs_watermark(source, self.column, 'before the Sort')}"
            )
        return source

    def output_order(self) -> tuple[str, tuple[str, ...]] | None:
        return self.column, self.keys

    def keeping_watermark(self, column: str) -> str:
        return (
            f"a Sort keeps the watermark of the column it sorts on only: apply "
            f".with_watermark({column!r}, delay=...) after it, or sort later"
        )

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """`W(column, wm)` passes (after the rows it released); the others are dropped."""
        return WatermarkRule(passing([self.column]))
