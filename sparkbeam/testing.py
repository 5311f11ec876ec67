"""Beam-style assertions inside a pipeline: `sb.assert_that(pc, sb.equal_to(rows))`."""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sparkbeam.graph import input_node
from sparkbeam.pipeline import PCollection
from sparkbeam.schema import Row
from sparkbeam.time import from_micros, to_micros

Matcher = Callable[[list[Row]], None]


def _canonical(value: Any) -> Any:
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return from_micros(to_micros(value))
    return value


def _row_key(row: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(_canonical(value))) for name, value in row.items()))


def equal_to(expected: Iterable[Mapping[str, Any]]) -> Matcher:
    """A matcher: the rows equal `expected` as a multiset (aware datetimes compare as UTC)."""
    wanted = list(expected)

    def match(actual: list[Row]) -> None:
        missing = Counter(map(_row_key, wanted))
        missing.subtract(Counter(map(_row_key, actual)))
        if any(missing.values()):
            lacking = [dict(k) for k, n in missing.items() if n > 0]
            extra = [dict(k) for k, n in missing.items() if n < 0]
            raise AssertionError(
                f"rows differ: expected {len(wanted)}, got {len(actual)}; "
                f"missing {lacking}; unexpected {extra}"
            )

    return match


def assert_that(pcoll: PCollection, matcher: Matcher, label: str = "assert_that") -> None:
    """Check `pcoll`'s rows with `matcher` once the pipeline has run (raises `AssertionError`)."""
    input_node(pcoll, label)
    pcoll.pipeline.add_assertion(pcoll, matcher, label)
