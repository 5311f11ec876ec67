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
    """

    column: str
    value: Any
