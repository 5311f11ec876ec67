"""Event time as integers (`sparkbeam.time`, SPEC section 3): examples and properties.

Window functions are checked against a brute-force reference that enumerates
every aligned window start `offset + k * slide` near `t` and keeps those with
`start <= t < start + size`.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkbeam.time import (
    describe_duration,
    duration_micros,
    earliest_hop_start,
    from_micros,
    hop_starts,
    parse_interval,
    to_micros,
    tumble_start,
)

EPOCH = dt.datetime(1970, 1, 1)
US = dt.timedelta(microseconds=1)
UNIT_MICROS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
}


# parse_interval: examples


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("5 minutes", 5 * 60_000_000),
        ("1 minute", 60_000_000),
        ("1 hour", 3_600_000_000),
        ("2 hours", 7_200_000_000),
        ("30 seconds", 30_000_000),
        ("1 second", 1_000_000),
        ("500 milliseconds", 500_000),
        ("1 millisecond", 1_000),
        ("7 microseconds", 7),
        ("1 day", 86_400_000_000),
        ("0 seconds", 0),
        ("1 hour 30 minutes", 5_400_000_000),
        ("1 minute 1 second 1 millisecond 1 microsecond", 61_001_001),
        ("  10 seconds  ", 10_000_000),
        ("5 MINUTES", 300_000_000),
        ("1.5 seconds", 1_500_000),
    ],
)
def test_parse_interval_examples(text: str, micros: int) -> None:
    assert parse_interval(text) == micros


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "5",
        "minutes",
        "five minutes",
        "5 fortnights",
        "5 minutes and",
        "5 minutes,",
        "1 hour 30",
        "0.5 microseconds",
        "1.0001 milliseconds",
        "minutes 5",
    ],
)
def test_parse_interval_refuses_bad_text_naming_it(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_interval(text)
    assert repr(text) in str(info.value)


def test_duration_micros_takes_timedelta_and_strings_only() -> None:
    assert duration_micros(dt.timedelta(minutes=5)) == parse_interval("5 minutes")
    assert duration_micros(dt.timedelta(microseconds=-3)) == -3
    assert duration_micros("500 milliseconds") == 500_000
    for bad in (5, 1.5, None, ["5 minutes"]):
        with pytest.raises(ValueError) as info:
            duration_micros(bad)
        assert repr(bad) in str(info.value)


# parse_interval: properties

units = st.sampled_from(sorted(UNIT_MICROS))
parts = st.lists(st.tuples(st.integers(0, 10_000), units, st.booleans()), min_size=1, max_size=5)


@given(parts, st.sampled_from([" ", "  ", "\t"]))
def test_parse_interval_sums_its_parts(pieces: list[tuple[int, str, bool]], separator: str) -> None:
    text = separator.join(
        f"{number} {unit}{'s' if plural else ''}" for number, unit, plural in pieces
    )
    expected = sum(number * UNIT_MICROS[unit] for number, unit, _ in pieces)
    assert parse_interval(text) == expected


@given(st.integers(0, 10**6), units)
def test_parse_interval_matches_timedelta(number: int, unit: str) -> None:
    delta = dt.timedelta(**{f"{unit}s" if unit != "day" else "days": number})
    assert parse_interval(f"{number} {unit}s") == delta // US == duration_micros(delta)


@given(st.text(max_size=30))
def test_parse_interval_gives_int_or_value_error_naming_text(text: str) -> None:
    try:
        value = parse_interval(text)
    except ValueError as exc:
        assert repr(text) in str(exc)
    else:
        assert isinstance(value, int)


# to_micros / from_micros

fixed_zones = st.builds(
    dt.timezone,
    st.timedeltas(
        min_value=dt.timedelta(hours=-23, minutes=-59), max_value=dt.timedelta(hours=23, minutes=59)
    ),
)
moderate = st.datetimes(min_value=dt.datetime(1800, 1, 1), max_value=dt.datetime(2200, 1, 1))


def test_to_micros_examples() -> None:
    assert to_micros(EPOCH) == 0
    assert to_micros(dt.datetime(1970, 1, 1, 0, 0, 0, 1)) == 1
    assert to_micros(dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1
    assert to_micros(dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))) == 0
    assert to_micros(dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) == 0
    assert to_micros(dt.datetime(2026, 4, 1, 10)) == 1_775_037_600_000_000
    assert from_micros(-1) == dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    assert from_micros(1_775_037_600_000_000) == dt.datetime(2026, 4, 1, 10)


@given(st.datetimes())
def test_naive_round_trip(value: dt.datetime) -> None:
    micros = to_micros(value)
    assert isinstance(micros, int)
    back = from_micros(micros)
    assert back == value
    assert back.tzinfo is None


@given(st.integers(to_micros(dt.datetime.min), to_micros(dt.datetime.max)))
def test_micros_round_trip(micros: int) -> None:
    assert to_micros(from_micros(micros)) == micros


@given(st.datetimes(), st.datetimes())
def test_to_micros_keeps_order_and_differences(a: dt.datetime, b: dt.datetime) -> None:
    assert to_micros(b) - to_micros(a) == (b - a) // US


@given(moderate)
def test_naive_means_utc(value: dt.datetime) -> None:
    assert to_micros(value) == to_micros(value.replace(tzinfo=dt.UTC))


@given(moderate, fixed_zones)
def test_aware_values_are_converted_to_utc(value: dt.datetime, zone: dt.timezone) -> None:
    aware = value.replace(tzinfo=zone)
    offset = zone.utcoffset(None)
    assert to_micros(aware) == to_micros(value) - offset // US
    assert to_micros(aware) == to_micros(aware.astimezone(dt.UTC).replace(tzinfo=None))
    assert from_micros(to_micros(aware)) == (value - offset)


# Window functions against brute force


def brute_starts(t: int, size: int, slide: int, offset: int) -> list[int]:
    """Every integer `s` near `t` with `s = offset + k * slide` and `s <= t < s + size`."""
    return [
        s
        for s in range(t - size - slide, t + slide + 1)
        if (s - offset) % slide == 0 and s <= t < s + size
    ]


def k_starts(t: int, size: int, slide: int, offset: int) -> list[int]:
    """The same, enumerating `k` (for large values): starts `offset + k * slide`."""
    low = (t - size - offset) // slide - 2
    high = (t - offset) // slide + 2
    starts = (offset + k * slide for k in range(low, high + 1))
    return [s for s in starts if s <= t < s + size]


small_t = st.integers(-1_000, 1_000)
small_offset = st.integers(-300, 300)
small_len = st.integers(1, 60)


@given(small_t, small_len, small_offset)
def test_tumble_start_is_the_one_window_holding_t(t: int, size: int, offset: int) -> None:
    windows = brute_starts(t, size, size, offset)
    assert len(windows) == 1
    assert tumble_start(t, size, offset) == windows[0]


@given(small_t, small_len, small_len, small_offset)
def test_hop_starts_match_brute_force(t: int, size: int, slide: int, offset: int) -> None:
    assert list(hop_starts(t, size, slide, offset)) == brute_starts(t, size, slide, offset)


@given(small_t, small_len, small_offset)
def test_hop_with_slide_equal_size_is_tumble(t: int, size: int, offset: int) -> None:
    assert list(hop_starts(t, size, size, offset)) == [tumble_start(t, size, offset)]


@st.composite
def large_windows(draw: st.DrawFn) -> tuple[int, int, int, int]:
    slide = draw(st.integers(1, 10**12))
    size = draw(st.integers(1, 8 * slide))
    offset = draw(st.integers(-(10**13), 10**13))
    t = draw(st.integers(-(10**17), 10**17))
    return t, size, slide, offset


@given(large_windows())
def test_window_functions_on_large_values(window: tuple[int, int, int, int]) -> None:
    t, size, slide, offset = window
    assert list(hop_starts(t, size, slide, offset)) == k_starts(t, size, slide, offset)
    assert [tumble_start(t, size, offset)] == k_starts(t, size, size, offset)


@given(small_t, small_len, small_len, small_offset)
def test_earliest_hop_start_is_the_smallest_start_after_t_minus_size(
    t: int, size: int, slide: int, offset: int
) -> None:
    s0 = earliest_hop_start(t, size, slide, offset)
    assert (s0 - offset) % slide == 0
    assert s0 - slide <= t - size < s0
    windows = brute_starts(t, size, slide, offset)
    if windows:
        assert s0 == windows[0]
    else:
        assert slide > size


@given(small_t, st.integers(0, 500), small_len, small_len, small_offset)
def test_earliest_hop_start_bounds_every_later_window(
    t: int, later: int, size: int, slide: int, offset: int
) -> None:
    s0 = earliest_hop_start(t, size, slide, offset)
    for start in brute_starts(t + later, size, slide, offset):
        assert start >= s0


@given(large_windows(), st.integers(0, 10**13))
def test_earliest_hop_start_bounds_every_later_window_large(
    window: tuple[int, int, int, int], later: int
) -> None:
    t, size, slide, offset = window
    s0 = earliest_hop_start(t, size, slide, offset)
    assert (s0 - offset) % slide == 0
    assert s0 - slide <= t - size < s0
    assert all(start >= s0 for start in k_starts(t + later, size, slide, offset))


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (dt.timedelta(0), "0 seconds"),
        (dt.timedelta(minutes=5), "5 minutes"),
        (dt.timedelta(minutes=-1), "-1 minute"),
        (dt.timedelta(seconds=90), "1 minute 30 seconds"),
        (dt.timedelta(hours=2, minutes=5), "2 hours 5 minutes"),
        (-dt.timedelta(hours=2, minutes=5), "-2 hours -5 minutes"),
        (dt.timedelta(days=8, milliseconds=1), "1 week 1 day 1 millisecond"),
    ],
)
def test_a_duration_is_written_as_a_person_writes_it(delta: dt.timedelta, text: str) -> None:
    assert describe_duration(delta) == text


@given(st.timedeltas(min_value=-dt.timedelta(days=10**5), max_value=dt.timedelta(days=10**5)))
def test_a_written_duration_reads_back_as_itself(delta: dt.timedelta) -> None:
    assert parse_interval(describe_duration(delta)) == delta // US
