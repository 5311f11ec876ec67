"""Hadoop's local file system for the suite's JVMs, without a `chmod` process per file.

Without Hadoop's native library (pip's PySpark has none), Hadoop's local file
system sets each new file's and directory's permissions by starting `chmod`:
every checkpoint file and its checksum, every state store file, every part a
sink writes. The streaming agreement tests started about 2,100 of them in 50
seconds, at about 4 CPU-milliseconds each (the JVM's spawn, Hadoop's thread
reading the process's output, `chmod` itself). `InProcessLocalFileSystem`
(`tests/java`) is Hadoop's local file system setting the same bits through
`java.nio`. `make install` (scripts/bootstrap.sh) compiles it into a jar in
the virtual environment where a Java compiler is installed; the suite's
session and its Spark Connect server use it where the jar exists
(`spark_conf`). The cluster's executors and the drivers the restart tests
kill keep Hadoop's own.

    .venv/bin/python -m tests.local_filesystem    # compile it (again)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "java"
JAR = ROOT / ".venv" / "sparkbeam-local-fs.jar"
CLASS = "sparkbeam.tests.InProcessLocalFileSystem"
STAMP = "sparkbeam-stamp"
"""The jar's entry naming what it was compiled from (`needs`)."""


def spark_conf() -> dict[str, str]:
    """The settings that make a Spark JVM's `file:` paths use the jar's file system, or none
    where the jar was not compiled."""
    if not JAR.is_file():
        return {}
    return {"spark.hadoop.fs.file.impl": CLASS, "spark.driver.extraClassPath": str(JAR)}


def needs() -> str:
    """What the jar depends on: the sources and the pyspark whose Hadoop it compiles against."""
    digest = hashlib.sha256()
    for source in sorted(SOURCES.rglob("*.java")):
        digest.update(source.read_bytes())
    return f"pyspark=={importlib.metadata.version('pyspark')} {digest.hexdigest()}"


def is_current() -> bool:
    """Whether the jar exists and was compiled from today's sources for this pyspark."""
    try:
        with zipfile.ZipFile(JAR) as jar:
            return jar.read(STAMP).decode() == needs()
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def compile_jar() -> None:
    """Compile the sources against pyspark's jars into a new jar, renamed into place."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    with tempfile.TemporaryDirectory() as scratch:
        classes = Path(scratch) / "classes"
        sources = [str(path) for path in sorted(SOURCES.rglob("*.java"))]
        command = ["javac", "--release", "17", "-cp", f"{jars}/*", "-d", str(classes), *sources]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"local file system: javac failed:\n{done.stderr}")
        partial = JAR.with_suffix(".jar.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
            jar.writestr(STAMP, needs())
        os.replace(partial, JAR)
    print(f"local file system: {JAR.relative_to(ROOT)}")


def main() -> None:
    if is_current():
        return
    if shutil.which("javac") is None:
        print(
            "local file system: no Java compiler (javac), so the suite's JVMs keep Hadoop's "
            "local file system, which starts a chmod process per file it writes"
        )
        JAR.unlink(missing_ok=True)
        return
    compile_jar()


if __name__ == "__main__":
    main()
