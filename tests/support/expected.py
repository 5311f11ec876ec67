"""What the direct runner must give for each feature of the matrix it runs, worked out by hand.

The rows of each output (all epochs together, in any order) over the
matrix's streams `A` and `B` (`matrix.py`), on `TestStream`s. After
`with_watermark("t", 0)`, A keeps `a@1`, `b@6` (epoch 0) and `a@12` (epoch
1): `b@4` is late (the watermark is 6 after epoch 0) and `c@None` invalid;
B keeps both its rows, `a@2` and `b@11`. From there, by the transforms'
rules: for instance the first feature filters out `v == 3`, scales `v` by
10 and shifts `t` by 5 (`a@6`, `b@11`), so the tumbling windows of 10 start
at 0 and 10 and the hopping ones (10, every 5) at 0 and 5 for `a@6` and at 5
and 10 for `b@11`: per window start, two rows each, totals 20, 30, 40. The
direct cells of `test_support_matrix.py` compare their rows with these; the
other modes compare theirs with the direct runner's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def pane(timing: str, index: int, last: bool) -> dict[str, Any]:
    """An update row's pane columns."""
    return {"pane_timing": timing, "pane_index": index, "pane_is_last": last}


DIRECT_ROWS: dict[str, list[list[dict[str, Any]]]] = {
    # pyarrow's nanoseconds, read as the microseconds they hold
    "parquet files of nanosecond timestamps (pandas' `to_parquet` default)": [
        [{"k": "a", "t": datetime(2026, 4, 1, 10, 0, 0, 5)}]
    ],
    "parquet files of unsigned 64-bit integers": [[{"k": "a", "v": 7}]],
    (
        "`Map`, `Filter`, `Select`, `Tumble`, `Hop`, `CombinePerKey` (built-in "
        "aggregates and a `CombineFn`)"
    ): [
        [
            {"window_start": 0, "n": 2, "total": 20, "seen": "a"},
            {"window_start": 5, "n": 2, "total": 30, "seen": "a,b"},
            {"window_start": 10, "n": 2, "total": 40, "seen": "b"},
        ]
    ],
    (
        "`FlatMap`, `Partition`, `CombinePerKey` with `CountDistinct`, `CollectSet`, "
        "`MinBy`, `MaxBy`, `Any`, `All`"
    ): [
        [{"k": "a", "t": 12, "v": 3}],
        [
            {
                "window_start": 0,
                "distinct": 2,
                "keys": ["a", "b"],
                "first": "b",
                "last": "b",
                "any": True,
                "all": False,
            },
            {
                "window_start": 10,
                "distinct": 1,
                "keys": ["a"],
                "first": "a",
                "last": "a",
                "any": True,
                "all": False,
            },
        ],
    ],
    "`Sort`, `Session`": [
        [
            {"k": "a", "t": 1, "v": 1, "window_start": 1, "window_end": 4},
            {"k": "b", "t": 6, "v": 2, "window_start": 6, "window_end": 9},
            {"k": "a", "t": 12, "v": 3, "window_start": 12, "window_end": 15},
        ]
    ],
    "`Union` of two `WithWatermark`s, window `Join` (on a window key watermarked on both sides)": [
        [
            {"window_start": 0, "left": 1, "right": 6},
            {"window_start": 0, "left": 2, "right": 6},
            {"window_start": 0, "left": 6, "right": 6},
            {"window_start": 10, "left": 3, "right": 7},
            {"window_start": 10, "left": 7, "right": 7},
        ]
    ],
    "interval `Join` (`times=`, `within=`)": [
        [
            {"k": "a", "t": 1, "v": 1, "u": 1, "r": 1},
            {"k": "b", "t": 6, "v": 2, "u": 6, "r": 2},
            {"k": "a", "t": 12, "v": 3, "u": 12, "r": 3},
        ]
    ],
    "`late_rows()`, `invalid_rows()`": [
        [
            {"k": "c", "t": None, "v": 5, "late_watermark": None},
            {"k": "b", "t": 4, "v": 4, "late_watermark": 6},
        ]
    ],
    "`late_rows()` of a `WithWatermark` whose watermark meets another's in the same query": [
        [
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 2, "v": 6},
            {"k": "b", "t": 4, "v": 4},
            {"k": "a", "t": 12, "v": 3},
            {"k": "b", "t": 11, "v": 7},
        ]
    ],
    '`policy="max"` on `Union` and window `Join`': [
        [
            {"window_start": 0, "left": 1, "right": 6},
            {"window_start": 0, "left": 2, "right": 6},
            {"window_start": 0, "left": 6, "right": 6},
            {"window_start": 10, "left": 3, "right": 7},
            {"window_start": 10, "left": 7, "right": 7},
        ]
    ],
    '`policy="max"` on an interval `Join`': [
        [
            {"k": "a", "t": 1, "v": 1, "t_right": 2, "v_right": 6},
            {"k": "b", "t": 6, "v": 2, "t_right": 11, "v_right": 7},
        ]
    ],
    "an outer interval `Join` of two `WithWatermark`s": [
        [
            {"k": "a", "t": 1, "v": 1, "t_right": 2, "v_right": 6},
            {"k": "b", "t": 6, "v": 2, "t_right": 11, "v_right": 7},
            {"k": "a", "t": 12, "v": 3, "t_right": None, "v_right": None},
        ]
    ],
    '`policy="max"` and `policy="min"` merges in one query': [
        [
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 2, "v": 6},
            {"k": "a", "t": 2, "v": 6},
            {"k": "a", "t": 12, "v": 3},
            {"k": "a", "t": 12, "v": 3},
            {"k": "b", "t": 11, "v": 7},
            {"k": "b", "t": 11, "v": 7},
        ]
    ],
    '`Union` under `policy="max"` of a column derived differently on its inputs': [
        [
            {"k": "a", "t": 6, "v": 1},
            {"k": "b", "t": 11, "v": 2},
            {"k": "a", "t": 2, "v": 6},
            {"k": "a", "t": 17, "v": 3},
            {"k": "b", "t": 11, "v": 7},
        ]
    ],
    "window `Join` on a key derived differently on its two sides": [
        [
            {"window_start": 0, "left": 1, "right": 6},
            {"window_start": 0, "left": 2, "right": 6},
            {"window_start": 0, "left": 1, "right": 7},
            {"window_start": 0, "left": 2, "right": 7},
        ]
    ],
    (
        "`CombinePerKey` on `window_end` after a `Union` of windows of different sizes "
        "over two `WithWatermark`s"
    ): [
        [
            {"window_end": 5, "n": 1},
            {"window_end": 10, "n": 2},
            {"window_end": 20, "n": 1},
            {"window_end": 15, "n": 1},
        ]
    ],
    "`Union` of watermarks of `WithWatermark`s chained one after another": [
        [
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 12, "v": 3},
            {"k": "a", "t": 12, "v": 3},
        ]
    ],
    (
        "`Session`'s `window_start` keyed downstream (here by `Sort`; a `CombinePerKey` "
        "right after the `Session` runs)"
    ): [
        [
            {"k": "a", "t": 1, "v": 1, "window_start": 1, "window_end": 4},
            {"k": "b", "t": 6, "v": 2, "window_start": 6, "window_end": 9},
            {"k": "a", "t": 12, "v": 3, "window_start": 12, "window_end": 15},
        ]
    ],
    "`idle_after` (epochs)": [[{"window_start": 0, "n": 3}, {"window_start": 10, "n": 1}]],
    "`max_drift`": [
        [{"k": "f", "t": 1, "v": 1}, {"k": "f", "t": 20, "v": 2}, {"k": "f", "t": 30, "v": 3}]
    ],
    "`max_drift` and `idle_after` in one pipeline": [
        [{"k": "f", "t": 1, "v": 1}, {"k": "f", "t": 20, "v": 2}, {"k": "f", "t": 30, "v": 3}]
    ],
    "`metrics()` (compared: rows in and out, late and invalid rows)": [
        [
            {"k": "a", "t": 1, "v": 1, "window_start": 0, "window_end": 10},
            {"k": "b", "t": 6, "v": 2, "window_start": 0, "window_end": 10},
            {"k": "a", "t": 12, "v": 3, "window_start": 10, "window_end": 20},
        ]
    ],
    '`emit="event"`': [
        [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 6, "v": 2}, {"k": "a", "t": 12, "v": 3}]
    ],
    '`CombinePerKey(emit="update")` (early results) and `finals()`': [
        [
            # epoch 0: window 0's early row; epoch 1: window 10's, then window 0 closes
            # (the watermark 12 passes it); the end of input closes window 10
            {
                "window_start": 0,
                "n": 2,
                "total": 3,
                "pane_timing": "EARLY",
                "pane_index": 0,
                "pane_is_last": False,
            },
            {
                "window_start": 10,
                "n": 1,
                "total": 3,
                "pane_timing": "EARLY",
                "pane_index": 0,
                "pane_is_last": False,
            },
            {
                "window_start": 0,
                "n": 2,
                "total": 3,
                "pane_timing": "ON_TIME",
                "pane_index": 1,
                "pane_is_last": True,
            },
            {
                "window_start": 10,
                "n": 1,
                "total": 3,
                "pane_timing": "ON_TIME",
                "pane_index": 1,
                "pane_is_last": True,
            },
        ],
        [{"window_start": 0, "n": 2, "total": 3}, {"window_start": 10, "n": 1, "total": 3}],
    ],
    '`CombinePerKey(emit="update")` keyed on a `Session`\'s `window_start`': [
        [
            # each session's rows come out as the watermark closes it: an update, then its
            # closing row; the last session's only at the end of input, where only step 2 runs
            {"k": "a", "window_start": 1, "n": 1, **pane("EARLY", 0, False)},
            {"k": "a", "window_start": 1, "n": 1, **pane("ON_TIME", 1, True)},
            {"k": "b", "window_start": 6, "n": 1, **pane("EARLY", 0, False)},
            {"k": "b", "window_start": 6, "n": 1, **pane("ON_TIME", 1, True)},
            {"k": "a", "window_start": 12, "n": 1, **pane("ON_TIME", 0, True)},
        ]
    ],
    '`CombinePerKey(emit="update")` with no `WithWatermark` upstream (a running aggregate)': [
        [
            {"k": "a", "n": 1, **pane("EARLY", 0, False)},
            {"k": "b", "n": 1, **pane("EARLY", 0, False)},
            {"k": "a", "n": 2, **pane("EARLY", 1, False)},
            {"k": "b", "n": 2, **pane("EARLY", 1, False)},
            {"k": "c", "n": 1, **pane("EARLY", 0, False)},
            # only the end of input closes the groups of a running aggregate
            {"k": "a", "n": 2, **pane("ON_TIME", 2, True)},
            {"k": "b", "n": 2, **pane("ON_TIME", 2, True)},
            {"k": "c", "n": 1, **pane("ON_TIME", 1, True)},
        ]
    ],
    ('`CombinePerKey(emit="update")` over `WithWatermark`s with different `allowed_lateness`'): [
        [
            # epoch 0: a's 1 and 6 and b's 2; epoch 1: a's 12 and 4 (kept: a's watermark is 1)
            # and b's 11; the estimate min(12, 11) = 11 passes window 0, the watermark
            # min(7, 11) = 7 does not: on time, closed at the end of input
            {"window_start": 0, "n": 3, **pane("EARLY", 0, False)},
            {"window_start": 10, "n": 2, **pane("EARLY", 0, False)},
            {"window_start": 0, "n": 4, **pane("EARLY", 1, False)},
            {"window_start": 0, "n": 4, **pane("ON_TIME", 2, False)},
            {"window_start": 0, "n": 4, **pane("LATE", 3, True)},
            {"window_start": 10, "n": 2, **pane("ON_TIME", 1, True)},
        ]
    ],
    '`CombinePerKey(emit="update")` after a `Union` or `Join` of two `WithWatermark`s': [
        [
            # epoch 0: a's 1 and 6, b's 2, the merged watermark min(6, 2) = 2; epoch 1: a's 12
            # (its 4 is late: a's watermark is 6) and b's 11, the watermark min(12, 11) = 11
            # passes window 0; the end of input closes window 10
            {"window_start": 0, "n": 3, **pane("EARLY", 0, False)},
            {"window_start": 10, "n": 2, **pane("EARLY", 0, False)},
            {"window_start": 0, "n": 3, **pane("ON_TIME", 1, True)},
            {"window_start": 10, "n": 2, **pane("ON_TIME", 1, True)},
        ]
    ],
    (
        '`CombinePerKey(emit="update")` downstream of a `Session` (or a `Sort`, a '
        "`CombinePerKey`, an outer `Join`)"
    ): [
        [
            # epoch 0 closes a's first session (1 + 3 < the watermark 6), epoch 1 b's
            # (6 + 3 < 12): each an early row; a's session at 12 reaches the count only
            # at the end of input, with the last rows
            {"k": "a", "n": 1, "pane_timing": "EARLY", "pane_index": 0, "pane_is_last": False},
            {"k": "b", "n": 1, "pane_timing": "EARLY", "pane_index": 0, "pane_is_last": False},
            {"k": "a", "n": 2, "pane_timing": "ON_TIME", "pane_index": 1, "pane_is_last": True},
            {"k": "b", "n": 1, "pane_timing": "ON_TIME", "pane_index": 1, "pane_is_last": True},
        ]
    ],
    "a column of type `object`": [
        [
            {"k": "a", "payload": [1]},
            {"k": "b", "payload": [2]},
            {"k": "a", "payload": [3]},
            {"k": "b", "payload": [4]},
            {"k": "c", "payload": [5]},
        ]
    ],
    (
        "`collect` (and the other results) of a PCollection (live: of `ReadFromSpark`; "
        "`ReadFiles(streaming=True)` is replayed)"
    ): [[{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 6, "v": 2}, {"k": "a", "t": 12, "v": 3}]],
    "a live and a replayed source in one query": [
        [
            {"k": "a", "t": 1, "v": 1},
            {"k": "b", "t": 6, "v": 2},
            {"k": "a", "t": 2, "v": 6},
            {"k": "a", "t": 12, "v": 3},
            {"k": "b", "t": 4, "v": 4},
            {"k": "c", "t": None, "v": 5},
            {"k": "b", "t": 11, "v": 7},
        ]
    ],
}
