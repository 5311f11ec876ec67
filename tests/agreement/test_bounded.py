"""Both runners give the same rows for the same bounded pipeline (SPEC section 5)."""

from __future__ import annotations

from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import BUILDERS, SORTED, order_within_keys, row_multiset


def run(builder: Any, runner: Any) -> dict[str, list[dict[str, Any]]]:
    p = sb.Pipeline(runner=runner)
    outputs = builder(p)
    result = p.run()
    return {name: result.collect(pcoll) for name, pcoll in outputs.items()}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_runners_agree(name: str, spark_runner: Any) -> None:
    assert_runners_agree(name, spark_runner)


def assert_runners_agree(name: str, spark_runner: Any) -> None:
    """The Spark runner on `spark_runner`'s session gives the direct runner's rows for the
    shared bounded pipeline `name` (in order within keys, where it sorts)."""
    direct = run(BUILDERS[name], sb.DirectRunner())
    spark = run(BUILDERS[name], spark_runner)
    assert direct.keys() == spark.keys()
    for output in direct:
        assert row_multiset(spark[output]) == row_multiset(direct[output]), output
        order = SORTED.get((name, output))
        if order is not None:
            column, keys = order
            expected = order_within_keys(direct[output], column, keys)
            assert order_within_keys(spark[output], column, keys) == expected
            for values in expected.values():
                assert values == sorted(values)


def test_outputs_are_not_trivial() -> None:
    """The shared pipelines exercise something: every output but the empty ones has rows."""
    outputs = run(
        lambda p: {f"{n}.{k}": v for n, b in BUILDERS.items() for k, v in b(p).items()},
        sb.DirectRunner(),
    )
    empty = {name for name, rows in outputs.items() if not rows}
    assert empty == {"mean_of_nothing.empty", "mean_of_nothing.empty_global"}
