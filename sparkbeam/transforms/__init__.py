"""The transforms, one module per family."""
