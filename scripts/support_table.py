"""Writes README.md's "Where each runs" table from the support matrix (tests/support/matrix.py)
and the runners' refusal catalogues (sparkbeam/runners/*/limits.py).

Usage: python scripts/support_table.py [--check]   (--check: exit 1 if README.md is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.table import README, with_table


def main(argv: list[str]) -> int:
    readme = README.read_text(encoding="utf-8")
    generated = with_table(readme)
    if generated == readme:
        return 0
    if "--check" in argv:
        print("README.md's support table is stale: run python scripts/support_table.py")
        return 1
    README.write_text(generated, encoding="utf-8")
    print("README.md: support table written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
