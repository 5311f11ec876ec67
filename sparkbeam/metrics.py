"""What `result.metrics()` reports for each transform of a pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkbeam.time import describe_duration


@dataclass(frozen=True)
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
    - `watermark_estimates`: per column in `watermarks` whose estimate differs
      from its watermark (an `allowed_lateness` upstream), that estimate: the
      point an update-mode `CombinePerKey` emits its on-time rows at. The
      Spark runner, whose queries carry the watermark only, makes it from the
      watermark (plus the lateness at the `WithWatermark`, derived after it).
    """

    rows_in: int
    rows_out: int
    late_rows: int = 0
    invalid_rows: int = 0
    watermarks: Mapping[str, Any] = field(default_factory=dict)
    watermark_lag: Mapping[str, Any] = field(default_factory=dict)
    state_size: int | None = None
    peak_state_size: int | None = None
    watermark_estimates: Mapping[str, Any] = field(default_factory=dict)


_HEADINGS = ("transform", "rows in", "rows out", "late", "invalid", "state", "watermarks (lag)")


class PipelineMetrics(dict[str, TransformMetrics]):
    """What `result.metrics()` returns: a dict from each transform's label to its
    `TransformMetrics`, in graph order, whose `repr` is a table, one line per transform.

    The `state` column is `now/peak` (`-` where the runner does not measure state);
    the last column is each watermarked column's watermark, with its lag.
    """

    def table(self) -> str:
        """The metrics as a text table, one line per transform."""
        cells = [_HEADINGS] + [_cells(label, counted) for label, counted in self.items()]
        widths = [max(len(row[i]) for row in cells) for i in range(len(_HEADINGS))]
        lines = []
        for row in cells:
            first = row[0].ljust(widths[0])
            numbers = [cell.rjust(width) for cell, width in zip(row[1:6], widths[1:6], strict=True)]
            lines.append("  ".join([first, *numbers, row[6]]).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's pretty printer: the table, not the dict."""
        printer.text(self.table())


def _cells(label: str, counted: TransformMetrics) -> tuple[str, ...]:
    state = "-"
    if counted.state_size is not None or counted.peak_state_size is not None:
        state = f"{_count(counted.state_size)}/{_count(counted.peak_state_size)}"
    marks = []
    for column, value in counted.watermarks.items():
        lag = counted.watermark_lag.get(column)
        estimate = counted.watermark_estimates.get(column)
        shown = f"{column}={value}" + ("" if estimate is None else f" (estimate {estimate})")
        marks.append(shown + ("" if lag is None else f" ({describe_duration(lag)})"))
    return (
        label,
        f"{counted.rows_in:,}",
        f"{counted.rows_out:,}",
        f"{counted.late_rows:,}",
        f"{counted.invalid_rows:,}",
        state,
        ", ".join(marks),
    )


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
