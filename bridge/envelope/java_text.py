"""Text forms that Java gives to values the Java connector renders, reproduced exactly.

- `double_text` / `float_text`: `Double.toString` / `Float.toString` (what Jackson writes for a
  Connect float64/float32): the shortest decimal that reads back as the same number (JDK 19+
  specification; older JDKs print a longer form for a few rare values), in plain notation for
  1e-3 <= |x| < 1e7 and `d.dddE±n` notation otherwise, always with a fractional digit.
- `inet_text`: `InetAddress.getHostAddress()`: IPv6 as eight uncompressed lowercase hex groups,
  IPv4-mapped IPv6 as the IPv4 address (Java turns those into an `Inet4Address`).
- `duration_text`: the CDC library's `CqlDuration.toString()` (`1y2mo3d4h5m6s7ms8us9ns`).
"""

from __future__ import annotations

import ipaddress
import math
import struct
from collections.abc import Callable
from decimal import Context, Decimal
from functools import lru_cache

_FLOAT32 = struct.Struct("<f")


def to_float32(value: float) -> float:
    """The float32 nearest to `value`, as a Python float (infinite beyond the float32 range)."""
    try:
        return float(_FLOAT32.unpack(_FLOAT32.pack(value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _non_finite(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return None


def _java_layout(negative: bool, digits: str, exponent: int) -> str:
    """Lay out `0.digits × 10^exponent` the way Double.toString does (digits without leading zeros)."""
    sign = "-" if negative else ""
    if 0 >= exponent > -3 or 0 < exponent <= 7:
        # 1e-3 <= |x| < 1e7: plain notation.
        if exponent <= 0:
            return f"{sign}0.{'0' * -exponent}{digits}"
        whole = digits[:exponent].ljust(exponent, "0")
        fraction = digits[exponent:] or "0"
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


def _digits_of(text: str) -> tuple[str, int]:
    """Significant digits and exponent (value = 0.digits × 10^exponent) of a positive decimal text
    such as `2.71828`, `1e+16`, `1.5e-05` or `4.9e-324`."""
    mantissa, _, exp_text = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    raw = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len(raw)
    digits = raw.rstrip("0") or "0"
    return digits, len(whole) - leading_zeros + (int(exp_text) if exp_text else 0)


def _closest_two_digit(value: float, one_digit: str, reads_back: Callable[[str], bool]) -> str:
    """Java prefers a 2-digit decimal over the shortest 1-digit one when it is closer to the
    exact value (e.g. 4.9E-324 rather than 5E-324)."""
    two_digit = f"{value:.1e}"
    if two_digit[2] == "0":  # d.0: the same number as the 1-digit decimal
        return one_digit
    if not reads_back(two_digit):
        return one_digit
    exact = Decimal(value)
    if abs(Decimal(two_digit) - exact) < abs(Decimal(one_digit) - exact):
        return two_digit
    return one_digit


def _is_same_double(value: float) -> Callable[[str], bool]:
    return lambda text: float(text) == value


_FLOAT32_BITS = struct.Struct("<I")
_FLOAT32_MAX = 3.4028234663852886e38
# Exact binary fractions of float32 need far more than the default 28 digits.
_EXACT = Context(prec=200)


def _float32_neighbour(value: float, step: int) -> Decimal:
    bits = _FLOAT32_BITS.unpack(_FLOAT32.pack(value))[0] + step
    if bits >= 0x7F800000:  # past the largest finite float32: the next "value" is one ulp above
        top = Decimal(_FLOAT32_MAX)
        return _EXACT.add(top, _EXACT.subtract(top, _float32_neighbour(_FLOAT32_MAX, -1)))
    return Decimal(_FLOAT32.unpack(_FLOAT32_BITS.pack(bits))[0])


def _is_same_float32(value: float) -> Callable[[str], bool]:
    """Whether a decimal text rounds (directly, as Float.parseFloat does) to the positive float32
    `value`: it must fall inside the value's rounding interval, ties going to the even mantissa."""
    exact = Decimal(value)
    low = _EXACT.divide(_EXACT.add(exact, _float32_neighbour(value, -1)), 2)
    high = _EXACT.divide(_EXACT.add(exact, _float32_neighbour(value, 1)), 2)
    even = _FLOAT32_BITS.unpack(_FLOAT32.pack(value))[0] % 2 == 0

    def reads_back(text: str) -> bool:
        candidate = Decimal(text)
        if low < candidate < high:
            return True
        return even and candidate in (low, high)

    return reads_back


def _special(value: float) -> str | None:
    """Zeros and non-finite values, handled before the caches (which see 0.0 == -0.0)."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _non_finite(value)


def double_text(value: float) -> str:
    if 1e-3 <= abs(value) < 1e7:
        # Python's repr is also the shortest round-trip decimal, and in this range both write it
        # in plain notation with at least one fractional digit: the texts are the same.
        return repr(value)
    special = _special(value)
    return _double_text(value) if special is None else special


def float_text(value: float) -> str:
    """`Float.toString` of a float32 held in a Python float."""
    special = _special(value)
    return _float_text(value) if special is None else special


@lru_cache(maxsize=65536)
def _double_text(value: float) -> str:
    shortest = repr(abs(value))
    digits, exponent = _digits_of(shortest)
    if len(digits) == 1:
        chosen = _closest_two_digit(abs(value), shortest, _is_same_double(abs(value)))
        digits, exponent = _digits_of(chosen)
    return _java_layout(value < 0, digits, exponent)


def _shortest_float32(value: float) -> str:
    """Shortest decimal that reads back as the float32 `value` (positive, finite, non-zero)."""
    if _FLOAT32_BITS.unpack(_FLOAT32.pack(value))[0] & 0x7FFFFF:
        # Away from powers of two the nearest p-digit decimal is the one to try, and if p digits
        # read back so do p+1: binary search. text -> double -> float32 rounds like
        # Float.parseFloat except within 2^-29 ulp of a midpoint.
        low, high = 1, 9
        while low < high:
            middle = (low + high) // 2
            if to_float32(float(f"{value:.{middle - 1}e}")) == value:
                high = middle
            else:
                low = middle + 1
        return f"{value:.{low - 1}e}"
    return _shortest_float32_exact(value)


def _shortest_float32_exact(value: float) -> str:
    reads_back = _is_same_float32(value)
    exact = Decimal(value)
    for precision in range(1, 10):
        nearest = Decimal(f"{value:.{precision - 1}e}")
        # At a power of two the rounding interval is lopsided: a neighbour of the nearest
        # p-digit decimal may read back when the nearest one does not.
        step = Decimal(1).scaleb(nearest.adjusted() - precision + 1)
        candidates = [c for c in (nearest, nearest - step, nearest + step) if c > 0 and reads_back(str(c))]
        if candidates:
            best = min(candidates, key=lambda c: abs(c - exact))
            return str(best)
    raise AssertionError(f"no decimal of at most 9 digits reads back as float32 {value!r}")


@lru_cache(maxsize=65536)
def _float_text(value: float) -> str:
    magnitude = abs(value)
    shortest = _shortest_float32(magnitude)
    digits, exponent = _digits_of(shortest)
    if len(digits) == 1:
        chosen = _closest_two_digit(magnitude, shortest, _is_same_float32(magnitude))
        digits, exponent = _digits_of(chosen)
    return _java_layout(value < 0, digits, exponent)


@lru_cache(maxsize=4096)
def inet_text(address: str) -> str:
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv4Address):
        return str(parsed)
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    packed = parsed.packed
    return ":".join(f"{int.from_bytes(packed[i : i + 2], 'big'):x}" for i in range(0, 16, 2))


_NANOS_PER_UNIT = (
    (3_600_000_000_000, "h"),
    (60_000_000_000, "m"),
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "us"),
    (1, "ns"),
)


def _append_unit(parts: list[str], count: int, unit_size: int, unit: str) -> int:
    if count == 0 or count < unit_size:
        return count
    parts.append(f"{count // unit_size}{unit}")
    return count % unit_size


def duration_text(months: int, days: int, nanoseconds: int) -> str:
    parts: list[str] = ["-"] if (months < 0 or days < 0 or nanoseconds < 0) else []
    month_rest = _append_unit(parts, abs(months), 12, "y")
    _append_unit(parts, month_rest, 1, "mo")
    _append_unit(parts, abs(days), 1, "d")
    rest = abs(nanoseconds)
    for unit_size, unit in _NANOS_PER_UNIT:
        rest = _append_unit(parts, rest, unit_size, unit)
    return "".join(parts)
