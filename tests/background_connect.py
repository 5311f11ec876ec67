"""The Spark Connect server of the Connect tests, launched in the background.

A pytest plugin (`tests/conftest.py` loads it): as the suite's collection ends, when a test
that uses the `connect_spark` fixture is among the tests, it launches the server
(`tests/connect_server.py`), so that its JVM starts beside the suite's, which leaves a core
idle part of the time; the fixture waits until it listens (`server_of`). The module's end,
or the suite's at the latest (`pytest_unconfigure`: also after `-x`, Ctrl-C or a failure),
stops it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.connect_server import ConnectServer, connect_mode

SERVER = pytest.StashKey[ConnectServer]()
"""The server, once launched, in the config's stash."""


def server_of(config: pytest.Config) -> ConnectServer:
    """The Connect server of this suite (`config`), launched now if it was not yet."""
    if SERVER not in config.stash:
        config.stash[SERVER] = server = ConnectServer()
        server.launch()
    return config.stash[SERVER]


def release(config: pytest.Config) -> None:
    """Stop the server of this suite (`config`), if any: a later `server_of` launches
    another."""
    server = config.stash.get(SERVER, None)
    if server is not None:
        server.stop()
        del config.stash[SERVER]


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any("connect_spark" in getattr(item, "fixturenames", ()) for item in session.items):
        server_of(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Never leave the server running (a run stopped early: `-x`, Ctrl-C, SIGTERM)."""
    release(config)


@pytest.fixture(scope="module")
def connect_spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Spark Connect session on a server started from pyspark's own
    `sbin/start-connect-server.sh` (`tests/connect_server.py`) in the background as the
    suite's collection ended (`tests/background_connect.py`), stopped after the module. While
    the module runs, PySpark's functions build Connect columns (`connect_mode`)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    server = server_of(request.config)
    try:
        server.wait_until_listening()
        with connect_mode():
            session = ConnectSession.builder.remote(server.url).getOrCreate()
            try:
                yield session
            finally:
                session.stop()
    finally:
        release(request.config)
