"""What the Spark runner runs on, below everything else: the SparkSession and its defaults
(`sessions`), the package shipped to its workers (`shipping`), the runner's options
(`options`), Spark's logs kept quiet (`quiet`), every path through the session's Hadoop file
systems (`paths`) and Spark's errors read back as the pipeline's (`engine_errors`).
"""
