"""The one error of the settings: a setting that stops start-up, `<key>: <reason>`."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting that stops start-up: `str` is `<key>: <reason>`."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason
