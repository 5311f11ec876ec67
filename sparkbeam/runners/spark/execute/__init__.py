"""Running translated queries: the replayed sources' epochs and the feed that writes them
(`epochs`), the queries of a run, started, fed and collected (`queries`), the stage files of
merges over live sources (`live_merges`) and what the runner says as it goes (`progress`).
"""
