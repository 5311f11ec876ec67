"""The Spark runner's paths: every URI through the session's Hadoop file systems.

Everything the Spark runner asks of a path (what `ReadFiles` lists, the
`_spark_metadata` log of a file sink, CSV headers, checkpoints and whether a
query resumes from one, `WriteFiles(mode="overwrite")`/`"error"`, the epoch
files of replayed sources) goes through `SparkPaths`:

- a local path or a `file://` URI: on the driver's own disk
  (`sparkbeam.paths.DRIVER`; Hadoop's local file system is the same disk), so
  building a pipeline on local files starts no session;
- any other URI (`hdfs://`, `s3a://`, `abfss://`, `gs://`, `viewfs://`, ...):
  Hadoop's `FileSystem` for it, with the session's Hadoop configuration
  (`spark.hadoop.*` settings, also those set on the session at run time), in
  the driver's JVM. Small files (the sink log, headers, parquet footers) are
  read through it; Spark reads the data itself.
- A session without a JVM (Spark Connect) has no Hadoop in this process:
  there every URI is asked of `DRIVER` (pyarrow's file systems, fsspec), so
  paths the client machine reaches work, as on the direct runner.

All JVM use of the runner's file handling is in this module.
"""

from __future__ import annotations

import io
import tempfile
import uuid
from collections.abc import Callable
from typing import IO, Any

from pyspark.sql import SparkSession

from sparkbeam.errors import PipelineError
from sparkbeam.paths import (
    DRIVER,
    Kind,
    Paths,
    UnreachablePath,
    hidden_name,
    is_local,
    join,
    local_path,
    scheme,
)
from sparkbeam.runners.spark.session.sessions import local_cores, master_of
from sparkbeam.runners.spark.session.shipping import is_connect


def _jvm_of(spark: SparkSession) -> Any:
    """The session's JVM gateway, or None for a session without one (Spark Connect)."""
    try:
        return spark._jvm
    except Exception:  # pyspark.errors.PySparkAttributeError on Connect
        return None


class HadoopPaths:
    """`Paths` through Hadoop's `FileSystem` in the driver's JVM."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm = _jvm_of(spark)

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self.jvm.org.apache.hadoop.fs.Path(uri)
        # The session's Hadoop settings, also `spark.hadoop.*` set after the session started:
        # what Spark's own readers and writers use.
        conf = self.spark._jsparkSession.sessionState().newHadoopConf()
        try:
            return path.getFileSystem(conf), path
        except Exception as exc:  # Py4JJavaError: UnsupportedFileSystemException, ...
            raise UnreachablePath(
                f"Spark has no file system for {scheme(uri)}:// ({_java_message(exc)}); put the "
                "connector on Spark's classpath (spark.jars.packages, e.g. "
                "org.apache.hadoop:hadoop-aws for s3a://) and its spark.hadoop.* settings"
            ) from None

    def check(self, uri: str) -> None:
        self._fs(uri)

    def kind(self, uri: str) -> Kind | None:
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return None
        return "directory" if fs.getFileStatus(path).isDirectory() else "file"

    def list(self, uri: str) -> list[tuple[str, bool]]:
        fs, path = self._fs(uri)
        statuses = fs.listStatus(path)
        return sorted((status.getPath().getName(), status.isFile()) for status in statuses)

    def open_input(self, uri: str) -> IO[bytes]:
        fs, path = self._fs(uri)
        size = fs.getFileStatus(path).getLen()
        return io.BufferedReader(_HadoopInput(fs.open(path), size), buffer_size=1 << 20)

    def write_bytes(self, uri: str, data: bytes, staged: str | None = None) -> None:
        fs, path = self._fs(uri)
        staged = staged if staged is not None else hidden_name(uri)
        hidden = self.jvm.org.apache.hadoop.fs.Path(staged)
        out = fs.create(hidden, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if fs.exists(path):
            fs.delete(path, False)
        if not fs.rename(hidden, path):
            fs.delete(hidden, False)
            raise OSError(f"could not rename {staged!r} to {uri!r}")

    def delete(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.delete(path, True)

    def mkdirs(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.mkdirs(path)


def _java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    text = java.toString() if java is not None else str(exc)
    return text.strip().splitlines()[0][:300]


class _HadoopInput(io.RawIOBase):
    """A Hadoop `FSDataInputStream` as a seekable Python file (bytes come over py4j)."""

    def __init__(self, stream: Any, size: int) -> None:
        self.stream = stream
        self.size = size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self.size - self.position)
        if wanted <= 0:
            return 0
        self.stream.seek(self.position)
        data = bytes(self.stream.readNBytes(wanted))
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.stream.close()
        super().close()


class SparkPaths:
    """The Spark runner's `Paths`: local paths on the driver's disk, every other URI through
    the session's Hadoop file systems (`DRIVER` where the session has no JVM: Spark Connect).

    `session` is called only when a non-local URI is first asked about, so building a
    pipeline on local files starts no session.
    """

    def __init__(self, session: Callable[[], SparkSession]) -> None:
        self._session = session
        self._hadoop: Paths | None = None

    def _for(self, uri: str) -> Paths:
        if is_local(uri):
            return DRIVER
        if self._hadoop is None:
            spark = self._session()
            self._hadoop = HadoopPaths(spark) if _jvm_of(spark) is not None else DRIVER
        return self._hadoop

    def check(self, uri: str) -> None:
        self._for(uri).check(uri)

    def kind(self, uri: str) -> Kind | None:
        return self._for(uri).kind(uri)

    def list(self, uri: str) -> list[tuple[str, bool]]:
        return self._for(uri).list(uri)

    def open_input(self, uri: str) -> IO[bytes]:
        return self._for(uri).open_input(uri)

    def write_bytes(self, uri: str, data: bytes, staged: str | None = None) -> None:
        self._for(uri).write_bytes(uri, data, staged)

    def delete(self, uri: str) -> None:
        self._for(uri).delete(uri)

    def mkdirs(self, uri: str) -> None:
        self._for(uri).mkdirs(uri)


def paths_of(spark: SparkSession) -> SparkPaths:
    """The `SparkPaths` of a session."""
    return SparkPaths(lambda: spark)


def local_directory(spark: SparkSession, uri: str) -> str | None:
    """The directory on the driver's disk that `uri` names: a local path or `file:` URI as it
    is; any other URI as the session's Hadoop file system resolves it (a `viewfs://` mount of a
    `file:` directory, following its mount table), where it resolves to a `file:` path; None
    where it does not, where nothing is there, or where the session has no JVM (Spark
    Connect)."""
    if is_local(uri):
        return local_path(uri)
    jvm = _jvm_of(spark)
    if jvm is None:
        return None
    try:
        fs, path = HadoopPaths(spark)._fs(uri)
        resolved = fs.resolvePath(path).toUri()
    except Exception:  # UnreachablePath, Py4JJavaError (FileNotFoundException, ...)
        return None
    if (resolved.getScheme() or "").lower() != "file":
        return None
    return str(resolved.getPath())


def scratch_directory(paths: Paths, staging: str | None, prefix: str) -> str:
    """A new directory for a run's own files (epoch files, temporary checkpoints): under
    `staging` (`SparkRunner(staging_location=...)`, any URI Spark reaches), else a local
    temporary directory."""
    if staging is None:
        return tempfile.mkdtemp(prefix=prefix)
    directory = join(staging, f"{prefix}{uuid.uuid4().hex[:12]}")
    paths.mkdirs(directory)
    return directory


LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def connect_host(spark: SparkSession) -> str | None:
    """The host a Spark Connect session talks to ("" where it does not say); None for a
    classic session. A server on this machine shares its disk; any other does not."""
    if not is_connect(spark):
        return None
    builder = getattr(getattr(spark, "client", None), "_builder", None)
    return str(getattr(builder, "host", "") or "")


def require_staging(spark: SparkSession, staging: str | None, label: str, source: str) -> None:
    """Refuse to replay a source on a non-local master without a staging location: its epoch
    files would go to the driver's local disk, which the executors do not see."""
    master = master_of(spark)
    if staging is not None:
        return
    remote = connect_host(spark)
    if remote is not None and remote not in LOOPBACK:
        raise PipelineError(
            f"{label}: {source} is replayed through epoch files that the Spark Connect "
            f"server at {remote!r} reads, and a temporary directory of this client is not "
            "on its machine; set SparkRunner(staging_location=...) to a URI both this "
            "client (pyarrow or fsspec) and the server reach under one name (s3://..., "
            "gs://..., abfss://...)"
        )
    if local_cores(master) is not None:
        return
    raise PipelineError(
        f"{label}: {source} is replayed through epoch files that Spark's executors read, and "
        f"the session's master {master!r} is not local, so a local temporary directory will "
        "not do; set SparkRunner(staging_location=...) to a directory every executor reaches "
        "(hdfs://..., s3a://..., abfss://..., or a shared mount)"
    )
