"""The session the Spark runner runs on: one it starts itself, with defaults that fit the
master, or one it did not start, used as it is.

Spark's default of 200 shuffle partitions is sized for a cluster. On a local
master every stateful operator of a streaming query then opens 200 state
stores in every micro-batch: minutes for a handful of rows. So a session the
runner starts on a local master gets one shuffle partition per local core,
unless the user's `conf` names the setting; on any other master Spark's
setting stays. A session the runner did not start (passed with `spark=`, or
one already active that `getOrCreate` would return) keeps every setting it
has; the runner only warns, once per session, when a streaming pipeline runs
there with more than `CROWDED` shuffle partitions per local core.
"""

from __future__ import annotations

import os
import re
import warnings
import weakref
from collections.abc import Mapping

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession, is_remote

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"

CROWDED = 8
"""Shuffle partitions per local core above which a streaming run warns."""

_LOCAL = re.compile(r"local(?:\[(?P<cores>\*|[0-9]+)(?:\s*,\s*[0-9]+)?\])?")
"""Spark's local masters: `local`, `local[N]`, `local[*]`, `local[N,F]`, `local[*,F]`."""

_warned: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def machine_cores() -> int:
    """The cores this process may run on (what `local[*]` gives Spark)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_cores(master: str | None) -> int | None:
    """The cores a local master gives Spark; None for any other master (or none known)."""
    match = _LOCAL.fullmatch((master or "").strip())
    if match is None:
        return None
    cores = match.group("cores")
    if cores is None:
        return 1
    return machine_cores() if cores == "*" else int(cores)


def active_session() -> SparkSession | None:
    """The session `SparkSession.builder.getOrCreate()` would return now (the process's default
    session, not the last one made active), if there is one: asked with no options, so that
    none of its settings change."""
    try:
        active = SparkSession.active()
    except PySparkException:  # NO_ACTIVE_OR_DEFAULT_SESSION
        return None
    if is_remote():  # Spark Connect: its builder would need the server's address again
        return active
    return SparkSession.builder.getOrCreate()


def own_conf(master: str, defaults: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """The settings of a session the runner starts on `master`: `defaults`, one shuffle
    partition per core on a local master, then the user's `conf` (which wins)."""
    settings = dict(defaults)
    cores = local_cores(master)
    if cores is not None:
        settings[SHUFFLE_PARTITIONS] = str(cores)
    settings.update(conf)
    return settings


def master_of(spark: SparkSession) -> str | None:
    """The session's master, read through its settings (a Spark Connect session has no
    `sparkContext`); None where the session does not say."""
    try:
        return spark.conf.get("spark.master", None)
    except PySparkException:
        return None


def warn_crowded_partitions(spark: SparkSession) -> None:
    """Warn, once per session, when a session the runner did not start has more than
    `CROWDED` shuffle partitions per core on a local master (streaming pipelines only:
    each is a state store per stateful operator and micro-batch)."""
    if spark in _warned:
        return
    master = master_of(spark)
    cores = local_cores(master)
    if cores is None:
        return
    try:
        partitions = int(spark.conf.get(SHUFFLE_PARTITIONS, "200") or "200")
    except (PySparkException, ValueError):
        return
    if partitions <= CROWDED * cores:
        return
    _warned.add(spark)
    warnings.warn(
        f"SparkRunner runs on a SparkSession it did not start, with {SHUFFLE_PARTITIONS}="
        f"{partitions} on {master} ({cores} core{'s' if cores != 1 else ''}): each stateful "
        "operator of a streaming query opens that many state stores in every micro-batch, "
        "so a small stream takes minutes. Call "
        f"spark.conf.set({SHUFFLE_PARTITIONS!r}, {str(cores)!r}) before its queries first "
        "start (a query keeps the number in its checkpoint), or let SparkRunner start a "
        "session of its own (one partition per local core)",
        stacklevel=4,
    )


def differing_conf(spark: SparkSession, conf: Mapping[str, str]) -> list[str]:
    """The settings of `conf` that `spark` has otherwise, as `key=current (not wanted)`."""
    differing = []
    for key, value in conf.items():
        try:
            current = spark.conf.get(key, None)
        except PySparkException:
            current = None
        if current != value:
            differing.append(f"{key}={current!r} (not {value!r})")
    return differing


def unapplied_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """Warn when the user's `conf` differs from an active session the runner reuses (it
    changes no setting of a session it did not start). A warning, not an error: the session
    is found only when the pipeline runs, and the user may not know it is there (a notebook's
    `spark`); a session passed with `spark=` is checked when the runner is made (`runner`)."""
    differing = differing_conf(spark, conf)
    if differing:
        warnings.warn(
            "SparkRunner(conf=...) found a SparkSession already active and uses it as it is, "
            f"without changing its settings: {', '.join(differing)}. Stop that session first "
            "(spark.stop()) for the runner to start one with these settings, or set them on it",
            stacklevel=3,
        )
