"""The Spark runner's plan, decided from the graph alone, in pure Python (no pyspark).

Before the runner gets or starts a session, `refuse(nodes)` and `refuse_translation(nodes)`
run the refusal phases (`phases`), each one concern of the catalogue (`limits.py`) that the
graph alone decides, raising its refusal for the first node it finds: watermark origins
(`origins`), delays (`delays`), judges (`judging`), the columns nodes key state on (`keyed`),
merges (`merges`), and the queries of each sink or collected PCollection (`queries`).
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
