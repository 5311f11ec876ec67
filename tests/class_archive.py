"""A class-data-sharing archive of Spark's classes for the suite's JVMs.

The suite starts a dozen Spark JVMs (its own session, the Spark Connect
server, the standalone cluster's master, worker and executors, the drivers
the restart tests kill, the sessions the runner starts), and each spends its
first seconds loading and verifying the same thousands of classes from
pyspark's jars. The JVM can map them instead from an archive written once
(JDK's application class-data sharing, `-XX:ArchiveClassesAtExit`): a Spark
session's start and first job took 5.2 s against 8.1 to 9.4 s without it, on
two cores. `make install` (scripts/bootstrap.sh) writes the archive by
running a few batch and streaming pipelines on the suite's settings; the
suite's JVMs read it (`java_options`). It changes nothing Spark does: where
the archive is missing, or was written by another JDK or for other jars, the
JVM checks that and loads the classes from the jars as before.

    .venv/bin/python -m tests.class_archive    # write it (again)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / ".venv" / "spark-classes.jsa"
"""Where `make install` writes the archive (inside the virtual environment, whose pyspark
jars it holds the classes of)."""


def java_options() -> str:
    """The Java options that map the archive, or none where it was not written."""
    if not ARCHIVE.is_file():
        return ""
    return f"-XX:SharedArchiveFile={ARCHIVE} -Xshare:auto"


WORKLOAD = """
import os, sys
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from tests.conftest import SPARK_CONF, SUITE_JVM, SUITE_ONLY_CONF
builder = SparkSession.builder
for key, value in {{**SPARK_CONF, **SUITE_ONLY_CONF}}.items():
    builder = builder.config(key, value)
builder = builder.config("spark.driver.extraJavaOptions", SUITE_JVM + " {dump}")
spark = builder.getOrCreate()
import sparkbeam as sb
from tests.agreement.streams import STREAM_BUILDERS, essentials
from tests.agreement.test_bounded import assert_runners_agree
from tests.agreement.test_streaming import run_fully
runner = sb.SparkRunner(spark=spark)
for name in ("windows", "joins", "sessions"):
    assert_runners_agree(name, runner)
run_fully(essentials, runner, True)
run_fully(STREAM_BUILDERS["merged_origins"], runner, True)
jvm = spark.sparkContext._gateway.proc  # the JVM writes the archive as it exits: wait for it
spark.stop()
jvm.stdin.close()  # pyspark's JVM ends when its input does
jvm.wait(timeout=600)
"""
"""Batch and streaming pipelines of the agreement suite on the suite's settings: the classes
most of the suite's JVMs load."""


def write() -> None:
    """Write the archive: a whole new one, renamed into place."""
    ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=ARCHIVE.parent, suffix=".jsa.partial")
    os.close(handle)
    os.remove(partial)  # the JVM writes it anew
    dump = f"-XX:ArchiveClassesAtExit={partial}"
    script = WORKLOAD.format(root=str(ROOT), dump=dump)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "archive.log"
        with open(log, "w") as output:
            done = subprocess.run(
                [sys.executable, "-c", script], stdout=output, stderr=subprocess.STDOUT
            )
        if done.returncode != 0 or not os.path.exists(partial):
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"class archive: the workload failed ({done.returncode}):\n{tail}")
    os.replace(partial, ARCHIVE)
    size = ARCHIVE.stat().st_size / 2**20
    print(f"class archive: {ARCHIVE.relative_to(ROOT)} ({size:.0f} MiB)")


if __name__ == "__main__":
    write()
