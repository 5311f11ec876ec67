"""What both runners check of a pipeline's `WriteFiles` before anything runs: nothing lost.

- A `WriteFiles` whose path is one a `ReadFiles` of the same pipeline reads,
  or inside it, or around it, is refused: `mode="overwrite"` deletes the
  input before (Spark, which reads lazily) or while it is read, and a write
  into a directory that is read changes the input. Two `WriteFiles` on the
  same or nested paths are refused too: one would replace the other's files.
- `mode="error"` is checked when the pipeline runs, every time (not only when
  the transform was applied): a path that exists then is refused, before
  anything is read or written.

Paths are compared as written after normalising (`sparkbeam.paths.normalised`:
local paths made absolute, `file:` URIs as local paths, `.`/`..` and repeated
slashes resolved); two URIs of different schemes that reach the same store
(`s3://` and `s3a://`) are not recognised as the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.paths import Paths, UnreachablePath, contains, normalised
from sparkbeam.transforms.files import ReadFiles, WriteFiles


def refuse_overlapping_writes(nodes: Sequence[Node]) -> None:
    """`PipelineError` for a `WriteFiles` on a path the pipeline reads or writes elsewhere."""
    writes: list[tuple[Node, WriteFiles, str]] = []
    reads: list[tuple[Node, ReadFiles, str]] = []
    for node in nodes:
        if isinstance(node.transform, WriteFiles):
            writes.append((node, node.transform, normalised(node.transform.path)))
        elif isinstance(node.transform, ReadFiles):
            reads.append((node, node.transform, normalised(node.transform.path)))
    for write, written, target in writes:
        for read, source_files, source in reads:
            if contains(source, target) or contains(target, source):
                where = "is" if source == target else "overlaps"
                raise PipelineError(
                    f"{write.label}: path={written.path!r} {where} the input of {read.label} "
                    f"({source_files.path!r}); writing there would delete or change its rows "
                    "before they are read. Write to another path, and replace the input with "
                    "it once the pipeline has run"
                )
    for index, (first, one, one_path) in enumerate(writes):
        for second, other, other_path in writes[index + 1 :]:
            if contains(one_path, other_path) or contains(other_path, one_path):
                raise PipelineError(
                    f"{second.label}: path={other.path!r} overlaps the output of "
                    f"{first.label} ({one.path!r}); one would replace the other's files. "
                    "Give each WriteFiles a path of its own"
                )


def refuse_existing_outputs(nodes: Sequence[Node], paths: Paths) -> None:
    """`PipelineError` for a `WriteFiles(mode="error")` whose path exists now."""
    for node in nodes:
        transform = node.transform
        if isinstance(transform, WriteFiles) and transform.mode == "error":
            refuse_existing_output(node.label, transform.path, paths)


def refuse_existing_output(label: str, path: str, paths: Paths) -> None:
    """`PipelineError` when `path`, which a `WriteFiles(mode="error")` writes, exists now."""
    try:
        exists = paths.kind(path) is not None
    except UnreachablePath as exc:
        raise PipelineError(f"{label}: cannot write {path!r}: {exc}") from None
    if exists:
        raise PipelineError(
            f"{label}: {path!r} exists and mode='error' (an earlier run wrote it?); "
            "remove it, write elsewhere, or use mode='overwrite'"
        )
