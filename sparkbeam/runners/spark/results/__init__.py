"""What a run returns: a batch run's `SparkResult` (`results`) and a streaming run's
`SparkStreamingResult` (`streaming_results`)."""
