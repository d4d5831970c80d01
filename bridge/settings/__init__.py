"""The bridge's settings: the one frozen model (`model.py`), how it is loaded from the file, the
environment and `--set` (`load.py`), and what is generated from it (the README reference,
`reference.py`; the Helm chart's values schema, `chart_schema.py`)."""

from bridge.settings.errors import ConfigError
from bridge.settings.load import load_config, parse_sets
from bridge.settings.model import BridgeConfig

__all__ = ["BridgeConfig", "ConfigError", "load_config", "parse_sets"]
