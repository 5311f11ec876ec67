"""The Spark runner's plan, decided from the graph alone, in pure Python (no pyspark).

Before the runner gets or starts a session, `refuse(nodes)` and `refuse_translation(nodes)`
run the refusal phases (`phases`), each one concern of the catalogue (`limits.py`) that the
graph alone decides, raising its refusal for the first node it finds: watermark origins
(`origins`), delays (`delays`), judges (`judging`), the columns nodes key state on (`keyed`),
merges (`merges`), and the queries of each sink or collected PCollection (`queries`).

The rest of the room plans what runs once nothing is refused: each streaming query as data
(`streaming_query`: its nodes, staged origins, feed channels and the settings it starts with,
`settings`), the late-row filter of each of its `WithWatermark`s (`late_filters`), update
mode's operator (`updates`) and its batch form (`update_batch`), and the names of metrics
and feed channels (`keys`).
"""

from sparkbeam.runners.spark.plan.phases import (
    DECIDED,
    PHASES,
    TRANSLATION_PHASES,
    refuse,
    refuse_translation,
)
from sparkbeam.runners.spark.plan.queries import refuse_query

__all__ = [
    "DECIDED",
    "PHASES",
    "TRANSLATION_PHASES",
    "refuse",
    "refuse_query",
    "refuse_translation",
]
