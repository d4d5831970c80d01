"""Java's text forms: Double.toString / Float.toString (JDK 19+ shortest form), InetAddress
host addresses and the CDC library's CqlDuration.toString."""

from __future__ import annotations

import random
import struct

import pytest

from bridge.envelope.java_text import double_text, duration_text, float_text, inet_text, to_float32


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (3.14159, "3.14159"),
        (-2.5, "-2.5"),
        (0.001, "0.001"),
        (0.00099, "9.9E-4"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (1e-5, "1.0E-5"),
        (1.5e-5, "1.5E-5"),
        (2e23, "2.0E23"),
        (0.1 + 0.2, "0.30000000000000004"),
        (5e-324, "4.9E-324"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
    ],
)
def test_double_text(value: float, java: str) -> None:
    assert double_text(value) == java


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.1, "0.1"),
        (2.71828, "2.71828"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (1e10, "1.0E10"),
        (16777216.0, "1.6777216E7"),
        (3.4028234663852886e38, "3.4028235E38"),
        (1.401298464324817e-45, "1.4E-45"),
        (1.1754943508222875e-38, "1.1754944E-38"),
        (0.001, "0.001"),
        (-1234.5677, "-1234.5677"),
    ],
)
def test_float_text(value: float, java: str) -> None:
    assert float_text(to_float32(value)) == java


def test_float_text_is_the_shortest_that_reads_back() -> None:
    """For random float32 values: the text reads back to the same float32, and no shorter
    decimal of the form the text has does."""
    rnd = random.Random(5)
    for _ in range(3000):
        bits = rnd.getrandbits(32) & 0x7FFFFFFF
        if bits >= 0x7F800000 or bits == 0:
            continue
        value = struct.unpack("<f", struct.pack("<I", bits))[0]
        text = float_text(value)
        assert to_float32(float(text)) == value, (value, text)
        mantissa = text.split("E")[0].replace(".", "").replace("-", "").lstrip("0").rstrip("0")
        if len(mantissa) > 2:
            shorter = f"{value:.{len(mantissa) - 2}e}"
            assert to_float32(float(shorter)) != value, (value, text, shorter)


def test_non_finite() -> None:
    assert (double_text(float("nan")), double_text(float("inf")), double_text(float("-inf"))) == (
        "NaN",
        "Infinity",
        "-Infinity",
    )
    assert float_text(float("nan")) == "NaN"


@pytest.mark.parametrize(
    ("address", "java"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("fe80::1", "fe80:0:0:0:0:0:0:1"),
    ],
)
def test_inet_text(address: str, java: str) -> None:
    assert inet_text(address) == java


@pytest.mark.parametrize(
    ("months", "days", "nanos", "text"),
    [
        (0, 1, (12 * 3600 + 30 * 60) * 10**9, "1d12h30m"),
        (14, 3, 4 * 3600 * 10**9 + 5 * 60 * 10**9 + 6 * 10**9 + 7 * 10**6 + 8 * 1000 + 9, "1y2mo3d4h5m6s7ms8us9ns"),
        (-1, -2, 0, "-1mo2d"),
        (12, 0, 0, "1y"),
        (0, 0, 0, ""),
    ],
)
def test_duration_text(months: int, days: int, nanos: int, text: str) -> None:
    assert duration_text(months, days, nanos) == text
