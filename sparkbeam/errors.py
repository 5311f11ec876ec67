"""The three exceptions a user of sparkbeam can get (SPEC section 6).

- `PipelineError`: the pipeline's shape is wrong; raised when a transform is
  applied (or, for runner limits, when the pipeline is translated).
- `DataError`: a row is wrong; raised at run time, naming the row.
- `InvariantViolation`: the direct runner saw a stream break invariant W or
  the order promised by `Sort`.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


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


def described(exc: BaseException) -> str:
    """A user function's exception in one line: its type and message, then the file and
    line where it was raised (the innermost frame outside sparkbeam), as a `DataError`
    quotes it; the exception itself goes along as the `DataError`'s `__cause__`."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not os.path.abspath(frame.filename).startswith(_PACKAGE)
    ]
    if not frames:
        return repr(exc)
    return f"{exc!r} at {frames[-1].filename}:{frames[-1].lineno}"
