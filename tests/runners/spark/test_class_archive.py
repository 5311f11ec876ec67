"""The suite's JVMs map Spark's classes from the archive `make install` writes
(`tests/class_archive.py`), which the JVM uses only where it matches its JDK and jars."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.class_archive import ARCHIVE

pytestmark = pytest.mark.spark


def test_the_suites_jvm_maps_the_class_archive(spark: Any) -> None:
    assert ARCHIVE.is_file(), "make install writes it (python -m tests.class_archive)"
    pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert str(ARCHIVE) in maps, "the JVM did not take the archive: rewrite it"
