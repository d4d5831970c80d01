"""Which of the worker's two envelope formats the jobs read (pure, no Spark).

`cdc.output.format=legacy` (the default) wraps every non-key column as a `{"value": v}` cell and
adds `X__elements` companions; `advanced` (the Java connector 2.x's) carries plain values and
builds `before` / `after` only from the table's pre-/post-images (`cdc.include.before` /
`cdc.include.after`), with the key columns where `cdc.include.primary-key.placement` puts them
(docs/envelope.md, reference/connector.md 2.7). A job cannot tell the two apart from schemaless
JSON (a UDT with one field `value` looks like a cell), so it is told: by the worker's own file
(`--config`) or by the `--cdc-*` flags, never by guessing from the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bridge.envelope.settings import (
    DEFAULT_KEY_PLACEMENT,
    EnvelopeSettings,
    IncludeMode,
    KeyPlacement,
    OutputFormat,
    key_placement,
)
from bridge.spark.core.errors import SparkJobError

# The settings' names, as in the worker's file (and the `--cdc-*` flags spelled with dashes).
OUTPUT_FORMAT = "cdc.output.format"
INCLUDE_BEFORE = "cdc.include.before"
INCLUDE_AFTER = "cdc.include.after"
PLACEMENT = "cdc.include.primary-key.placement"
PAYLOAD_KEY_NAME = "cdc.include.primary-key.payload-key-name"
KEYS_FOR_MIRROR = frozenset({KeyPlacement.KAFKA_KEY, KeyPlacement.PAYLOAD_KEY})


@dataclass(frozen=True, slots=True)
class CdcFormat:
    """The envelope format of the topics a job reads."""

    output_format: OutputFormat = OutputFormat.LEGACY
    include_before: IncludeMode = IncludeMode.NONE
    include_after: IncludeMode = IncludeMode.NONE
    placement: frozenset[KeyPlacement] = field(default=DEFAULT_KEY_PLACEMENT)
    payload_key_name: str = "key"

    @property
    def advanced(self) -> bool:
        return self.output_format is OutputFormat.ADVANCED

    @classmethod
    def of_worker(cls, settings: EnvelopeSettings) -> CdcFormat:
        """The format the worker with these settings writes."""
        return cls(settings.cdc_output_format, settings.cdc_include_before, settings.cdc_include_after,
                   settings.cdc_include_primary_key_placement, settings.cdc_include_primary_key_payload_key_name)

    def overridden(self, settings: Mapping[str, str | None]) -> CdcFormat:
        """This format with the settings given by name (text; None or missing: kept)."""
        def choice(name: str, kind: type[OutputFormat] | type[IncludeMode], current: str) -> str:
            text = (settings.get(name) or current).strip().lower()
            allowed = [member.value for member in kind]
            if text not in allowed:
                raise SparkJobError(f"{name}: must be one of {', '.join(allowed)}, got {text!r}")
            return text

        placement = self.placement
        if settings.get(PLACEMENT):
            try:
                placement = key_placement(str(settings[PLACEMENT]))
            except ValueError as error:
                raise SparkJobError(f"{PLACEMENT}: {error}") from None
        name = (settings.get(PAYLOAD_KEY_NAME) or self.payload_key_name).strip()
        if not name:
            raise SparkJobError(f"{PAYLOAD_KEY_NAME}: must not be empty")
        return CdcFormat(OutputFormat(choice(OUTPUT_FORMAT, OutputFormat, self.output_format.value)),
                         IncludeMode(choice(INCLUDE_BEFORE, IncludeMode, self.include_before.value)),
                         IncludeMode(choice(INCLUDE_AFTER, IncludeMode, self.include_after.value)), placement, name)

    def mirror_problem(self) -> str | None:
        """Why `mirror` cannot rebuild the tables from such topics (one line), or None."""
        if not self.advanced:
            return None
        if self.include_after is not IncludeMode.FULL:
            why = ("inserts and updates carry no row (after is null)" if self.include_after is IncludeMode.NONE
                   else "an unchanged column and a column set to null are both null in after")
            return (f"mirror: advanced topics need {INCLUDE_AFTER}=full (got {self.include_after.value}: {why}; "
                    "the post-image is the whole new row)")
        if not self.placement & KEYS_FOR_MIRROR:
            chosen = ",".join(sorted(p.value for p in self.placement))
            return (f"mirror: advanced topics need kafka-key or payload-key in {PLACEMENT} (got {chosen}: "
                    "a delete without a pre-image carries its key nowhere else)")
        return None
