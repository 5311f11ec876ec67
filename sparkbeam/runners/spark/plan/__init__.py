"""The Spark runner's plan, decided from the graph alone, in pure Python (no pyspark).

`refuse(nodes)` runs the refusal phases (`phases.PHASES`, in order) before the runner gets or
starts a session: each phase is one concern of the catalogue (`limits.py`) that the graph
alone decides, and raises its refusal for the first node it finds.
"""

from sparkbeam.runners.spark.plan.phases import DECIDED, PHASES, refuse

__all__ = ["DECIDED", "PHASES", "refuse"]
