"""HTTP basic auth of the REST API: the users and passwords of `rest.auth.credentials.file`, in
the file format of Kafka Connect's BasicAuthSecurityRestExtension (Jetty's PropertyFileLoginModule:
`user: password[, role...]` per line, `#` comments), e.g. a Kubernetes Secret mounted as a file.
Passwords are compared in constant time and never logged."""

from __future__ import annotations

import base64
import binascii
import hmac
from pathlib import Path

from bridge.observability import register_secret
from bridge.settings import ConfigError

KEY = "rest.auth.credentials.file"


class Credentials:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users

    @classmethod
    def load(cls, path: Path) -> Credentials:
        """Raises ConfigError naming the setting for a file that cannot be read or holds no user."""
        try:
            text = path.read_text()
        except OSError as error:
            raise ConfigError(KEY, f"cannot read {path}: {error.strerror}") from None
        users = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            user, sep, rest = line.partition(":") if ":" in line else line.partition("=")
            password = rest.split(",", 1)[0].strip()
            if not sep or not user.strip() or not password:
                raise ConfigError(KEY, f"{path} line {number} is not 'user: password'")
            users[user.strip()] = password
        if not users:
            raise ConfigError(KEY, f"{path} names no user")
        for password in users.values():
            register_secret(password)  # masked should any later log line ever hold one
        return cls(users)

    def user_of(self, header: str | None) -> str | None:
        """The user an `Authorization: Basic ...` header proves; None for anything else."""
        scheme, _, encoded = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        expected = self._users.get(user)
        if not sep or expected is None:
            hmac.compare_digest(password.encode(), password.encode())  # the same work for an unknown user
            return None
        return user if hmac.compare_digest(password.encode(), expected.encode()) else None
