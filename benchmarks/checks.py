"""The Spark benchmarks' check of their results: each group's sum against the reference's.

A job's result is a dict from its group (the key, and the window start where
there is one) to its sum. Sums of doubles added in another order differ in
their last bits, so two sums agree within a relative 1e-9 (and 1e-6 absolute,
for sums near zero); integer sums agree exactly. A mismatch stops the
benchmark (`SystemExit`), naming the job, the reference and the first groups
that differ: a figure for a job that computed something else is no figure.
The check runs after the timed runs, never inside them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

Sums = Mapping[Hashable, float]


def differences(got: Sums, want: Sums) -> list[str]:
    """The groups where `got` and `want` differ: missing, extra, or another sum."""
    found = []
    for group in sorted(set(got) | set(want), key=repr):
        if group not in got:
            found.append(f"{group!r}: missing (want {want[group]!r})")
        elif group not in want:
            found.append(f"{group!r}: not in the reference (got {got[group]!r})")
        elif not math.isclose(got[group], want[group], rel_tol=1e-9, abs_tol=1e-6):
            found.append(f"{group!r}: got {got[group]!r}, want {want[group]!r}")
    return found


def check_sums(job: str, got: Sums, reference: str, want: Sums) -> str:
    """Stop the benchmark unless `got` has `want`'s groups and sums; else say what was checked."""
    if not want:
        raise SystemExit(f"{job}: the reference ({reference}) has no groups: nothing is checked")
    wrong = differences(got, want)
    if wrong:
        shown = "\n  ".join(wrong[:10])
        raise SystemExit(
            f"{job} computed other sums than {reference}: {len(wrong)} of "
            f"{len(set(got) | set(want))} groups differ, for instance\n  {shown}"
        )
    return f"{job}: {len(want):,} groups, the sums of {reference}"
