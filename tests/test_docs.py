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
import functools
import importlib
import inspect
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
    "getting-started.md": 1,  # a job that waits until it is stopped
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
    printed: str | None = ""  # None: the block before was a Spark block, not run
    ran = 0
    for block in blocks(page):
        if block.marker == "output":
            if printed is None:
                continue
            assert printed.rstrip() == "\n".join(
                line.rstrip() for line in block.source.rstrip().splitlines()
            ), f"{page.name}:{block.line}: the output shown differs from what the block printed"
            continue
        if block.runs and block.spark and not with_spark:
            printed = None
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
        page.name: sum(1 for block in blocks(page) if block.info == "python" and not block.runs)
        for page in PAGES
    }
    assert {name: n for name, n in shown.items() if n} == NOT_RUN


# What a run returns, documented though not exported: a user gets them from `p.run()`.
RESULTS = {"DirectResult", "SparkStreamingResult"}


def documented_objects() -> dict[str, Any]:
    """Each object docs/api.md documents, by name."""
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    found: dict[str, Any] = {}
    for module, name in re.findall(r"^::: (sparkbeam\.[\w.]*)\.(\w+)$", api, re.MULTILINE):
        found[name] = getattr(importlib.import_module(module), name)
    return found


def test_api_page_names_every_public_name() -> None:
    documented = documented_objects()
    assert set(documented) == set(sb.__all__) | RESULTS
    assert all(documented[name] is getattr(sb, name) for name in sb.__all__)


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


INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK = re.compile(
    r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]"  # [text], [text [nested]], ![image]
    r"\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"  # (target "title")
)
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s.*)?$", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"\{[^}]*#(?P<id>[\w-]+)[^}]*\}")


def prose(page: Path) -> str:
    """The page without its fenced code blocks and inline code: what a reader follows."""
    lines = page.read_text(encoding="utf-8").splitlines()
    fenced = {
        index
        for block in blocks(page)
        for index in range(block.line - 1, block.line + block.source.count("\n") + 1)
    }
    kept = "\n".join("" if index in fenced else line for index, line in enumerate(lines))
    return INLINE_CODE.sub("", kept)


def slug(title: str) -> str:
    """The anchor the site gives a heading (Python-Markdown's toc: lower case, punctuation
    dropped, runs of spaces and hyphens one hyphen)."""
    text = EXPLICIT_ANCHOR.sub("", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """The heading anchors of `page` (a repeated heading's later ones get `_1`, `_2`...)."""
    found: set[str] = set()
    for line in prose(page).splitlines():
        heading = HEADING.match(line)
        if not heading:
            continue
        explicit = EXPLICIT_ANCHOR.search(heading["title"])
        anchor = explicit["id"] if explicit else slug(heading["title"])
        unique, n = anchor, 0
        while unique in found:
            n += 1
            unique = f"{anchor}_{n}"
        found.add(unique)
    return found


def links(page: Path) -> list[str]:
    text = prose(page)
    return [m["target"] for m in LINK.finditer(text)] + [
        m["target"] for m in REFERENCE.finditer(text)
    ]


def broken_link(page: Path, target: str) -> str | None:
    """Why `target`, a link of `page`, leads nowhere a reader of the repository can go, or None.

    A relative target must name a file inside the repository (never up out of it, as
    `../shared/...` would), and its `#anchor`, if any, a heading of that Markdown page.
    Links to `https://` pages are allowed as they are: they are references to Spark's,
    Beam's and other projects' own documentation, which no clone could hold, and are not
    fetched (the suite runs offline). Any other scheme (`http:`, `file:`, `mailto:`) and
    absolute paths are refused: nothing on a reader's machine answers them.
    """
    if target.startswith("https://"):
        return None
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("/"):
        return "not a relative path inside the repository, nor an https:// reference"
    path_part, _, anchor = target.partition("#")
    resolved = (page.parent / path_part).resolve() if path_part else page
    if not resolved.is_relative_to(ROOT):
        return "leaves the repository"
    if not resolved.exists():
        return "names no file of the repository"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"names no heading of {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_resolve_inside_the_repository(page: Path) -> None:
    found = links(page)
    broken = [
        f"{page.name}: ({target}) {why}" for target in found if (why := broken_link(page, target))
    ]
    assert not broken, "\n".join(broken)


def test_link_check_finds_broken_links(tmp_path: Path) -> None:
    inside = ROOT / "docs" / "concepts.md"
    assert broken_link(inside, "../../shared/SPEC.md") == "leaves the repository"
    assert broken_link(inside, "nowhere.md") == "names no file of the repository"
    assert broken_link(inside, "testing.md#no-such-heading") is not None
    assert broken_link(inside, "#invariant-w") is None
    assert broken_link(inside, "late-data.md") is None
    assert broken_link(inside, "file:///etc/passwd") is not None
    assert broken_link(inside, "https://spark.apache.org/docs/latest/") is None


# Words of the project's own that a reader meets on several pages: each page that uses one
# links to the Concepts section that explains it (a page may explain it in place instead,
# and then it is not in this list's sense jargon).
JARGON = {
    "concepts.md#invariant-w": re.compile(r"\binvariant W\b", re.IGNORECASE),
    "concepts.md#judge-columns-how-spark-drops-the-same-rows": re.compile(
        r"(?:\b(?:the|a|its|their|own)|'s|s')\s+\*?judges?\b|\bjudge columns?\b|\bjudges\.\w+"
    ),
}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_jargon_links_to_its_explanation(page: Path) -> None:
    if page.name == "concepts.md":
        return
    text, targets = prose(page), {target.removeprefix("docs/") for target in links(page)}
    missing = [
        section for section, term in JARGON.items() if term.search(text) and section not in targets
    ]
    assert not missing, f"{page.name} uses the terms of {missing} without linking there"


def constructed() -> list[str]:
    """The public classes a user makes with arguments: the transforms and the aggregates."""
    from sparkbeam.graph import PTransform
    from sparkbeam.transforms.combine import AggregateFn

    return sorted(
        name
        for name in sb.__all__
        if isinstance(getattr(sb, name), type)
        and issubclass(getattr(sb, name), PTransform | AggregateFn)
        and getattr(sb, name) is not PTransform
    )


ARGS_SECTION = re.compile(r"^Args:\n(?P<body>(?:(?: {4}.*)?\n)+)", re.MULTILINE)
ARGUMENT = re.compile(r"^ {4}\**(?P<name>\w+):", re.MULTILINE)


@functools.cache
def as_docs_tools_read_it() -> Any:
    """The package as the API page's tools read it (griffe, for mkdocstrings): from source."""
    import griffe

    return griffe.load("sparkbeam", search_paths=[str(ROOT)])


@pytest.mark.parametrize("name", constructed())
def test_api_page_shows_each_transforms_parameters(name: str) -> None:
    """The API page renders a class's constructor from the source: it names the parameters a
    user passes (not a `*values` that fills fields), and the docstring's `Args:` section
    describes each of them, in order."""
    cls = getattr(sb, name)
    by_python = list(inspect.signature(cls).parameters)
    path = f"{cls.__module__}.{cls.__qualname__}".removeprefix("sparkbeam.")
    rendered = as_docs_tools_read_it()[path].parameters
    assert [p.name for p in rendered if p.name != "self"] == by_python
    assert "values" not in by_python
    section = ARGS_SECTION.search((inspect.getdoc(cls) or "") + "\n")
    assert section, f"{name}'s docstring has no Args: section"
    described = [m["name"] for m in ARGUMENT.finditer(section["body"])]
    assert described == by_python, f"{name}: Args: describes {described}, takes {by_python}"


# Methods and attributes a user never calls: the pipeline's and the runners' own.
INTERNAL = {
    "watermark_rule",
    "drift_units",
    "delay_units",
    "bind",
    "infer",
    "default_label",
    "parameters",
    "window_keys",
    "interval_bounds",
    "output_type",
    "apply",
    "live_node_ids",
    "add_assertion",
    "info",
    "snapshot",
    "of_run",
}


def test_api_page_lists_only_what_users_call() -> None:
    """mkdocs.yml shows no member of a class unless docs/api.md lists it (`members: false`
    by default, so a new method of the pipeline's own never reaches the page); each member
    listed exists, is public and is none of the internal ones."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+members: false$", config, re.MULTILINE)
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    entries = re.split(r"^(?=::: )", api, flags=re.MULTILINE)[1:]
    listed: dict[str, list[str]] = {}
    for entry in entries:
        name = re.match(r"::: sparkbeam\.[\w.]*\.(\w+)", entry)
        assert name
        listed[name[1]] = re.findall(r"^\s+- (\w+)$", entry, re.MULTILINE)
    assert listed["PCollection"] and listed["PipelineResult"]
    objects = documented_objects()
    for name, members in listed.items():
        for member in members:
            assert hasattr(objects[name], member), f"{name}.{member} does not exist"
            assert not member.startswith("_") and member not in INTERNAL, f"{name}.{member}"


CODE_WIDTH = 88


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_code_fits_the_page(page: Path) -> None:
    """Python and shell blocks keep within 88 characters a line: about what the site's
    content column shows at 1280 px without wrapping (docs/stylesheets/extra.css wraps the
    rest; printed output may be longer, it is what the program prints)."""
    long = [
        f"{page.name}:{block.line + 1 + number}: {len(line)} characters"
        for block in blocks(page)
        if block.info in {"python", "sh"}
        for number, line in enumerate(block.source.splitlines())
        if len(line) > CODE_WIDTH
    ]
    assert not long, "\n".join(long)


def test_wheel_named_in_the_docs_is_the_one_pip_builds() -> None:
    """The install lines name the wheel `pip wheel .` writes (tests/test_wheel.py builds
    and installs it): the version is pyproject.toml's."""
    version = re.search(
        r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE
    )
    assert version
    named = {
        found
        for page in PAGES
        for found in re.findall(r"sparkbeam-([\w.]+)-py3-none-any\.whl", page.read_text())
    }
    assert named == {version[1]}
