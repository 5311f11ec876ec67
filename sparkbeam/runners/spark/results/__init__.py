"""What a run returns: a batch run's `SparkResult` (`results`) and a streaming run's
`SparkStreamingResult` (`streaming_results`), both also importable from here."""

from sparkbeam.runners.spark.results.results import SparkResult
from sparkbeam.runners.spark.results.streaming_results import SparkStreamingResult

__all__ = ["SparkResult", "SparkStreamingResult"]
