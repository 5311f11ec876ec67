"""What `result.metrics()` reports for each transform of a pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class TransformMetrics:
    """The counters of one transform after a run (`result.metrics()[label]`).

    - `rows_in`: rows that reached the transform (over all its inputs);
      `rows_out`: rows it emitted.
    - `late_rows`: rows it dropped as late (`WithWatermark`, `Union`, `Join`);
      `invalid_rows`: rows it dropped for a `None` event time (`WithWatermark`).
      For a `WithWatermark`, `rows_in == rows_out + late_rows + invalid_rows`.
    - `watermarks`: the current (last) watermark on each column of its output,
      as `datetime`s or integers.
    - `watermark_lag`: per column in `watermarks`, the largest value of that
      column among the rows the transform emitted minus the watermark (a
      `timedelta`, or an integer on integer columns). For a `WithWatermark`
      that is how far its watermark trails the latest event time seen; it is
      negative where everything emitted is already below the watermark (the
      windows a `CombinePerKey` closed).
    - `state_size` / `peak_state_size`: rows or groups held now and at most
      (None where the runner does not measure state).
    """

    rows_in: int
    rows_out: int
    late_rows: int = 0
    invalid_rows: int = 0
    watermarks: Mapping[str, Any] = attrs.field(factory=dict)
    watermark_lag: Mapping[str, Any] = attrs.field(factory=dict)
    state_size: int | None = None
    peak_state_size: int | None = None
