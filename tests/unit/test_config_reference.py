"""The README's configuration reference is the settings model's own rendering: every setting the
code accepts, with its default, and nothing the code does not accept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bridge.settings import BridgeConfig, ConfigError
from bridge.settings.reference import (
    REFERENCE_END,
    REFERENCE_START,
    reference_block,
    render_reference,
    update_reference,
)

README = Path(__file__).resolve().parents[2] / "README.md"
REGENERATE = "run `.venv/bin/cdc-bridge config reference --update README.md`"


def _documented_keys(block: str) -> list[str]:
    return re.findall(r"^\| `([^`]+)` \|", block, flags=re.MULTILINE)


def test_readme_lists_exactly_the_settings_the_model_accepts() -> None:
    """A setting added to or removed from the model without the README fails here, by name."""
    block = reference_block(README.read_text())
    assert block is not None, f"README.md lost its generated reference block; {REGENERATE}"
    accepted = [info.alias or name for name, info in BridgeConfig.model_fields.items()]
    documented = _documented_keys(block)
    assert sorted(set(accepted) - set(documented)) == [], f"settings missing from README.md; {REGENERATE}"
    assert sorted(set(documented) - set(accepted)) == [], f"README.md documents unknown settings; {REGENERATE}"


def test_readme_reference_is_the_generated_one() -> None:
    """Defaults and meanings too: the block is byte for byte what the model renders."""
    assert reference_block(README.read_text()) == render_reference(), f"README.md reference is stale; {REGENERATE}"


def test_reference_shows_defaults_and_escapes_markdown() -> None:
    reference = render_reference()
    assert "| `metrics.port` | 9404 |" in reference
    assert "| `tombstones.on.delete` | true |" in reference
    assert "| `name` | (required) |" in reference
    assert "PydanticUndefined" not in reference and "{}" not in reference
    assert "<name>" not in reference and "\\<name\\>" in reference


def test_update_rewrites_only_the_block(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"# head\n\n{REFERENCE_START}\nold table\n{REFERENCE_END}\n\ntail\n")
    assert update_reference(doc) is True
    text = doc.read_text()
    assert text.startswith("# head\n\n") and text.endswith(f"{REFERENCE_END}\n\ntail\n")
    assert reference_block(text) == render_reference()
    assert update_reference(doc) is False
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ConfigError, match="--update"):
        update_reference(tmp_path / "bare.md")
