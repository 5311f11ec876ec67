"""What a translator reads of the translation it is part of, read-only: a translator returns
what it made (`context.Made`) and the loop records it; one that writes into the translation
(an attribute, an item of a mapping, a member of a set) fails at once with
`TranslationWrite`, a bug of sparkbeam's, never taken for the pipeline's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NoReturn, TypeVar

Key = TypeVar("Key")
Value = TypeVar("Value")


class TranslationWrite(AssertionError):
    """A translator wrote into the translation it reads instead of returning what it made
    (an `AssertionError`: it goes through the run's error conversion as it is)."""


def refuse_write(held: str, what: str) -> NoReturn:
    raise TranslationWrite(
        f"a translator wrote into the translation ({what} of {held!r}): a translator reads "
        "the translation and returns what it made (Made), which the loop records"
    )


class ReadOnlyMapping(Mapping[Key, Value]):
    """A read-only view of a mapping the loop writes (`name`: which, for the error)."""

    __slots__ = ("_held", "_name")

    def __init__(self, name: str, held: Mapping[Key, Value]) -> None:
        self._name = name
        self._held = held

    def __getitem__(self, key: Key) -> Value:
        return self._held[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __repr__(self) -> str:
        return f"ReadOnlyMapping({self._name}, {dict(self._held)!r})"

    def __setitem__(self, key: Key, value: Value) -> NoReturn:
        refuse_write(self._name, f"item {key!r}")

    def __delitem__(self, key: Key) -> NoReturn:
        refuse_write(self._name, f"item {key!r}")

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_write(self._name, "a call changing it")

    update = pop = popitem = setdefault = clear = _refuse


class ReadOnlySet(frozenset[Key]):
    """A frozen set whose would-be writes (`add`, ...) fail with `TranslationWrite`."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_write("a set", "a call changing it")

    add = discard = remove = update = pop = clear = _refuse


class Sealed:
    """An object whose attributes are set while it is built and no more once `seal` is
    called: setting or deleting one then fails with `TranslationWrite`."""

    _sealed = False

    def seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: object) -> None:
        if self._sealed:
            refuse_write(type(self).__name__, f"attribute {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._sealed:
            refuse_write(type(self).__name__, f"attribute {name!r}")
        object.__delattr__(self, name)
