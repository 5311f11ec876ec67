"""The names the Spark runner's parts exchange: observed metrics and epoch-feed channels,
each made by one method and read back by one parser (None for a name of another kind).

Persisted, so spelled exactly as they always were: the observation names (`n_<id>`,
`in_<id>`, `in_<id>_<port>`, `out_<id>`, `out_<id>_<port>`) and their fields, which a live
query's checkpoint holds and a restart from it reads back, and the channel names
(`source-<id>`, `sentinel-<id>`, `staged-<id>`), the folders of a query's epoch feed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sparkbeam.graph import Node
from sparkbeam.transforms.watermark import WithWatermark

LATEST = "latest"
"""Observed fields named so hold the largest value over micro-batches, not the sum."""

ROWS = "rows"
"""The observed field counting an observation's rows."""

INVALID_ROWS = "invalid"
"""The observed field counting the rows a `WithWatermark` found no event time in."""

ObservationKind = Literal["n", "in", "out"]
"""`n`: a node's output; `in`: rows into a late-row filter (or a `WithWatermark`'s input);
`out`: rows out of a late-row filter."""

_OBSERVATION = re.compile(r"(n|in|out)_(\d+)(?:_(\d+))?")


@dataclass(frozen=True)
class Observation:
    """One `DataFrame.observe` of a query: what it counts (`kind`), of which node and, on a
    node's inputs, of which `port`."""

    kind: ObservationKind
    node_id: int
    port: int | None = None

    def name(self) -> str:
        """`<kind>_<id>` or `<kind>_<id>_<port>`."""
        port = "" if self.port is None else f"_{self.port}"
        return f"{self.kind}_{self.node_id}{port}"

    def field(self, field: str) -> str:
        """The metric key of one of its fields: `<name>.<field>`."""
        return f"{self.name()}.{field}"

    def rows(self) -> str:
        """The metric key of its row count."""
        return self.field(ROWS)

    def latest(self, index: int | None = None) -> str:
        """The metric key of the largest value of watermarked column `index` (in sorted
        column order), or of the event time where `index` is None."""
        return self.field(latest_field(index))

    @classmethod
    def parse(cls, name: str) -> Observation | None:
        """The observation named `name`, None for any other name."""
        match = _OBSERVATION.fullmatch(name)
        if match is None:
            return None
        kind, node_id, port = match.groups()
        assert kind in ("n", "in", "out")
        return cls(kind, int(node_id), None if port is None else int(port))  # type: ignore[arg-type]


def latest_field(index: int | None = None) -> str:
    """The observed field of column `index`'s largest value (`latest_<i>`), `latest` for None."""
    return LATEST if index is None else f"{LATEST}_{index}"


@dataclass(frozen=True)
class MetricKey:
    """One observed metric by key, `<observation>.<field>`."""

    observation: Observation
    field: str

    def name(self) -> str:
        return self.observation.field(self.field)

    @property
    def is_latest(self) -> bool:
        """Whether it holds a largest value (kept as the largest, not summed)."""
        return self.field.startswith(LATEST)

    @classmethod
    def parse(cls, key: str) -> MetricKey | None:
        """The metric key `key`, None for any other name."""
        name, dot, field = key.partition(".")
        observation = Observation.parse(name)
        if observation is None or not dot or not field:
            return None
        return cls(observation, field)


ChannelKind = Literal["source", "sentinel", "staged"]
"""`source`: a replayed source's epochs; `sentinel`: a `WithWatermark`'s end of input;
`staged`: a staged origin's rows fed to the query reading it."""

_CHANNEL = re.compile(r"(source|sentinel|staged)-(\d+)")


@dataclass(frozen=True)
class ChannelKey:
    """One channel of a query's epoch feed: its kind and the node it feeds."""

    kind: ChannelKind
    node_id: int

    def name(self) -> str:
        """`<kind>-<id>`."""
        return f"{self.kind}-{self.node_id}"

    @classmethod
    def parse(cls, name: str) -> ChannelKey | None:
        """The channel named `name`, None for any other name."""
        match = _CHANNEL.fullmatch(name)
        if match is None:
            return None
        kind, node_id = match.groups()
        return cls(kind, int(node_id))  # type: ignore[arg-type]


def model_watermark(node: Node, metrics: Mapping[str, Any]) -> int | None:
    """The model's watermark of a `WithWatermark` node (in its column's units) from the largest
    event time its query counted on its input (`in_<id>.latest`), or None before any."""
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    latest = metrics.get(Observation("in", node.id).latest())
    return None if latest is None else transform.watermark_function(node.info.schema)(latest)
