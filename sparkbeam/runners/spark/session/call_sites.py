"""The runner's DataFrames built without pyspark recording a call site per Column function.

pyspark records, for each Column function it is called with (`F.col`, `F.when`, `Column.__add__`
...), the Python line that called it, for the query context of Spark's error messages
(`spark.python.sql.dataFrameDebugging.enabled`, on by default): a walk up the Python stack and
four JVM calls each, on a classic session. The runner makes hundreds of them to translate a
pipeline: the live benchmark's four transforms took 0.36 to 0.42 s to build with them (1,181
calls into the JVM), 0.22 to 0.24 s without (541). The lines it would record are its own, not
the user's: its errors name the transform instead (`engine_errors`).

pyspark reads that setting once per process and keeps it (`errors.utils.
_enable_debugging_cache`). While the runner translates, `without_call_sites` sets what it keeps
to off and then puts back what was there; the user's own code (a `ForEachBatch` function, the
rest of their program) records call sites as their session says, but for code of theirs that
runs in another thread at the moment the runner translates (the setting is the process's). A
pyspark without that name keeps its own behaviour (the runner is then only slower to build).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from pyspark.errors import utils

_CACHE = "_enable_debugging_cache"

_LOCK = threading.Lock()
_inside = 0
_kept: object = None


@contextlib.contextmanager
def without_call_sites() -> Iterator[None]:
    """Column functions called inside record no call site. Nested uses, and pipelines run
    from several threads at once, put back what the first found when the last ends."""
    global _inside, _kept
    if not hasattr(utils, _CACHE):
        yield
        return
    with _LOCK:
        if _inside == 0:
            _kept = getattr(utils, _CACHE)
            setattr(utils, _CACHE, False)
        _inside += 1
    try:
        yield
    finally:
        with _LOCK:
            _inside -= 1
            if _inside == 0:
                setattr(utils, _CACHE, _kept)
