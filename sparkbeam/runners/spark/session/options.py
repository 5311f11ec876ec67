"""`SparkRunner`'s options, checked when the runner is made: no Spark starts for that.

Each check raises `PipelineError` naming the option, the value and what to
write instead. What can be checked without a JVM is: the form of `master`
(Spark's own master URLs; `local[0]` gives Spark no core), the type of
`spark`, `conf`'s keys and values (numbers where Spark wants numbers, sizes,
booleans, the session time zone as a zone id), `trigger` as Spark's interval
text, and `checkpoint_location`/`staging_location` as paths. Whatever else is
wrong shows when the session starts, which `start_failure` turns into a
`PipelineError` naming the master and the settings given.
"""

from __future__ import annotations

import os
import re
import zoneinfo
from collections.abc import Mapping

from pyspark.sql import SparkSession

from sparkbeam.errors import PipelineError
from sparkbeam.runners.spark.session.shipping import is_connect
from sparkbeam.time import parse_interval

_MASTER = re.compile(
    r"local(?:\[(?:\*|[0-9]+)(?:\s*,\s*[0-9]+)?\])?"
    r"|local-cluster\[[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\]"
    r"|yarn|(?:spark|k8s|mesos|sc)://\S+",
)
"""Master URLs Spark knows: `local`, `local[N]`, `local[*]`, `local[N,F]`, `local-cluster[..]`,
`yarn`, `spark://host:port` (also `spark://h1:p1,h2:p2`), `k8s://...`, `mesos://...`, `sc://...`
(Spark Connect)."""

_NO_CORES = re.compile(r"local\[0+(?:\s*,\s*[0-9]+)?\]")

MASTERS = "'local[*]', 'local[4]', 'spark://host:7077', 'yarn', 'k8s://https://host:443'"

_UNIT = (
    r"(?:weeks?|days?|hours?|minutes?|mins?|seconds?|secs?|milliseconds?|msecs?|ms"
    r"|microseconds?|usecs?|us)"
)
_INTERVAL = re.compile(rf"(?:interval\s+)?(?:[0-9]+(?:\.[0-9]+)?\s*{_UNIT}\s*)+", re.IGNORECASE)
"""A processing-time trigger as Spark parses it: `10 seconds`, `1 minute 30 seconds`,
`interval 500 milliseconds` (months and years are not fixed lengths: Spark refuses them)."""

_INTEGERS = {
    "spark.sql.shuffle.partitions": 1,
    "spark.default.parallelism": 1,
    "spark.driver.cores": 1,
    "spark.executor.cores": 1,
    "spark.executor.instances": 0,
    "spark.task.cpus": 1,
    "spark.task.maxFailures": 1,
    "spark.sql.execution.arrow.maxRecordsPerBatch": 0,
    "spark.sql.streaming.minBatchesToRetain": 1,
}
"""Settings Spark reads as whole numbers, with their smallest value."""

_SIZE = re.compile(r"[0-9]+\s*(?:[kmgtp]i?b?|b)?", re.IGNORECASE)
_SIZES = (
    "spark.driver.memory",
    "spark.executor.memory",
    "spark.driver.maxResultSize",
    "spark.sql.autoBroadcastJoinThreshold",
)
"""Settings Spark reads as a size (`4g`, `512m`, a number of bytes)."""

_BOOLEANS = (
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.pyspark.fallback.enabled",
    "spark.ui.enabled",
    "spark.ui.showConsoleProgress",
    "spark.sql.adaptive.enabled",
    "spark.sql.ansi.enabled",
)

TIME_ZONE = "spark.sql.session.timeZone"
_OFFSET = re.compile(r"(?:UTC|GMT|UT)?[+-][0-9]{1,2}(?::?[0-9]{2}(?::?[0-9]{2})?)?|Z|UTC|GMT|UT")
_SHORT_ZONES = frozenset(
    {
        "ACT",
        "AET",
        "AGT",
        "ART",
        "AST",
        "BET",
        "BST",
        "CAT",
        "CNT",
        "CST",
        "CTT",
        "EAT",
        "ECT",
        "EST",
        "HST",
        "IET",
        "IST",
        "JST",
        "MIT",
        "MST",
        "NET",
        "NST",
        "PLT",
        "PNT",
        "PRT",
        "PST",
        "SST",
        "VST",
    }
)
"""Java's `ZoneId.SHORT_IDS`, which Spark accepts as session time zones."""


def check_master(master: object) -> str:
    """`master` as Spark's master URL, or `PipelineError`."""
    if not isinstance(master, str) or not _MASTER.fullmatch(master.strip()):
        raise PipelineError(
            f"SparkRunner: master={master!r} is not a Spark master URL; use one of {MASTERS}"
        )
    if _NO_CORES.fullmatch(master.strip()):
        raise PipelineError(
            f"SparkRunner: master={master!r} gives Spark no core to run on; use 'local[N]' with "
            "N >= 1, or 'local[*]' for every core of this machine"
        )
    return master.strip()


def check_spark(spark: object) -> None:
    """`spark` is a SparkSession (classic or Spark Connect), or `PipelineError`."""
    if spark is None or isinstance(spark, SparkSession):
        return
    if is_connect(spark) and type(spark).__name__ == "SparkSession":
        return
    raise PipelineError(
        f"SparkRunner: spark={spark!r} is not a SparkSession; pass the session itself "
        "(SparkSession.builder.getOrCreate()), or leave spark= out for the runner to start one "
        "on master="
    )


def check_conf(conf: object) -> dict[str, str]:
    """`conf` as Spark's settings (names to text), each value checked where Spark's type for it
    is known; `PipelineError` names the setting."""
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise PipelineError(
            f"SparkRunner: conf={conf!r} is not a mapping; give Spark settings as a dict, "
            "for example conf={'spark.sql.shuffle.partitions': '4'}"
        )
    settings: dict[str, str] = {}
    for key, value in conf.items():
        if not isinstance(key, str) or not key:
            raise PipelineError(
                f"SparkRunner: conf key {key!r} is not a setting name; Spark settings are "
                "named by strings such as 'spark.sql.shuffle.partitions'"
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            text = str(value).strip()
        else:
            raise PipelineError(
                f"SparkRunner: conf[{key!r}]={value!r}; Spark settings take text (or a number "
                "or a bool), for example '4'"
            )
        _check_setting(key, text)
        settings[key] = text
    return settings


def _check_setting(key: str, text: str) -> None:
    def refuse(wanted: str) -> PipelineError:
        return PipelineError(f"SparkRunner: conf[{key!r}]={text!r}; Spark wants {wanted}")

    if key in _INTEGERS:
        least = _INTEGERS[key]
        if not re.fullmatch(r"[0-9]+", text) or int(text) < least:
            raise refuse(f"a whole number >= {least}")
    elif key in _SIZES:
        if not _SIZE.fullmatch(text) and not (key.endswith("Threshold") and text == "-1"):
            raise refuse("a size such as '4g', '512m' or a number of bytes")
    elif key in _BOOLEANS:
        if text.lower() not in ("true", "false"):
            raise refuse("'true' or 'false'")
    elif key == TIME_ZONE and not is_time_zone(text):
        raise refuse(
            "a time zone id: a region such as 'UTC' or 'Europe/Berlin', or an offset such "
            "as '+01:00'"
        )


def is_time_zone(text: str) -> bool:
    """Whether Spark takes `text` as a session time zone (as Java's `ZoneId.of` with its short
    ids would)."""
    if _OFFSET.fullmatch(text) or text in _SHORT_ZONES:
        return True
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def check_trigger(trigger: object) -> str | None:
    """`trigger` as Spark's processing-time interval text, or `PipelineError`."""
    if trigger is None:
        return None
    if not isinstance(trigger, str) or not _INTERVAL.fullmatch(trigger.strip()):
        why = ""
        if isinstance(trigger, str):
            try:
                parse_interval(trigger)
            except ValueError as exc:
                why = f" ({exc})"
        raise PipelineError(
            f"SparkRunner: trigger={trigger!r} is not a processing-time interval{why}; write it "
            "as Spark does, for example trigger='10 seconds' or '1 minute' (or leave it out: a "
            "micro-batch as soon as the last one ended)"
        )
    return trigger.strip()


def check_location(value: object, option: str) -> str | None:
    """A path option (`checkpoint_location`, `staging_location`) as text, or `PipelineError`."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text.strip():
            return text
    raise PipelineError(
        f"SparkRunner: {option}={value!r} is not a path; give a directory path or URI "
        "(a str or pathlib.Path), or None"
    )


def start_failure(master: str, conf: Mapping[str, str], exc: BaseException) -> PipelineError:
    """A session that did not start, as a `PipelineError` naming what was asked for."""
    java = getattr(exc, "java_exception", None)
    text = java.toString() if java is not None else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0][:300] if lines else type(exc).__name__
    first = re.sub(r"^(?:[a-z]+\.)+(\w+(?:Exception|Error)): ", r"\1: ", first)
    given = ", ".join(f"{key}={value!r}" for key, value in conf.items()) or "none"
    return PipelineError(
        f"SparkRunner: Spark did not start on master={master!r} with conf {given}: {first}. "
        "Check master and those settings (and that Java is installed: JAVA_HOME), or pass a "
        "session you started with spark="
    )
