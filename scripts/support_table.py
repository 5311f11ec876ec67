"""Writes the "Where each runs" table of docs/support.md from the support matrix
(tests/support/matrix.py) and the runners' refusal catalogues (sparkbeam/runners/*/limits.py).

Usage: python scripts/support_table.py [--check]   (--check: exit 1 if docs/support.md is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.table import PAGE, with_table


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    generated = with_table(page)
    if generated == page:
        return 0
    if "--check" in argv:
        print("docs/support.md's support table is stale: run python scripts/support_table.py")
        return 1
    PAGE.write_text(generated, encoding="utf-8")
    print("docs/support.md: support table written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
