"""docs/support.md's "Where each runs" table is the one the matrix and the catalogues generate."""

from __future__ import annotations

from tests.support.table import COMMAND, PAGE, with_table


def test_support_table_is_generated() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == with_table(page), (
        f"docs/support.md's support table differs from the support matrix and the refusal "
        f"catalogues: run `{COMMAND}` and commit docs/support.md"
    )
