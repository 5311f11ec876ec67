"""The direct runner on an object store: `s3://` through a real S3 API (moto's server on
127.0.0.1, started here and stopped after; pyarrow's S3 client, pointed at it by
`AWS_ENDPOINT_URL`), and URIs it cannot reach refused before anything is written.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import moto.server  # noqa: F401 - the test extra has it: missing is a failure, not a skip
import pytest

import sparkbeam as sb
from tests.agreement.pipelines import row_multiset

ROWS = [
    {"k": "a", "v": 1, "x": 0.5, "ok": True, "t": datetime(2026, 4, 1, 10, 0, 1)},
    {"k": "b", "v": None, "x": 2.0, "ok": False, "t": datetime(2026, 4, 1, 10, 0, 30, 5)},
]
SCHEMA = {"k": str, "v": int, "x": float, "ok": bool, "t": datetime}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 for this module's tests."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the moto server, with the AWS settings that point clients at it."""
    import pyarrow.fs as pafs

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    name = f"bucket-{time.monotonic_ns()}"
    admin = pafs.S3FileSystem(endpoint_override=s3_endpoint, allow_bucket_creation=True)
    admin.create_dir(name)
    return name


@pytest.mark.parametrize("format", ["parquet", "json", "csv"])
def test_write_and_read_files_on_s3(bucket: str, format: str) -> None:
    target = f"s3://{bucket}/orders/{format}"
    with sb.Pipeline() as w:
        (w | sb.Create(ROWS, schema=SCHEMA)).write_files(target, format=format)

    r = sb.Pipeline()
    read = r | sb.ReadFiles(target, format=format, schema=None if format == "parquet" else SCHEMA)
    assert row_multiset(r.run().collect(read)) == row_multiset(ROWS)

    refused = sb.Pipeline()
    rows = refused | sb.Create(ROWS, schema=SCHEMA)
    with pytest.raises(sb.PipelineError, match=r"exists and mode='error'"):
        rows | sb.WriteFiles(target, format=format, mode="error")

    with sb.Pipeline() as w:  # overwrite replaces the directory's files
        (w | sb.Create(ROWS[:1], schema=SCHEMA)).write_files(target, format=format)
    r = sb.Pipeline()
    read = r | sb.ReadFiles(target, format=format, schema=SCHEMA)
    assert row_multiset(r.run().collect(read)) == row_multiset(ROWS[:1])


def test_streaming_read_files_on_s3_is_one_epoch_per_file(bucket: str) -> None:
    for index in range(2):
        with sb.Pipeline() as w:
            rows = w | sb.Create(ROWS[index : index + 1], schema=SCHEMA)
            rows.write_files(f"s3://{bucket}/epochs/{index}")
    import pyarrow.fs as pafs

    store = pafs.S3FileSystem(endpoint_override=os.environ["AWS_ENDPOINT_URL"])
    for index in range(2):  # one directory of files, named in epoch order
        store.move(
            f"{bucket}/epochs/{index}/part-00000.parquet", f"{bucket}/stream/{index}.parquet"
        )
    p = sb.Pipeline()
    read = p | sb.ReadFiles(f"s3://{bucket}/stream", streaming=True)
    assert p.run().collect_by_epoch(read) == [ROWS[:1], ROWS[1:], []]


def test_a_missing_s3_path_names_the_transform(bucket: str) -> None:
    p = sb.Pipeline()
    with pytest.raises(sb.PipelineError, match=r"ReadFiles\(nope\): no file or directory"):
        p | sb.ReadFiles(f"s3://{bucket}/nope")


@pytest.mark.parametrize("uri", ["viewfs://lake/revenue", "s3a://my-bucket/revenue"])
def test_a_uri_the_direct_runner_cannot_write_is_refused_before_anything_is_written(
    uri: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    p = sb.Pipeline()
    rows = p | sb.Create(ROWS, schema=SCHEMA)
    with pytest.raises(sb.PipelineError) as caught:
        rows.write_files(uri, format="json")
    message = str(caught.value)
    assert "WriteFiles(revenue)" in message and uri in message
    assert "install" in message and "Spark runner" in message
    assert os.listdir(tmp_path) == []  # no ./viewfs:/... or ./s3a:/... on local disk
