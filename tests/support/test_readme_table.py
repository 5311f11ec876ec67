"""README.md's "Where each runs" table is the one the matrix and the catalogues generate."""

from __future__ import annotations

from tests.support.table import COMMAND, README, with_table


def test_readme_table_is_generated() -> None:
    readme = README.read_text(encoding="utf-8")
    assert readme == with_table(readme), (
        f"README.md's support table differs from the support matrix and the refusal "
        f"catalogues: run `{COMMAND}` and commit README.md"
    )
