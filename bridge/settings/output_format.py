"""The output-format settings (`cdc.output.format`, `cdc.include.*`): their value checks, and the
rule the Java connector's `CdcTableOptionsValidator` applies to each table's CDC options.

The rule, as the connector's: `cdc.include.before` other than `none` needs the table option
`'preimage'` equal to `true` (case-insensitive), `cdc.include.after` other than `none` needs
`'postimage'` equal to `true`. A table with `'preimage': 'full'` (ScyllaDB's full pre-image: every
column of the row as it was, not only the columns the write touched) is refused too: the
connector compares the text with `true` and nothing else, and a configuration the connector
refuses must not start here either. A missing table is not this rule's business (the connector
only warns; `cdc-bridge run` refuses it as `scylla.table.names` when it plans its tables).

Pure: the options map comes from `bridge.scylla.table_schema.load_cdc_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from bridge.envelope.settings import IncludeMode, OutputFormat, key_placement
from bridge.settings.errors import ConfigError

FORMATS = tuple(f.value for f in OutputFormat)
INCLUDE_MODES = tuple(m.value for m in IncludeMode)


def _output_format(value: str) -> str:
    # The connector reads an unknown value as legacy; a typo for advanced should not pass.
    if value.strip().lower() not in FORMATS:
        raise ValueError(f"must be one of {', '.join(FORMATS)}")
    return value.strip().lower()


def _include_mode(value: str) -> str:
    if value.strip().lower() not in INCLUDE_MODES:
        raise ValueError(f"must be one of {', '.join(INCLUDE_MODES)}")
    return value.strip().lower()


def _placement(value: str) -> str:
    return ",".join(sorted(p.value for p in key_placement(value)))


# The envelope's own fields: a payload key field of one of these names would clash.
_ENVELOPE_FIELDS = ("source", "before", "after", "op", "ts_ms", "transaction", "ts_us", "ts_ns")


def _payload_key_name(value: str, info: ValidationInfo) -> str:
    placement = str(info.data.get("key_placement", "")).split(",")  # declared (and checked) before this one
    if "payload-key" in placement and value in _ENVELOPE_FIELDS:
        raise ValueError(f"{value!r} is a field of the envelope already ({', '.join(_ENVELOPE_FIELDS)}); "
                         "choose another name")
    return value


# Field types of the model (bridge/settings/model.py): the value checked and normalized (lower case).
OutputFormatText = Annotated[str, AfterValidator(_output_format)]
IncludeModeText = Annotated[str, AfterValidator(_include_mode)]
PlacementText = Annotated[str, AfterValidator(_placement)]
PayloadKeyNameText = Annotated[str, AfterValidator(_payload_key_name)]

# (setting, table option) per side.
_NEEDS = (("cdc.include.before", "preimage"), ("cdc.include.after", "postimage"))


def needs_table_options(before: str, after: str) -> bool:
    """Whether the modes need image options of the tables (only then are they read)."""
    return before != IncludeMode.NONE.value or after != IncludeMode.NONE.value


def image_option_problem(keyspace: str, table: str, options: Mapping[str, str], before: str,
                         after: str) -> ConfigError | None:
    """The first requirement the table's CDC options (`options`: ScyllaDB's `scylla_tables.cdc`
    map, empty when CDC was never enabled) do not meet, as the one-line error naming the setting,
    the table, the option and the `ALTER TABLE` that fixes every requirement at once; None when
    they meet them."""
    options = {str(k).lower(): str(v) for k, v in options.items()}
    wanted = [(key, option, mode) for (key, option), mode in zip(_NEEDS, (before, after), strict=True)
              if mode != IncludeMode.NONE.value]
    missing = [(key, option, mode) for key, option, mode in wanted if options.get(option, "").lower() != "true"]
    if not _enabled(options):  # the connector: a table without CDC meets no image requirement
        missing = missing or wanted[:1]
        if not missing:
            return None
        key, option, mode = missing[0]
        has = f"'enabled': '{options['enabled']}'" if "enabled" in options else "no cdc options (CDC is not enabled)"
        fix = alter_table_fix(keyspace, table, options, [o for _, o, _ in missing])
        return ConfigError(key, f"table {keyspace}.{table} has {has}; {mode} needs 'enabled': true and "
                                f"'{option}': true ({fix})")
    if not missing:
        return None
    key, option, mode = missing[0]
    has = f"'{option}': '{options[option]}'" if option in options else f"no '{option}' option"
    why = " (the connector accepts true only, not full)" if options.get(option, "").lower() == "full" else ""
    fix = alter_table_fix(keyspace, table, options, [o for _, o, _ in missing])
    return ConfigError(key, f"table {keyspace}.{table} has {has}; {mode} needs '{option}': true{why} ({fix})")


def alter_table_fix(keyspace: str, table: str, options: Mapping[str, str], turn_on: list[str]) -> str:
    """`ALTER TABLE` with the whole `cdc` map: the table's current options, CDC enabled and the
    `turn_on` images true (the whole map, because `WITH cdc = {...}` sets every option it does
    not name back to its default)."""
    merged: dict[str, str] = {"enabled": "true", "preimage": "false", "postimage": "false"}
    merged.update({k: v for k, v in options.items() if k in ("delta", "ttl", "preimage", "postimage")})
    merged["enabled"] = "true"
    merged.update({option: "true" for option in turn_on})
    text = ", ".join(f"'{k}': {_cql(v)}" for k, v in merged.items())
    return f"ALTER TABLE {keyspace}.{table} WITH cdc = {{{text}}}"


def _enabled(options: Mapping[str, str]) -> bool:
    return options.get("enabled", "").lower() == "true"


def _cql(value: str) -> str:
    """An option value as a CQL literal: booleans and numbers bare, anything else quoted."""
    if value.lower() in ("true", "false") or value.isdigit():
        return value.lower()
    return "'" + value.replace("'", "''") + "'"
