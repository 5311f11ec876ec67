"""The transforms of SPEC section 4, one module per family."""
