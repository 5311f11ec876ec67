"""What the Spark runner refuses on unbounded input, for now, before any query runs.

Structured Streaming runs the model's late-row filter, windows, joins and
sorts (`streaming`); these features of the model have no streaming form yet:

- `late_rows()` / `invalid_rows()`: Spark drops late rows inside its stateful
  operators and only counts them, so the runner would need a second output
  of its late-row filter (the design is in the issue notes).
- `Union`/`Join` with `policy="max"`: Spark's `multipleWatermarkPolicy` is
  one setting for a whole query, and the runner already splits queries per
  `WithWatermark` origin; the per-merge maximum and its late rows need their
  own filter there.
- `WithWatermark(idle_after=...)`, `WithWatermark(max_drift=...)`: Spark has
  neither idleness nor alignment; the runner's own sources could provide both
  (it writes each epoch's file), which is not built yet.

Each is refused with a `PipelineError` naming the transform and what to do.
Bounded pipelines run as batch jobs, where all of them work (`translate`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import LATE, DroppedRows
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

ADVICE = "run this pipeline on the direct runner, or on bounded input (Create, ReadFiles) on Spark"


def refuse_streaming_limits(nodes: Sequence[Node]) -> None:
    """Raise `PipelineError` for the first node of an unbounded pipeline Spark cannot run yet."""
    for node in nodes:
        transform = node.transform
        if isinstance(transform, DroppedRows):
            what = "late_rows()" if transform.kind == LATE else "invalid_rows()"
            raise PipelineError(
                f"{node.label}: {what} on unbounded input is not supported by the Spark runner "
                "yet (Spark Structured Streaming drops late rows inside its stateful operators "
                "and only counts them); count them with result.late_count(...) and "
                f"result.invalid_count(...), or {ADVICE}"
            )
        if isinstance(transform, (Union, Join)) and transform.policy != "min":
            raise PipelineError(
                f"{node.label}: policy={transform.policy!r} on unbounded input is not supported "
                f"by the Spark runner yet (only policy='min'); {ADVICE}"
            )
        if isinstance(transform, WithWatermark):
            for name in ("idle_after", "max_drift"):
                value = getattr(transform, name)
                if value is not None:
                    raise PipelineError(
                        f"{node.label}: {name}={value!r} on unbounded input is not supported by "
                        f"the Spark runner yet (Spark has no idle inputs or watermark "
                        f"alignment); drop {name}, or {ADVICE}"
                    )
