"""The three exceptions a user of sparkbeam can get (SPEC section 6).

- `PipelineError`: the pipeline's shape is wrong; raised when a transform is
  applied (or, for runner limits, when the pipeline is translated).
- `DataError`: a row is wrong; raised at run time, naming the row.
- `InvariantViolation`: the direct runner saw a stream break invariant W or
  the order promised by `Sort`.
"""

from __future__ import annotations

from typing import Any


class PipelineError(ValueError):
    """A transform cannot be applied as written; the message says what to change."""


class DataError(ValueError):
    """A row cannot be processed as the pipeline says; the message names the row."""

    def __init__(self, message: str, row: Any = None) -> None:
        super().__init__(message)
        self.row = row


class InvariantViolation(AssertionError):
    """A stream broke invariant W (a row below a watermark, a watermark going back)
    or a `Sort` emitted rows out of order."""
