"""How the Spark runner makes late rows exact: the judges (`judges`: time inside Spark and the
columns compiled from the watermark rules that Spark's stateful operators compare with its
watermark) and every late-row filter, applied through one entry (`late_rows`) by the strategy
the plan chose for each query (`plan.late_filters`): the comparison with the watermark
written into the epoch files and the `transformWithState` filter (`late_filter`), the
deduplication by row id (`late_rows.first_seen`), and its Arrow twin for the stages the
runner judges itself (`fed`).
"""
