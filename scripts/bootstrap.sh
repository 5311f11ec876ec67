#!/usr/bin/env bash
# Installs what sparkbeam needs on a fresh machine, idempotently:
#
#   bash scripts/bootstrap.sh example   Java 17+ (for the Spark runner), Graphviz's dot (the
#                                       example draws its pipeline), a virtualenv in .venv
#                                       and the package with its spark and graph extras
#   bash scripts/bootstrap.sh all       (the default) the same, plus every other extra
#                                       (connect, frames, docs, test) and .venv-workers,
#                                       the Python the tests run Spark's workers on
#
# Re-running it is cheap: pip is skipped while pyproject.toml is unchanged since that set
# of extras was installed (a stamp per set in .venv), so `make test` after `make example`
# adds the missing extras to the same .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
CHOICE=${1:-all}
case "$CHOICE" in
  example) EXTRAS="spark,graph" ;;
  all) EXTRAS="spark,connect,frames,graph,docs,test" ;;
  *) echo "usage: bash scripts/bootstrap.sh [example|all]" >&2; exit 2 ;;
esac

need_java() {
  command -v java >/dev/null 2>&1 || return 0
  local major
  major=$(java -version 2>&1 | awk -F'"' '/version/ {print $2}' | cut -d. -f1)
  [ "${major:-0}" -ge 17 ] && return 1 || return 0
}

if need_java; then
  echo "bootstrap: installing Java 17 (needed by PySpark 4)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

if ! command -v dot >/dev/null 2>&1; then
  echo "bootstrap: installing Graphviz (dot draws a pipeline: graph.render, Jupyter)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq graphviz >/dev/null
fi

if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "bootstrap: sparkbeam needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi

# A stamp per set of extras; `all` holds every extra `example` needs, so its stamp serves both
# (as does .sparkbeam-installed, the stamp of every extra this script wrote before it had sets).
fresh() { [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ]; }
stamp="$VENV/.sparkbeam-installed-$CHOICE"
if ! fresh "$stamp" && ! fresh "$VENV/.sparkbeam-installed-all" \
    && ! fresh "$VENV/.sparkbeam-installed"; then
  echo "bootstrap: installing sparkbeam with the extras $EXTRAS into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
  touch "$stamp"
fi

if [ "$CHOICE" = example ]; then
  exit 0
fi

# A Python for Spark's workers with exactly what a vanilla cluster's executors have:
# pyspark, pandas and pyarrow (and what they require, numpy), at the driver's versions,
# and nothing else: no sparkbeam and none of the test tools. The cluster test runs its
# executors on it (tests/runners/spark/test_cluster.py checks that `import sparkbeam`
# and `import attrs` fail there). Made once; made anew when the driver's versions change.
WORKERS=.venv-workers
workers_needs=$("$VENV/bin/python" -c 'from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in ("pyspark", "pandas", "pyarrow")))')
workers_stamp="$WORKERS/.sparkbeam-workers"
if [ ! -x "$WORKERS/bin/python" ] || [ "$(cat "$workers_stamp" 2>/dev/null)" != "$workers_needs" ]; then
  echo "bootstrap: making $WORKERS ($workers_needs), a vanilla Spark worker's Python"
  rm -rf "$WORKERS"
  "$PYTHON" -m venv "$WORKERS"
  # shellcheck disable=SC2086 # one argument per requirement
  "$WORKERS/bin/python" -m pip install -q $workers_needs
  echo "$workers_needs" > "$workers_stamp"
fi

# pyspark's code compiled inside the zips Spark puts on its Python processes' path (pip's
# PySpark ships them without: each process Spark starts compiled what it imports; see
# tests/compiled_pyspark.py). Checks the zips each time (well under a second); compiles them
# once, and again after pyspark is installed anew.
"$VENV/bin/python" -m tests.compiled_pyspark

# Hadoop's local file system for the suite's JVMs, setting permissions without starting a
# chmod process per file (tests/local_filesystem.py), compiled into a jar in .venv: needs a
# Java compiler, installed here where apt can; without one the suite runs on Hadoop's own.
# Compiled once; anew when its source or pyspark changes.
if ! command -v javac >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: installing a Java 17 compiler (for the tests' local file system)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  { $SUDO apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless \
    >/dev/null; } || echo "bootstrap: no Java compiler installed; the tests run without it"
fi
"$VENV/bin/python" -m tests.local_filesystem

# Spark's classes as a class-data-sharing archive for the suite's JVMs (tests/class_archive.py:
# a JVM's start maps them instead of loading them from the jars). Written once; anew when
# pyspark, Java or the suite's class path changes (the local file system's jar: the JVM
# checks each jar's time and size). A JVM that finds it stale loads the jars as before.
archive_needs="$("$VENV/bin/python" -c 'from importlib.metadata import version
from tests.local_filesystem import JAR
jar = f"{JAR.stat().st_mtime_ns} {JAR.stat().st_size}" if JAR.is_file() else "none"
pyspark = version("pyspark")
print(f"pyspark=={pyspark} local-fs={jar}")') $(java -version 2>&1 | head -1)"
archive_stamp="$VENV/.spark-classes"
if [ ! -f "$VENV/spark-classes.jsa" ] || [ "$(cat "$archive_stamp" 2>/dev/null)" != "$archive_needs" ]; then
  echo "bootstrap: writing Spark's class archive for the tests' JVMs (about a minute)"
  "$VENV/bin/python" -m tests.class_archive
  echo "$archive_needs" > "$archive_stamp"
fi
