"""A real multi-process Spark cluster whose Python workers have only PySpark's requirements.

A standalone master and one worker, started from pyspark's own `spark-class`
on 127.0.0.1, run executors whose Python is `.venv-workers`: a virtual
environment with pyspark, pandas and pyarrow installed into it and nothing
else (made by scripts/bootstrap.sh), as a vanilla cluster's. A driver
process (`cluster_job.py`) runs batch and streaming pipelines there; their
results must be the direct runner's. The cluster is stopped after the module.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.session import shipping
from tests.runners.spark import cluster_job

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
WORKERS_PYTHON = ROOT / ".venv-workers" / "bin" / "python"
SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise AssertionError(f"{log.name}: no {text!r} within {seconds} s:\n{tail}")


def spark_class(main: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_DAEMON_JAVA_OPTS": cluster_job.SHORT_LIVED_JVM,
        "SPARK_LAUNCHER_OPTS": cluster_job.SHORT_LIVED_JVM,
    }
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYTHONPATH", None)  # the suite's may name the repository: executors lack sparkbeam
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), main, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`spark://127.0.0.1:<port>`: a master and one worker (2 cores, 2 GiB)."""
    logs = tmp_path_factory.mktemp("cluster")
    port = free_port()
    master = spark_class(
        "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()),
        log=logs / "master.log",
    )  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    worker = None
    try:
        wait_for(logs / "master.log", "I have been elected leader", master, 120)
        worker = spark_class(
            "org.apache.spark.deploy.worker.Worker", url,
            "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
            "--webui-port", str(free_port()), "--work-dir", str(logs / "work"),
            log=logs / "worker.log",
        )  # fmt: skip
        wait_for(logs / "worker.log", "Successfully registered with master", worker, 120)
        yield url
    finally:
        if worker is not None:
            stop(worker)
        stop(master)


@pytest.fixture(scope="module")
def drivers(
    cluster: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Both driver processes of the module (`ship`, `no-ship`), started at once.

    cluster_job.py (sparkbeam installed) runs as two applications side by side,
    each with one of the worker's two cores: the second needs no wait for the
    first (a driver's start-up is most of its time).
    """
    env = {
        **os.environ,
        "PYSPARK_PYTHON": str(WORKERS_PYTHON),
        "PYTHONPATH": str(ROOT),
        "SPARK_LAUNCHER_OPTS": cluster_job.SHORT_LIVED_JVM,
    }
    processes = {}
    for mode in ("ship", "no-ship"):
        processes[mode] = subprocess.Popen(
            [sys.executable, str(Path(cluster_job.__file__)), cluster, mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            # not the repository: the workers must not find sparkbeam there
            cwd=tmp_path_factory.mktemp(mode),
        )
    try:
        yield processes
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()


def outcome(process: subprocess.Popen[str]) -> str:
    """The driver's RESULT or ERROR line, once it ended."""
    stdout, stderr = process.communicate(timeout=600)
    lines = [line for line in stdout.splitlines() if line.startswith(("RESULT", "ERROR"))]
    assert lines, f"the driver printed no result:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return lines[-1]


def workers_import(module: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WORKERS_PYTHON), "-c", f"import pyspark, pandas, pyarrow, numpy; import {module}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={name: value for name, value in os.environ.items() if name != "PYTHONPATH"},
    )


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
    done = subprocess.run(
        [str(WORKERS_PYTHON), "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={name: value for name, value in os.environ.items() if name != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    package, protobuf = done.stdout.split()
    assert ".zip" in package
    assert protobuf.startswith(tempfile.gettempdir())  # the shipped copy, extracted


def bag(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in rows)


def test_pipelines_on_a_cluster_without_sparkbeam_give_the_direct_runners_rows(
    drivers: dict[str, subprocess.Popen[str]],
) -> None:
    line = outcome(drivers["ship"])
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
    drivers: dict[str, subprocess.Popen[str]],
) -> None:
    line = outcome(drivers["no-ship"])
    assert line.startswith("ERROR PipelineError"), line
    assert "'sparkbeam" in line
    assert "ship_package" in line
    assert "pip install 'sparkbeam==" in line and "protobuf" in line  # what to install
    assert "py4j" not in line.lower()
