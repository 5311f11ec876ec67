"""The translators' shape, without Spark: each family module of `translate/` registers its
transforms' batch and streaming entries side by side, and no translator writes into the
translation it reads (it returns what it made): read from their code, and at run time, where
the translation a translator reads refuses any write (`views.TranslationWrite`)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import sparkbeam as sb
from sparkbeam.graph import Node
from sparkbeam.runners.spark.plan.streaming_query import query_plan
from sparkbeam.runners.spark.translate import families
from sparkbeam.runners.spark.translate.context import Made, StreamingContext, Translation
from sparkbeam.runners.spark.translate.families import STREAMING_TRANSLATORS, TRANSLATORS
from sparkbeam.runners.spark.translate.views import TranslationWrite
from sparkbeam.runners.spark.translate.watermark import restamp
from sparkbeam.transforms.elementwise import Map
from sparkbeam.transforms.sources import Create

TRANSLATE = Path(families.__file__).parent

MUTATING = {"append", "add", "update", "extend", "setdefault", "pop", "clear", "remove"}


def _writes(function: ast.FunctionDef) -> Iterator[str]:
    """Where `function` writes into its first parameter (the translation): an assignment
    to one of its attributes or items, or a mutating call on one of them."""
    context = function.args.args[0].arg

    def rooted(node: ast.expr) -> bool:
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        return isinstance(node, ast.Name) and node.id == context

    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute | ast.Subscript) and rooted(target):
                yield f"line {node.lineno}: {ast.unparse(target)} = ..."
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            held = node.func.value  # `translation.writes` in `translation.writes.append(...)`
            if node.func.attr in MUTATING and not isinstance(held, ast.Name) and rooted(held):
                yield f"line {node.lineno}: {ast.unparse(node)}"


def _registered() -> list[Callable[..., object]]:
    entries = list(TRANSLATORS.values()) + list(STREAMING_TRANSLATORS.values()) + [restamp]
    return list({id(entry): entry for entry in entries}.values())


@pytest.mark.parametrize("entry", _registered(), ids=lambda entry: entry.__qualname__)
def test_a_translator_writes_nothing_into_the_translation(entry: Callable[..., object]) -> None:
    function = next(
        node
        for node in ast.walk(ast.parse(inspect.getsource(entry)))
        if isinstance(node, ast.FunctionDef)
    )
    assert list(_writes(function)) == [], f"{entry.__qualname__} writes into its translation"


@pytest.mark.parametrize("entry", _registered(), ids=lambda entry: entry.__qualname__)
def test_a_translator_returns_what_it_made(entry: Callable[..., object]) -> None:
    """Every translator is declared to return a `Made` (the loop refuses anything else:
    `test_a_translator_returning_a_bare_frame_fails_clearly`)."""
    assert inspect.signature(entry).return_annotation in ("Made", Made), entry.__qualname__


def test_the_write_check_finds_a_write() -> None:
    code = (
        "def sink(translation, node, inputs):\n"
        "    translation.writes.append((node, inputs[0]))\n"
        "    translation.invalid[node.id] = inputs[0]\n"
        "    return inputs[0]\n"
    )
    function = ast.parse(code).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert len(list(_writes(function))) == 2


def test_each_kind_s_entries_are_in_one_family_module() -> None:
    """A kind translated on both bounded and unbounded input has both entries in the same
    module of `translate/`, one per family."""
    for kind in set(TRANSLATORS) & set(STREAMING_TRANSLATORS):
        batch, stream = TRANSLATORS[kind], STREAMING_TRANSLATORS[kind]
        assert batch.__module__ == stream.__module__, kind.__name__
        module = Path(inspect.getfile(batch))
        assert module.parent == TRANSLATE, kind.__name__
    modules = {entry.__module__.rsplit(".", 1)[1] for entry in _registered()}
    assert {family.__name__.rsplit(".", 1)[1] for family in families.FAMILIES} == modules


SCHEMA = {"k": str, "t": int}


def _pipeline() -> sb.Pipeline:
    p = sb.Pipeline()
    source = sb.TestStream(SCHEMA)
    source.add_epoch([{"k": "a", "t": 1}])
    (p | source).with_watermark("t", 0).map(lambda row: row, keeps=["t"])
    return p


WRITES: dict[str, Callable[[StreamingContext], object]] = {
    "an attribute": lambda run: setattr(run, "spark", None),
    "a planned fact": lambda run: setattr(run, "live", True),
    "a recorded frame": lambda run: run.frames.__setitem__(0, None),
    "a judge": lambda run: run.judges.__setitem__(0, {}),
    "a staged origin": lambda run: run.staged.add(0),  # type: ignore[attr-defined]
    "an epoch mark": lambda run: run.epoch_marks.pop(1),  # type: ignore[attr-defined]
    "an origin": lambda run: run.origins.update({0: frozenset()}),  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("write", WRITES.values(), ids=list(WRITES))
def test_the_streaming_context_refuses_a_write(write: Callable[[StreamingContext], object]) -> None:
    p = _pipeline()
    run = StreamingContext(None, p.nodes, query_plan(p.nodes))  # type: ignore[arg-type]
    run.seal()  # as the loop does before it calls the first translator
    with pytest.raises(TranslationWrite, match="returns what it made"):
        write(run)


def test_a_translator_writing_into_the_batch_translation_fails_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The write fails inside the loop as it is, not converted into an error of the
    pipeline's by the translation's error handling (`translating`)."""

    def source(translation: Translation, node: Node, inputs: object) -> Made:
        return Made("rows")  # type: ignore[arg-type]

    def writing(translation: Translation, node: Node, inputs: object) -> Made:
        translation.invalid[node.id] = "rows"  # type: ignore[index]
        return Made("rows")  # type: ignore[arg-type]

    monkeypatch.setitem(TRANSLATORS, Create, source)
    monkeypatch.setitem(TRANSLATORS, Map, writing)
    p = sb.Pipeline()
    (p | sb.Create([{"k": "a", "t": 1}], SCHEMA)).map(lambda row: row)
    translation = Translation(None, p.nodes)  # type: ignore[arg-type]
    with pytest.raises(TranslationWrite, match="item 1 of 'invalid'"):
        translation.run()
    assert dict(translation.frames) == {0: "rows"}  # the loop recorded the source's


def test_a_translator_returning_a_bare_frame_fails_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def bare(translation: Translation, node: Node, inputs: object) -> str:
        return "rows"

    monkeypatch.setitem(TRANSLATORS, Create, bare)
    p = sb.Pipeline()
    p | "rows" >> sb.Create([{"k": "a", "t": 1}], SCHEMA)
    translation = Translation(None, p.nodes)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="translator of rows returned a str, not a Made"):
        translation.run()
    assert dict(translation.made) == {}
