"""Every family of translators, imported so that each registers its entries: the registries
(`context.TRANSLATORS`, `context.STREAMING_TRANSLATORS`, `context.STATE_STORE_NEEDS`,
`context.COUNTS_FROM_INPUT`) are whole once this module is imported: a `Translation` is run
from here."""

from __future__ import annotations

from sparkbeam.runners.spark.translate import (
    combine,
    elementwise,
    merges,
    session,
    sort,
    sources,
    watermark,
    windows,
)
from sparkbeam.runners.spark.translate.context import (
    COUNTS_FROM_INPUT,
    STATE_STORE_NEEDS,
    STREAMING_TRANSLATORS,
    TRANSLATORS,
    Translation,
)

FAMILIES = (sources, elementwise, watermark, windows, combine, sort, session, merges)
"""The families, each one module with its batch and streaming translators side by side."""

__all__ = [
    "COUNTS_FROM_INPUT",
    "FAMILIES",
    "STATE_STORE_NEEDS",
    "STREAMING_TRANSLATORS",
    "TRANSLATORS",
    "Translation",
]
