"""A Spark Connect server for tests: pyspark's own `sbin/start-connect-server.sh` on 127.0.0.1.

The server runs in the foreground of its own process group (`--wait`), on a
free port, `local[2,3]` with few shuffle partitions and no UI, its logs in a
temporary directory (shown when it fails to start). `stop` ends it and every
process it started (the JVM and its Python workers).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import google
import grpc
import grpc_status
import typing_extensions
import zstandard

from tests.conftest import SUITE_ONLY_CONF
from tests.runners.spark.cluster_job import SPARK_JVM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONF = {
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.pollingDelay": "100ms",  # why: tests/conftest.py's SPARK_CONF
    "spark.sql.codegen.cache.maxEntries": "5000",  # why: the same
    "spark.driver.extraJavaOptions": SPARK_JVM,  # the server lives a module
    **SUITE_ONLY_CONF,  # the checkpoint file manager of the suite's session, for its reason
}

WORKERS_PYTHON = os.path.join(ROOT, ".venv-workers", "bin", "python")
"""A Python with exactly pyspark, pandas and pyarrow installed (scripts/bootstrap.sh)."""

STARTUP_SECONDS = 180
"""How long the server may take to listen (about 15-20 s on an idle 2-core machine)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux: /proc/<pid>/task/*/children), deepest last."""
    found: list[int] = []
    waiting = [pid]
    while waiting:
        parent = waiting.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                for child in children.read_text().split():
                    found.append(int(child))
                    waiting.append(int(child))
    return found


class ConnectServer:
    """One Spark Connect server process (tree), started by `start`, ended by `stop`."""

    def __init__(self) -> None:
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="sparkbeam-connect-")
        self.log = os.path.join(self.directory, "server.log")
        self.process: subprocess.Popen[bytes] | None = None
        self.launched = 0.0

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def job_modules(self) -> str:
        """The server's `PYTHONPATH`: this repository's `tests` (the agreement pipelines'
        functions, which cloudpickle sends by name, as a cluster imports a job's own installed
        modules), then what the server's own Python needs besides a vanilla worker's:
        sparkbeam and protobuf (the process that plans a `transformWithState` reads no
        artifact), and pyspark's Spark Connect client packages (a `foreachBatch` function
        runs in a Connect client on the server). The executors' Python workers import
        sparkbeam from the client's artifact, which comes first on their path
        (test_connect.py checks it)."""
        tests = os.path.join(self.directory, "job-modules")
        installed = os.path.join(self.directory, "server-site")
        links = {os.path.join(tests, "tests"): os.path.join(ROOT, "tests")}
        links[os.path.join(installed, "sparkbeam")] = os.path.join(ROOT, "sparkbeam")
        for module in (google, grpc, grpc_status, zstandard, typing_extensions):
            path = getattr(module, "__path__", None)
            source = str(path[0] if path else module.__file__)  # a package's directory or a file
            links[os.path.join(installed, os.path.basename(source))] = source
        for link, target in links.items():
            os.makedirs(os.path.dirname(link), exist_ok=True)
            if not os.path.lexists(link):
                os.symlink(target, link)
        return os.pathsep.join([tests, installed])

    def start(self) -> None:
        """Start the server and wait until it listens."""
        self.launch()
        self.wait_until_listening()

    def launch(self) -> None:
        """Start the server's process, without waiting for it (`wait_until_listening`)."""
        import pyspark

        home = os.path.dirname(pyspark.__file__)
        env = {
            **os.environ,
            "SPARK_HOME": home,
            "SPARK_LOG_DIR": self.directory,
            "SPARK_PID_DIR": self.directory,
            "SPARK_CONF_DIR": self.directory,  # no spark-defaults.conf from elsewhere
            # A vanilla worker's Python (pyspark, pandas and pyarrow: scripts/bootstrap.sh)
            # with what `job_modules` adds.
            "PYSPARK_PYTHON": WORKERS_PYTHON,
            "PYTHONPATH": self.job_modules(),
        }
        command = [
            os.path.join(home, "sbin", "start-connect-server.sh"),
            "--wait",  # in the foreground: this process group holds the JVM and its workers
            "--master",
            "local[2,3]",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
        ]
        for key, value in CONF.items():
            command += ["--conf", f"{key}={value}"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                command,
                env=env,
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.launched = time.monotonic()

    def wait_until_listening(self) -> None:
        """Return once the launched server listens; stop it and raise (its log's tail) if it
        exited or did not listen within `STARTUP_SECONDS` of its launch."""
        assert self.process is not None, "the server was not launched, or was stopped"
        deadline = self.launched + STARTUP_SECONDS
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with {self.process.returncode}"
                    if self.process.poll() is not None
                    else f"not listening after {STARTUP_SECONDS} s"
                )
                self.stop(keep_logs=True)
                raise RuntimeError(
                    f"Spark Connect server on port {self.port} {why}; its log "
                    f"({self.log}) ends:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError), open(self.log, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
        return "(no log)"

    def stop(self, keep_logs: bool = False) -> None:
        """End the server and every process below it (politely, then by force), and remove
        its directory unless `keep_logs`."""
        process = self.process
        if process is None:
            return
        tree = [process.pid, *_descendants(process.pid)]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        for pid in [*tree, *_descendants(process.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        self.process = None
        if not keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def connect_mode() -> Iterator[None]:
    """PySpark's functions (`F.col`, ...) build Spark Connect columns while inside.

    PySpark picks classic or Connect columns by a process-wide switch (the
    `SPARK_CONNECT_MODE_ENABLED` variable that `SparkSession.builder.remote`
    sets); a test process that also holds the classic session sets it only
    while it runs the Connect tests.
    """
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = before
