"""The direct runner: in-process, message by message, with invariant checks."""

from sparkbeam.runners.direct.runner import DirectResult, DirectRunner

__all__ = ["DirectResult", "DirectRunner"]
