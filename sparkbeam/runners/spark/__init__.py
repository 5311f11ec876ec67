"""The Spark runner: the pipeline translated into PySpark (needs the `spark` extra)."""

from sparkbeam.runners.spark.runner import SparkResult, SparkRunner

__all__ = ["SparkResult", "SparkRunner"]
