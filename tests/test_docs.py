"""The docs cannot drift from the code: every ```python block of README.md and docs/*.md runs.

A page's blocks run in order in one namespace (a page may build an example up block by
block), with a fresh temporary directory as the working directory, so nothing is left
behind. Markers, on the last non-blank line before a fence:

- `<!-- spark -->` before a ```python block: it needs Spark (`runner="spark"` finds the
  test session). Such a page runs without its Spark blocks in `test_page_runs` and whole,
  on Spark, in the Spark-marked `test_page_runs_on_spark`. Keep them few: each costs seconds.
- `<!-- output -->` before a ```text block: what the python block just before it prints,
  compared (trailing spaces aside).
- `<!-- not run: why -->` before a ```python block: shown, never run (a Kafka broker, a
  cluster); each one is listed in `NOT_RUN`, so they stay few and deliberate.

Shell commands and program output use other fences (```sh, ```text) and do not run.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import sparkbeam as sb

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<marker>spark|output|not run:[^>]*?)\s*-->\s*$")

NOT_RUN = {
    # page: how many ```python blocks it shows without running them
    "deploying.md": 2,  # a Kafka source; a Spark Connect server
    "early-results.md": 1,  # a MERGE into a Delta table
}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    info: str
    marker: str | None
    source: str

    @property
    def runs(self) -> bool:
        return self.info == "python" and not (self.marker or "").startswith("not run")

    @property
    def spark(self) -> bool:
        return self.marker == "spark"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page`, in order, each with the marker just before it."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    marker: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        opening = FENCE.match(line)
        if opening:
            indent, fence = opening["indent"], opening["fence"]
            body: list[str] = []
            index += 1
            while index < len(lines) and lines[index].strip() != fence:
                body.append(lines[index].removeprefix(indent))
                index += 1
            source = "\n".join(body) + "\n"
            info = opening["info"].strip()
            found.append(Block(page.name, index - len(body), info, marker, source))
            marker = None
        elif matched := MARKER.match(line):
            marker = matched["marker"]
        elif line.strip():
            marker = None
        index += 1
    return found


def run_page(page: Path, *, with_spark: bool) -> int:
    """Run the page's python blocks in order in one namespace; check marked outputs. Returns
    how many blocks ran."""
    namespace: dict[str, Any] = {"__name__": f"docs.{page.stem}"}
    printed = ""
    ran = 0
    for block in blocks(page):
        if block.marker == "output":
            assert printed.rstrip() == "\n".join(
                line.rstrip() for line in block.source.rstrip().splitlines()
            ), f"{page.name}:{block.line}: the output shown differs from what the block printed"
            continue
        if not block.runs or (block.spark and not with_spark):
            continue
        out = io.StringIO()
        code = compile(block.source, f"{page.name}:{block.line}", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        ran += 1
        printed = "\n".join(line.rstrip() for line in out.getvalue().splitlines())
    return ran


def spark_pages() -> list[Path]:
    return [page for page in PAGES if any(block.spark for block in blocks(page))]


def pages_with_code() -> list[Path]:
    """The pages with a python block that runs without Spark: a page with none has nothing
    for `test_page_runs` to check (its Spark blocks run in `test_page_runs_on_spark`)."""
    return [page for page in PAGES if any(b.runs and not b.spark for b in blocks(page))]


@pytest.mark.parametrize("page", pages_with_code(), ids=lambda page: page.name)
def test_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_page(page, with_spark=False) > 0


@pytest.mark.spark
@pytest.mark.parametrize("page", spark_pages(), ids=lambda page: page.name)
def test_page_runs_on_spark(
    page: Path, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spark_blocks = sum(block.spark for block in blocks(page))
    assert run_page(page, with_spark=True) >= spark_blocks > 0


def test_blocks_not_run_are_the_listed_ones() -> None:
    shown = {
        page.name: sum(
            1 for block in blocks(page) if block.info == "python" and not block.runs
        )
        for page in PAGES
    }
    assert {name: n for name, n in shown.items() if n} == NOT_RUN


def test_api_page_names_every_public_name() -> None:
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: sparkbeam\.[\w.]*\.(\w+)$", api, re.MULTILINE))
    assert documented == set(sb.__all__)


# What a reader cannot follow: the project's own contract, its issue tracker and the design
# papers' numbering live outside the repository.
OUTSIDE = re.compile(r"\.\./shared|\bSPEC\b|SPEC\.md|\bissues? \d+|\bsession \d+|\bRFC\b|Term 1\.2")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_page_stands_on_its_own(page: Path) -> None:
    found = [
        f"{page.name}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text().splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert not found, "\n".join(found)
