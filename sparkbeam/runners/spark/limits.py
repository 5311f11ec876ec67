"""What the Spark runner refuses on unbounded input, for now, before any query runs.

Structured Streaming runs the model's late-row filter, windows, joins and
sorts, late and invalid rows as data and `policy="max"` (`streaming`); these
features of the model have no streaming form yet.
Each is refused with a `PipelineError` naming the transform and what to do;
bounded pipelines run as batch jobs, where all of them work (`translate`).
How each can run (the plan for the streaming translation):

- `idle_after` (epochs): the runner writes each epoch's file, so it knows when
  a source brought no rows for `idle_after` epochs; it then feeds that
  origin's channel of the final query a marker row (flagged, filtered out
  after the watermark, as the end-of-input sentinel) at the others' minimum
  watermark plus the delay, every epoch while idle: the origin stops holding
  back Spark's minimum, and its rows below it when it returns are dropped by
  the merge's late-row filter (into `late_rows()`). As processing time it
  needs a live source with arrival times: refused there.
- `max_drift`: after each epoch the runner reads each stage query's watermark
  (`lastProgress.eventTime.watermark`) and applies the direct runner's rule
  (`runners.direct.alignment`) to decide which sources' next epoch files to
  hold back. Live sources (Spark reads them itself): refused.
- `metrics()`: rows in and out from an `observe()` per node, late and
  invalid rows from the observed counts already kept, the watermark per
  column from `eventTime.watermark` through each column's judge, the lag from
  `eventTime.max`, state from `stateOperators[].numRowsTotal` (peak over the
  batches).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.transforms.watermark import WithWatermark

ADVICE = "run this pipeline on the direct runner, or on bounded input (Create, ReadFiles) on Spark"


def refuse_streaming_limits(nodes: Sequence[Node]) -> None:
    """Raise `PipelineError` for the first node of an unbounded pipeline Spark cannot run yet."""
    for node in nodes:
        transform = node.transform
        if isinstance(transform, WithWatermark):
            for name in ("idle_after", "max_drift"):
                value = getattr(transform, name)
                if value is not None:
                    raise PipelineError(
                        f"{node.label}: {name}={value!r} on unbounded input is not supported by "
                        f"the Spark runner yet (Spark has no idle inputs or watermark "
                        f"alignment); drop {name}, or {ADVICE}"
                    )
