"""Which epoch of its input each source reads in each pipeline epoch (parallel units).

Without `max_drift` source `s` reads its epoch `i` in pipeline epoch `i`,
and the input ends after the longest source's last epoch. With `max_drift`
(`runners.shared.alignment`) the plan of pipeline epoch `i + 1` is decided
once every filter has ended epoch `i` (their units agreed: the watermarks
are those of parallelism 1): a held source reads nothing in it, and the
input ends after the epoch in which the last source read its last epoch, as
in `executor.Executor._run_aligned`. Until then a source's units wait.

A checkpoint at barrier `i` keeps each source's offset (the next epoch of
its own to read); a restore continues from those and decides again from the
restored filters, which reach the same decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Hold = Callable[[set[int]], set[int]]
"""The sources to hold back in the next epoch, of the running ones (`Alignment.held`)."""


def hold_none(running: set[int]) -> set[int]:
    return set()


class Reading:
    """The plan of the pipeline's epochs: per epoch, the epoch each source node reads."""

    def __init__(self, counts: Mapping[int, int], aligned: bool) -> None:
        self.counts = dict(counts)
        """Each source node's number of epochs."""
        self.aligned = aligned
        self.plans: list[dict[int, int]] = []
        """Per pipeline epoch decided so far: source node -> the epoch of its own it reads."""
        self.held: list[set[int]] = []
        """Per pipeline epoch decided so far: the sources held back in it."""
        self.next = dict.fromkeys(self.counts, 0)
        """Each source's offset after the last epoch decided."""
        self.end: int | None = None
        """The number of pipeline epochs, once known: the input ends after them."""
        self._decide(hold_none, 0)
        if not aligned:
            while self.end is None:
                self._decide(hold_none, len(self.plans))

    def known(self, epoch: int) -> bool:
        """Whether it is decided what the sources do in pipeline epoch `epoch`."""
        return epoch < len(self.plans) or self.end is not None

    def ends_at(self, epoch: int) -> bool:
        return self.end is not None and epoch >= self.end

    def reads(self, source: int, epoch: int) -> int | None:
        """The epoch of its own `source` reads in pipeline epoch `epoch` (None: nothing)."""
        return self.plans[epoch].get(source)

    def decide_after(self, epoch: int, hold: Hold) -> None:
        """Every filter has ended pipeline epoch `epoch`: plan the next one (aligned runs)."""
        if self.aligned and len(self.plans) == epoch + 1 and self.end is None:
            self._decide(hold, epoch + 1)

    def offsets(self, epoch: int) -> dict[int, int]:
        """Each source's offset after pipeline epoch `epoch` (what a checkpoint there keeps)."""
        done = dict.fromkeys(self.counts, 0)
        for plan in self.plans[: epoch + 1]:
            for source in plan:
                done[source] += 1
        return done

    def restore(self, epoch: int, offsets: Mapping[int, int] | None, hold: Hold) -> None:
        """Continue after checkpoint `epoch` (-1 and None: from the start)."""
        if not self.aligned:
            return
        self.plans, self.held = self.plans[: epoch + 1], self.held[: epoch + 1]
        self.next = dict(offsets) if offsets is not None else dict.fromkeys(self.counts, 0)
        self.end = None
        self._decide(hold if epoch >= 0 else hold_none, epoch + 1)

    def _decide(self, hold: Hold, epoch: int) -> None:
        running = {source for source, count in self.counts.items() if self.next[source] < count}
        if not running:
            self.end = epoch
            return
        held = hold(running)
        plan = {}
        for source in sorted(running - held):
            plan[source] = self.next[source]
            self.next[source] += 1
        self.plans.append(plan)
        self.held.append(held)
