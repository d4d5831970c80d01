"""The `cdc = {...}` table option: parsing with ScyllaDB's rules and errors, and its DESCRIBE form."""

from __future__ import annotations

import struct
from collections.abc import Mapping

from bridge.scylla.schema import CdcOptions, ImageMode
from bridge_devstack.sim.errors import InvalidRequestError

_TRUE = ("true", "1")
_FALSE = ("false", "0")


def parse_cdc_options(raw: Mapping[str, str]) -> CdcOptions:
    """Keys and values are lower-cased first; unknown keys and bad values are errors."""
    enabled, preimage, postimage, delta_full, ttl = False, ImageMode.OFF, False, True, 86400
    for original_key, original_value in raw.items():
        key, value = original_key.lower(), str(original_value).lower()
        if key == "enabled":
            enabled = _boolean(key, value, original_value)
        elif key == "preimage":
            preimage = (
                ImageMode.FULL
                if value == "full"
                else (ImageMode.CHANGED if _boolean(key, value, original_value) else ImageMode.OFF)
            )
        elif key == "postimage":
            postimage = _boolean(key, value, original_value)
        elif key == "delta":
            if value not in ("full", "keys"):
                raise _bad_value(key, original_value)
            delta_full = value == "full"
        elif key == "ttl":
            ttl = _ttl(original_value)
        else:
            raise InvalidRequestError(f"Invalid CDC option: {original_key}")
    return CdcOptions(enabled, preimage, postimage, delta_full, ttl)


def _boolean(key: str, value: str, original: str) -> bool:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise _bad_value(key, original)


def _ttl(original: str) -> int:
    try:
        ttl = int(str(original).strip())
    except ValueError:
        raise _bad_value("ttl", original) from None
    if ttl >= 1 << 31:
        raise InvalidRequestError("Invalid CDC option: ttl too large")
    if ttl < 0:
        raise InvalidRequestError("Invalid CDC option: ttl must be >= 0")
    return ttl


def _bad_value(key: str, original: str) -> InvalidRequestError:
    return InvalidRequestError(f'Invalid value for CDC option "{key}": {original}')


def describe_cdc_options(options: CdcOptions) -> dict[str, str]:
    """The option map as ScyllaDB stores and DESCRIBE shows it (all keys, string values)."""
    return {
        "delta": "full" if options.delta_full else "keys",
        "enabled": "true" if options.enabled else "false",
        "postimage": "true" if options.postimage else "false",
        "preimage": {ImageMode.OFF: "false", ImageMode.CHANGED: "true", ImageMode.FULL: "full"}[options.preimage],
        "ttl": str(options.ttl),
    }


def cdc_extension_bytes(described: Mapping[str, str]) -> bytes:
    """ScyllaDB's `cdc` schema extension (`system_schema.tables.extensions['cdc']`): the option map
    in its IDL serialization (cdc_extension::serialize, a std::map<sstring, sstring>): a
    little-endian uint32 count, then each key and value as a little-endian uint32 length and UTF-8,
    keys sorted. Drivers read it back (the Scylla Java driver's `TableOptionsMetadata.isScyllaCDC`)."""
    parts = [struct.pack("<I", len(described))]
    for key in sorted(described):
        for text in (key, described[key]):
            raw = text.encode()
            parts.append(struct.pack("<I", len(raw)) + raw)
    return b"".join(parts)
