"""The watermark message, the one stream message users see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Watermark:
    """`Watermark(column, value)`: every later row on this edge has `row[column] >= value`.

    Values on one column of one edge never decrease (invariant W).
    Inside a runner the value of a `datetime` column is integer microseconds;
    `result.watermarks(pc)` gives it back as a naive UTC `datetime`.

    `estimate`: the completeness estimate `E` the value trails by a
    `WithWatermark`'s `allowed_lateness` (derived and merged as the value is;
    never below it). Equal to `value` where no lateness is set, and when not given.
    Only an update-mode `CombinePerKey` reads it (its `"ON_TIME"` rows).
    """

    column: str
    value: Any
    estimate: Any = None

    def __post_init__(self) -> None:
        if self.estimate is None:
            object.__setattr__(self, "estimate", self.value)

    def __repr__(self) -> str:
        """The estimate is shown only where it differs from the value."""
        shown = f"column={self.column!r}, value={self.value!r}"
        if self.estimate != self.value:
            shown += f", estimate={self.estimate!r}"
        return f"Watermark({shown})"
