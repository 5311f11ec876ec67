"""Paths and URIs: the one way sparkbeam reads, lists, writes and deletes files.

A path is a local path (`data/orders`), a `file://` URI, or any other URI
(`s3://bucket/orders`, `hdfs://nn/orders`, `viewfs://lake/orders`). Every
file question sparkbeam asks goes through a `Paths`:

- `DriverPaths` (this module) answers on the machine running Python, through
  `pyarrow.fs`: local paths and `file://` with nothing more installed;
  `s3://` (pyarrow's S3, in its wheels: credentials, region and endpoint
  from the usual AWS settings, e.g. `AWS_ENDPOINT_URL` for an S3-compatible
  store), `gs://` and `abfs://`/`abfss://` likewise; any other scheme through
  fsspec where its package is installed (`s3fs`, `gcsfs`, `adlfs`, ...). The
  direct runner uses it.
- The Spark runner's (`runners.spark.paths`) asks the session's Hadoop file
  system, so every URI Spark reads works there.

While a pipeline applies a transform, `current()` is its runner's `Paths`
(a runner's `paths` attribute; `DriverPaths` for a runner without one), so
`ReadFiles` lists and reads schemas where its runner will read the files.
A URI a `Paths` cannot reach raises `UnreachablePath`, whose message says
what to install or set; callers name their transform in front of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import posixpath
import re
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import IO, Any, Literal, Protocol

Kind = Literal["file", "directory"]

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


class UnreachablePath(Exception):
    """A `Paths` cannot reach a URI; the message says why and what to do."""


def scheme(uri: str) -> str:
    """The URI's scheme, lower case (`"s3"`); `""` for a plain local path."""
    match = _SCHEME.match(uri)
    return match.group("scheme").lower() if match else ""


def is_local(uri: str) -> bool:
    """Whether `uri` is on this machine's file system: a plain path or a `file:` URI."""
    return scheme(uri) in ("", "file") or uri.startswith("file:/")


def local_path(uri: str) -> str:
    """The local path of a plain path or a `file:` URI (`file:///tmp/x` -> `/tmp/x`)."""
    if uri.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    return uri


def normalised(uri: str) -> str:
    """`uri` in one spelling, to compare paths: a local path (or `file:` URI) absolute, any other
    URI with its scheme in lower case; `.`, `..`, repeated and trailing slashes resolved."""
    if is_local(uri):
        return os.path.normpath(os.path.abspath(local_path(uri)))
    parsed = urllib.parse.urlparse(uri)
    path = posixpath.normpath("/" + parsed.path.lstrip("/")) if parsed.path else "/"
    return f"{parsed.scheme.lower()}://{parsed.netloc}{path.rstrip('/') or '/'}"


def contains(outer: str, inner: str) -> bool:
    """Whether the normalised path `inner` is `outer` or under it."""
    if inner == outer:
        return True
    prefix = outer if outer.endswith(("/", os.sep)) else outer + ("/" if "://" in outer else os.sep)
    return inner.startswith(prefix)


def join(uri: str, *names: str) -> str:
    """`uri` with `names` appended, `/`-separated (a local path joins as `os.path.join`)."""
    if scheme(uri) == "":
        return os.path.join(uri, *names)
    return "/".join([uri.rstrip("/"), *names])


def base_name(uri: str) -> str:
    """The last part of a path or URI (`s3://b/orders/` -> `orders`)."""
    trimmed = uri.rstrip("/")
    if scheme(trimmed):
        trimmed = urllib.parse.urlparse(trimmed).path.rstrip("/")
    return trimmed.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1]


class Paths(Protocol):
    """A file system as sparkbeam uses it: paths or URIs in, names and bytes out."""

    def check(self, uri: str) -> None:
        """Raise `UnreachablePath` when this cannot reach `uri`'s file system at all."""

    def kind(self, uri: str) -> Kind | None:
        """`"file"`, `"directory"`, or None when nothing is there."""

    def list(self, uri: str) -> list[tuple[str, bool]]:
        """A directory's entries as (name, is a file), in name order."""

    def open_input(self, uri: str) -> IO[bytes]:
        """A file opened for reading: seekable, so that parquet readers can use it."""

    def write_bytes(self, uri: str, data: bytes, staged: str | None = None) -> None:
        """Write a whole file so that readers see it whole or not at all where the file
        system can: written at `staged` (by default a hidden name next to it), then renamed.
        Where something lists the directory as it is written (Spark's file source), give a
        `staged` outside it."""

    def delete(self, uri: str) -> None:
        """Delete a file or a directory and everything under it; nothing there is fine."""

    def mkdirs(self, uri: str) -> None:
        """Make a directory and its parents (object stores: nothing to do)."""


def read_text(paths: Paths, uri: str) -> str:
    with paths.open_input(uri) as handle:
        return handle.read().decode("utf-8")


def hidden_name(uri: str) -> str:
    """A name next to `uri` that readers skip (starts with `.`), unique to this write."""
    parent, _, name = uri.rstrip("/").rpartition("/")
    if not parent and os.sep != "/":  # pragma: no cover - Windows paths
        parent, _, name = uri.rpartition(os.sep)
    return f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.tmp"


AWS_SETTINGS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
"""What `s3://` reads from the environment besides credentials (the AWS SDK reads those)."""

ARROW_SYSTEMS = ("s3", "gs", "gcs", "abfs", "abfss")
"""Schemes pyarrow's wheels reach by themselves (`hdfs://` needs libhdfs, a Hadoop client)."""

FSSPEC_PACKAGES = {"s3a": "s3fs", "az": "adlfs", "hdfs": "fsspec (and libhdfs, JAVA_HOME)"}


def _fsspec_system(name: str) -> Any:
    try:
        import fsspec
    except ImportError:
        return None
    try:
        return fsspec.filesystem(name)
    except (ImportError, ValueError):
        return None


def _no_system(name: str) -> str:
    package = FSSPEC_PACKAGES.get(name, f"the fsspec package for {name}://")
    return (
        f"this Python process has no file system for {name}:// URIs; install fsspec and "
        f"{package}, or run the pipeline on the Spark runner, which reaches every URI its "
        "Hadoop file systems know"
    )


class DriverPaths:
    """`Paths` on this machine through `pyarrow.fs` (fsspec for other schemes)."""

    def __init__(self) -> None:
        self._systems: dict[tuple[str, ...], Any] = {}

    def _resolve(self, uri: str) -> tuple[Any, str]:
        """The pyarrow file system of `uri` (cached by scheme, host and AWS settings) and its
        path there."""
        import pyarrow.fs as pafs

        if is_local(uri):
            return pafs.LocalFileSystem(), os.path.abspath(local_path(uri))
        parsed = urllib.parse.urlparse(uri)
        key = (scheme(uri), parsed.netloc, *(os.environ.get(name, "") for name in AWS_SETTINGS))
        system = self._systems.get(key)
        if system is None:
            system = self._system(uri)
            self._systems[key] = system
        found, path = system, (parsed.netloc + parsed.path).rstrip("/")
        if key[0] in ("abfs", "abfss") and "@" in parsed.netloc:  # container@account
            path = (parsed.netloc.split("@", 1)[0] + parsed.path).rstrip("/")
        return found, path

    def _system(self, uri: str) -> Any:
        import pyarrow.fs as pafs

        name = scheme(uri)
        endpoint_s3, endpoint, region, default_region = (os.environ.get(n) for n in AWS_SETTINGS)
        endpoint, region = endpoint_s3 or endpoint, region or default_region
        if name == "s3" and (endpoint or region):
            # Without either, `from_uri` asks S3 for the bucket's region (a network call).
            return pafs.S3FileSystem(endpoint_override=endpoint, region=region)
        if name in ARROW_SYSTEMS:
            try:
                system, _ = pafs.FileSystem.from_uri(uri)
                return system
            except (ValueError, OSError) as exc:  # ArrowInvalid is a ValueError
                raise UnreachablePath(f"pyarrow could not open it: {exc}") from None
        spec = _fsspec_system(name)
        if spec is None:
            raise UnreachablePath(_no_system(name))
        return pafs.PyFileSystem(pafs.FSSpecHandler(spec))

    def check(self, uri: str) -> None:
        """By the scheme alone (no connection is made)."""
        name = scheme(uri)
        if is_local(uri) or name in ARROW_SYSTEMS:
            return
        try:
            import fsspec
        except ImportError:
            raise UnreachablePath(_no_system(name)) from None
        try:
            fsspec.get_filesystem_class(name)
        except (ImportError, ValueError):
            raise UnreachablePath(_no_system(name)) from None

    def kind(self, uri: str) -> Kind | None:
        import pyarrow.fs as pafs

        system, path = self._resolve(uri)
        found = system.get_file_info(path).type
        if found == pafs.FileType.File:
            return "file"
        if found == pafs.FileType.Directory:
            return "directory"
        return None

    def list(self, uri: str) -> list[tuple[str, bool]]:
        import pyarrow.fs as pafs

        system, path = self._resolve(uri)
        infos = system.get_file_info(pafs.FileSelector(path))
        return sorted((info.base_name, info.type == pafs.FileType.File) for info in infos)

    def open_input(self, uri: str) -> IO[bytes]:
        if is_local(uri):
            return open(local_path(uri), "rb")
        system, path = self._resolve(uri)
        handle: IO[bytes] = system.open_input_file(path)
        return handle

    def write_bytes(self, uri: str, data: bytes, staged: str | None = None) -> None:
        if is_local(uri):
            target = local_path(uri)
            hidden = local_path(staged) if staged is not None else hidden_name(target)
            with open(hidden, "wb") as handle:
                handle.write(data)
            os.replace(hidden, target)
            return
        system, path = self._resolve(uri)
        # Object stores write a whole object at once: readers never see part of it.
        with system.open_output_stream(path) as handle:
            handle.write(data)

    def delete(self, uri: str) -> None:
        import pyarrow.fs as pafs

        system, path = self._resolve(uri)
        found = system.get_file_info(path).type
        if found == pafs.FileType.Directory:
            system.delete_dir(path)
        elif found == pafs.FileType.File:
            system.delete_file(path)

    def mkdirs(self, uri: str) -> None:
        system, path = self._resolve(uri)
        system.create_dir(path, recursive=True)


DRIVER = DriverPaths()
"""The `Paths` of this machine, shared: it caches one file system per scheme and host."""

_CURRENT: contextvars.ContextVar[Paths | None] = contextvars.ContextVar(
    "sparkbeam_paths", default=None
)


def current() -> Paths:
    """The `Paths` of the runner whose pipeline is applying a transform (`DRIVER` otherwise)."""
    return _CURRENT.get() or DRIVER


@contextlib.contextmanager
def using(paths: Paths | None) -> Iterator[None]:
    """Within the block, `current()` is `paths` (None: `DRIVER`)."""
    token = _CURRENT.set(paths)
    try:
        yield
    finally:
        _CURRENT.reset(token)
