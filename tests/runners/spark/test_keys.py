"""Metric and channel keys: each spelled as the persisted names always were, and read back."""

import pytest

from sparkbeam.runners.spark.plan.keys import ChannelKey, MetricKey, Observation


@pytest.mark.parametrize(
    ("observation", "name"),
    [
        (Observation("n", 7), "n_7"),
        (Observation("in", 12), "in_12"),
        (Observation("in", 12, 0), "in_12_0"),
        (Observation("out", 123, 1), "out_123_1"),
        (Observation("out", 1, 23), "out_1_23"),
    ],
)
def test_observation_round_trip(observation: Observation, name: str) -> None:
    assert observation.name() == name
    assert Observation.parse(name) == observation


def test_metric_keys_spelled_as_persisted() -> None:
    assert Observation("n", 3).rows() == "n_3.rows"
    assert Observation("n", 3).latest(0) == "n_3.latest_0"
    assert Observation("in", 3).latest() == "in_3.latest"
    assert Observation("out", 3, 1).rows() == "out_3_1.rows"


@pytest.mark.parametrize("key", ["n_3.rows", "n_31.latest_10", "in_4.latest", "in_4_1.invalid"])
def test_metric_key_round_trip(key: str) -> None:
    parsed = MetricKey.parse(key)
    assert parsed is not None
    assert parsed.name() == key


def test_look_alike_ids_and_ports_stay_apart() -> None:
    assert Observation.parse("n_12") == Observation("n", 12)
    assert Observation.parse("n_1_2") == Observation("n", 1, 2)
    twelve = MetricKey.parse("out_12.rows")
    one_port_two = MetricKey.parse("out_1_2.rows")
    assert twelve is not None and one_port_two is not None
    assert twelve.observation.node_id == 12 and twelve.observation.port is None
    assert one_port_two.observation.node_id == 1 and one_port_two.observation.port == 2


def test_largest_values_are_told_from_counts() -> None:
    latest = MetricKey.parse("n_2.latest_1")
    rows = MetricKey.parse("n_2.rows")
    assert latest is not None and latest.is_latest
    assert rows is not None and not rows.is_latest


@pytest.mark.parametrize(
    "name", ["nn_3", "n_", "n_x", "x_3", "n_3.", "rows", "source-3", "n-3", "", "n_3_", "n_3"]
)
def test_foreign_metric_names_parse_to_none(name: str) -> None:
    assert MetricKey.parse(name) is None
    if name != "n_3":
        assert Observation.parse(name) is None


@pytest.mark.parametrize(
    ("key", "name"),
    [
        (ChannelKey("source", 3), "source-3"),
        (ChannelKey("sentinel", 45), "sentinel-45"),
        (ChannelKey("staged", 100), "staged-100"),
    ],
)
def test_channel_round_trip(key: ChannelKey, name: str) -> None:
    assert key.name() == name
    assert ChannelKey.parse(name) == key


@pytest.mark.parametrize(
    "name", ["source-", "sources-3", "source_3", "stage-3", "n_3", "source-3a"]
)
def test_foreign_channel_names_parse_to_none(name: str) -> None:
    assert ChannelKey.parse(name) is None
