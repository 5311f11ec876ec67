"""test_cluster.py's standalone cluster and its driver, started in the background.

A pytest plugin (`tests/conftest.py` loads it): as the suite's collection ends, when a test
of test_cluster.py that reads the driver's results (`driver`) is among the tests, a thread
starts a standalone master and one worker from pyspark's own `spark-class` on 127.0.0.1,
then the driver process (`cluster_job.py`: its `no-ship` application, then its `ship` one),
so that its JVMs run beside the suite's, which leaves a core idle part of the time. The
fixture waits for the driver (`cluster_of`); the module's end, or the suite's at the latest
(`pytest_unconfigure`: also after `-x`, Ctrl-C or a failure), stops every process of the
cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyspark
import pytest

from tests.runners.spark import cluster_job

ROOT = Path(__file__).resolve().parents[3]
WORKERS_PYTHON = ROOT / ".venv-workers" / "bin" / "python"
SPARK_HOME = Path(pyspark.__file__).parent
MODES = ("no-ship", "ship")
"""The driver's two applications, in this order: without sparkbeam shipped to the workers (it
fails at its first job), then with it."""


def on_workers_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`code` run by the workers' Python in a fresh process, without the suite's `PYTHONPATH`
    (which may name the repository)."""
    return subprocess.run(
        [str(WORKERS_PYTHON), "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={name: value for name, value in os.environ.items() if name != "PYTHONPATH"},
    )


CLUSTER = pytest.StashKey["Cluster"]()
"""The suite's cluster, once started, in the config's stash."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Driver:
    """One driver process, its standard output and error in files (no pipe to fill while
    the suite runs other tests)."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def output(self, seconds: float) -> tuple[str, str]:
        """Its standard output and error, once it ended (within `seconds`)."""
        self.process.wait(seconds)
        return (
            self.stdout.read_text(errors="replace"),
            self.stderr.read_text(errors="replace"),
        )


class Cluster:
    """A master and one worker (2 cores, 2 GiB), then the driver, started by a thread
    (`start`); `driver` waits for that thread, `stop` ends every process it started."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="sparkbeam-cluster-"))
        self.port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started: Driver | None = None
        self.failure: BaseException | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._start, name="spark-cluster", daemon=True)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.thread.start()

    def driver(self, seconds: float = 600) -> Driver:
        """The driver, once started (the master and worker up)."""
        self.thread.join(seconds)
        if self.failure is not None:
            raise self.failure
        assert self.started is not None, f"the cluster did not start within {seconds} s"
        return self.started

    def _spawn(
        self, command: list[str], env: dict[str, str], out: IO[bytes], err: IO[bytes], cwd: Path
    ) -> subprocess.Popen[bytes]:
        """`command` started in a process group of its own (unless stopping), kept for `stop`."""
        with self.lock:
            if self.stopping.is_set():
                raise RuntimeError("the cluster was stopped while it started")
            process = subprocess.Popen(
                command, env=env, stdout=out, stderr=err, cwd=cwd, start_new_session=True
            )
            self.processes.append(process)
        return process

    def _spark_class(self, main: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_DAEMON_JAVA_OPTS": cluster_job.SPARK_JVM,
            "SPARK_LAUNCHER_OPTS": cluster_job.SHORT_LIVED_JVM,
        }
        env.pop("PYSPARK_PYTHON", None)
        env.pop("PYTHONPATH", None)  # the suite's may name the repository: executors lack sparkbeam
        with open(log, "wb") as out:
            return self._spawn(
                [str(SPARK_HOME / "bin" / "spark-class"), main, *args], env, out, out, log.parent
            )

    def _wait_for(self, log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not self.stopping.is_set():
            if log.exists() and text in log.read_text(errors="replace"):
                return
            if process.poll() is not None:
                break
            time.sleep(0.1)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise AssertionError(f"{log.name}: no {text!r}:\n{tail}")

    def _start(self) -> None:
        try:
            logs = self.directory
            master = self._spark_class(
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port()),
                log=logs / "master.log",
            )  # fmt: skip
            self._wait_for(logs / "master.log", "I have been elected leader", master)
            worker = self._spark_class(
                "org.apache.spark.deploy.worker.Worker", self.url,
                "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                "--webui-port", str(free_port()), "--work-dir", str(logs / "work"),
                log=logs / "worker.log",
            )  # fmt: skip
            self._wait_for(logs / "worker.log", "Successfully registered with master", worker)
            self._start_driver()
        except BaseException as failure:
            self.failure = failure

    def _start_driver(self) -> None:
        """cluster_job.py (sparkbeam installed) as one driver process that runs its
        applications one after the other (`MODES`), each with the worker's two cores: one
        driver's start (Python and a JVM) less than a driver per application."""
        env = {
            **os.environ,
            "PYSPARK_PYTHON": str(WORKERS_PYTHON),
            "PYTHONPATH": str(ROOT),
            "SPARK_LAUNCHER_OPTS": cluster_job.SHORT_LIVED_JVM,
        }
        # not the repository: the workers must not find sparkbeam there
        cwd = self.directory / "driver"
        cwd.mkdir()
        stdout, stderr = cwd / "stdout", cwd / "stderr"
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            process = self._spawn(
                [sys.executable, str(Path(cluster_job.__file__)), self.url, *MODES],
                env,
                out,
                err,
                cwd,
            )
        self.started = Driver(process, stdout, stderr)

    def stop(self) -> None:
        """End every process started (the driver first, then worker and master: politely,
        then by force) and remove the logs."""
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(30)
        with self.lock:
            processes = list(reversed(self.processes))
            self.processes.clear()
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def cluster_of(config: pytest.Config) -> Cluster:
    """The cluster of this suite (`config`), started now if it was not yet."""
    if CLUSTER not in config.stash:
        config.stash[CLUSTER] = cluster = Cluster()
        cluster.start()
    return config.stash[CLUSTER]


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any("driver" in getattr(item, "fixturenames", ()) for item in session.items):
        cluster_of(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Never leave the cluster running (a run stopped early: `-x`, Ctrl-C, SIGTERM)."""
    cluster = config.stash.get(CLUSTER, None)
    if cluster is not None:
        cluster.stop()
