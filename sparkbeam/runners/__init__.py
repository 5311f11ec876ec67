"""Runners: `direct` (in-process, checks the model's invariants) and `spark`."""
