"""Every refusal of the direct runner, in one place: what it cannot run, where, why and what
to do (one `Refusal` each, in `REFUSALS`).

Call sites raise them with `raise ENTRY.error(node.label, **fields)` before anything
runs. The docs' "Where each runs" table is generated from this catalogue and the
support matrix (`tests/support/`, `scripts/support_table.py`).
"""

from __future__ import annotations

from sparkbeam.runners.shared.refusals import DIRECT, PARALLEL, Refusal

NO_OPERATOR = Refusal(
    name="direct-no-operator",
    refused="a primitive transform the direct runner has no operator for (none of sparkbeam's own)",
    modes=(DIRECT, PARALLEL),
    reason="{kind} is not supported on the direct runner (it has no operator for it)",
    advice="build it from sparkbeam's transforms (a PTransform whose expand() applies them)",
)

READ_FROM_SPARK = Refusal(
    name="read-from-spark",
    refused="`ReadFromSpark` (Spark's connectors)",
    modes=(DIRECT, PARALLEL),
    reason="ReadFromSpark reads through Spark's connectors and runs on the Spark runner only",
    advice="to test the pipeline on the direct runner, read sample rows with a TestStream or "
    "ReadFiles instead",
)

IDLE_PROCESSING_TIME = Refusal(
    name="direct-idle-processing-time",
    refused='`WithWatermark(idle_after="30 seconds")` (processing time) on unbounded input',
    modes=(DIRECT, PARALLEL),
    reason="idle_after={idle_after!r} is processing time, which the direct runner does not "
    "have (its epochs take no time)",
    advice="give idle_after as a number of epochs, for example idle_after=3",
)

REFUSALS = (NO_OPERATOR, READ_FROM_SPARK, IDLE_PROCESSING_TIME)
"""The direct runner's refusals, in the order docs/support.md lists them."""
