"""A real multi-process Spark cluster whose Python workers have only PySpark's requirements.

A standalone master and one worker, started from pyspark's own `spark-class`
on 127.0.0.1 in the background as the suite's collection ends
(`background_cluster.py`), run executors whose Python is `.venv-workers`: a virtual
environment with pyspark, pandas and pyarrow installed into it and nothing
else (made by scripts/bootstrap.sh), as a vanilla cluster's. A driver
process (`cluster_job.py`) runs batch and streaming pipelines there; their
results must be the direct runner's. The cluster is stopped after the module.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.session import shipping
from tests.runners.spark import cluster_job
from tests.runners.spark.background_cluster import Driver, cluster_of, on_workers_python

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def driver(request: pytest.FixtureRequest) -> Iterator[Driver]:
    """The module's driver (one process runs its applications `no-ship`, then `ship`),
    on a cluster started in the background as the suite's collection ended
    (`background_cluster.py`), which is stopped after the module."""
    cluster = cluster_of(request.config)
    try:
        yield cluster.driver()
    finally:
        cluster.stop()


def outcome(driver: Driver, mode: str) -> str:
    """The RESULT or ERROR line of the driver's application `mode`, once the driver ended
    (without the mode)."""
    stdout, stderr = driver.output(seconds=600)
    marks = (f"RESULT {mode} ", f"ERROR {mode} ")
    lines = [line for line in stdout.splitlines() if line.startswith(marks)]
    assert lines, f"{mode}: no result:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    kind, _, rest = lines[-1].partition(f" {mode} ")
    return f"{kind} {rest}"


def workers_import(module: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return on_workers_python(f"import pyspark, pandas, pyarrow, numpy; import {module}", cwd)


@pytest.mark.parametrize("module", ["sparkbeam", "attrs", "cloudpickle", "hypothesis"])
def test_the_workers_python_has_pysparks_requirements_and_nothing_else(
    module: str, tmp_path: Path
) -> None:
    done = workers_import(module, tmp_path)
    assert done.returncode != 0, f"{module} is importable on the workers"
    assert f"No module named '{module}'" in done.stderr


def test_the_shipped_zip_brings_what_transform_with_state_needs(tmp_path: Path) -> None:
    """On the workers' Python, with the zip and a jar's `google/protobuf` directory (Spark's
    spark-core jar holds .proto files there) ahead of it on the path, sparkbeam's processors
    import and pyspark's state messages, which need protobuf, import after them."""
    jar_like = tmp_path / "jar" / "google" / "protobuf"
    jar_like.mkdir(parents=True)
    (jar_like / "descriptor.proto").write_text("syntax = 'proto3';\n")
    code = (
        "import sys\n"
        f"sys.path[1:1] = [{str(tmp_path / 'jar')!r}, {shipping.package_zip()!r}]\n"
        "import sparkbeam.runners.spark.translate.sort\n"
        "import sparkbeam.runners.spark.translate.python_combine\n"
        "import pyspark.sql.streaming.proto.StateMessage_pb2\n"
        "import google.protobuf, sparkbeam\n"
        "print(sparkbeam.__file__, google.protobuf.__file__)\n"
    )
    done = on_workers_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    package, protobuf = done.stdout.split()
    assert ".zip" in package
    assert protobuf.startswith(tempfile.gettempdir())  # the shipped copy, extracted


def bag(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in rows)


def test_pipelines_on_a_cluster_without_sparkbeam_give_the_direct_runners_rows(
    driver: Driver,
) -> None:
    line = outcome(driver, "ship")
    assert line.startswith("RESULT"), line
    spark = json.loads(line[len("RESULT ") :])
    direct = cluster_job.run_all(sb.DirectRunner())
    assert set(spark) == set(direct) == set(cluster_job.PIPELINES)
    for name, rows in direct.items():
        assert rows, name  # every pipeline emits something
        assert bag(spark[name]) == bag(rows), name
    for name in ("batch_sort", "streaming_sort"):
        assert [r["t"] for r in spark[name]] == [r["t"] for r in direct[name]], name
    assert direct["streaming_late_rows"] == [
        {"k": "a", "v": 3, "t": "2026-04-01T10:00:10", "late_watermark": "2026-04-01T10:01:30"}
    ]


def test_without_shipping_the_error_names_the_missing_package(
    driver: Driver,
) -> None:
    line = outcome(driver, "no-ship")
    assert line.startswith("ERROR PipelineError"), line
    assert "'sparkbeam" in line
    assert "ship_package" in line
    assert "pip install 'sparkbeam==" in line and "protobuf" in line  # what to install
    assert "py4j" not in line.lower()
