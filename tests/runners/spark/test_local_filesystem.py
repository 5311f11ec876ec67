"""The suite's JVM writes local files through Hadoop's local file system with permissions set in
the JVM (`tests/local_filesystem.py`), and sets the bits Hadoop's own sets."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests import local_filesystem

pytestmark = pytest.mark.spark

MODES = ["644", "755", "600", "750", "000", "777", "1777", "1755"]
"""Permissions a file system is asked to set, octal, the sticky bit among them (the in-process
one hands it to Hadoop's `chmod`)."""


def test_the_suites_session_uses_the_compiled_file_system(spark: Any) -> None:
    assert local_filesystem.is_current(), "make install compiles it (it needs javac)"
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    local = spark.sparkContext._jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert local.getClass().getName() == local_filesystem.CLASS


def test_it_sets_the_permissions_hadoops_own_sets(spark: Any, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    systems = {
        "in-process": jvm.sparkbeam.tests.InProcessLocalFileSystem.Raw(),
        "hadoop": jvm.org.apache.hadoop.fs.RawLocalFileSystem(),
    }
    modes: dict[str, list[tuple[int, int]]] = {}
    for name, system in systems.items():
        system.initialize(jvm.java.net.URI("file:///"), conf)
        modes[name] = []
        for octal in MODES:
            permission = jvm.org.apache.hadoop.fs.permission.FsPermission(octal)
            file, directory = tmp_path / name / f"file-{octal}", tmp_path / name / f"dir-{octal}"
            file.parent.mkdir(exist_ok=True)
            file.write_text("x")
            os.chmod(file, 0o640)  # not among MODES: each call changes it
            system.setPermission(jvm.org.apache.hadoop.fs.Path(str(file)), permission)
            assert system.mkdirs(jvm.org.apache.hadoop.fs.Path(str(directory)), permission)
            modes[name].append(
                (stat.S_IMODE(file.stat().st_mode), stat.S_IMODE(directory.stat().st_mode))
            )
            os.chmod(directory, 0o700)  # pytest removes tmp_path: a directory it may enter
    assert modes["in-process"] == modes["hadoop"]
    # a file's permission is set as asked; a new directory's goes through the umask
    assert [file for file, _ in modes["hadoop"]] == [int(octal, 8) for octal in MODES]


def test_a_checksummed_file_gets_hadoops_permissions(spark: Any, tmp_path: Path) -> None:
    """Through the whole file system (checksums on): the file and its `.crc` as Hadoop's own
    local file system writes them."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    written = {}
    for name, system in [
        ("in-process", jvm.sparkbeam.tests.InProcessLocalFileSystem()),
        ("hadoop", jvm.org.apache.hadoop.fs.LocalFileSystem()),
    ]:
        system.initialize(jvm.java.net.URI("file:///"), conf)
        stream = system.create(jvm.org.apache.hadoop.fs.Path(str(tmp_path / name / "a" / "f")))
        stream.write(7)
        stream.close()
        written[name] = sorted(
            (str(path.relative_to(tmp_path / name)), stat.S_IMODE(path.stat().st_mode))
            for path in (tmp_path / name).rglob("*")
        )
    assert written["in-process"] == written["hadoop"]
    assert [path for path, _ in written["hadoop"]] == ["a", "a/.f.crc", "a/f"]
