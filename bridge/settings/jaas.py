"""Kafka Connect's `sasl.jaas.config` as librdkafka settings.

Connect (Java) configures SASL with a JAAS line, `<LoginModule> required key="value" ...;`;
librdkafka has no JAAS and refuses the property. The common login modules map onto its own
settings: PLAIN and SCRAM take `username`/`password` (`sasl.username`/`sasl.password`), OAuth
bearer with client credentials (KIP-768) takes `clientId`/`clientSecret`/`scope`
(`sasl.oauthbearer.method=oidc` and its `sasl.oauthbearer.client.*`/`scope`; the token endpoint
stays Kafka's `sasl.oauthbearer.token.endpoint.url`, the same name in both). Any other module
(Kerberos, custom) is refused: its librdkafka settings must be given directly.
"""

from __future__ import annotations

import re

_MODULE = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_OPTION = re.compile(r'([\w.]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_OAUTH_OPTIONS = {"clientId": "sasl.oauthbearer.client.id", "clientSecret": "sasl.oauthbearer.client.secret",
                  "scope": "sasl.oauthbearer.scope"}


def librdkafka_settings(jaas: str) -> dict[str, str]:
    """The librdkafka settings a JAAS line stands for; ValueError (naming no secret) otherwise."""
    found = _MODULE.match(jaas)
    if found is None:
        raise ValueError("not a JAAS line (<LoginModule> required key=\"value\" ...;)")
    module, options = found.group(1), _options(found.group(3))
    if module in (_PLAIN, _SCRAM):
        missing = [name for name in ("username", "password") if name not in options]
        if missing:
            raise ValueError(f"{module.rsplit('.', 1)[-1]} needs {' and '.join(missing)}")
        settings = {"sasl.username": options["username"], "sasl.password": options["password"]}
        return settings | ({"sasl.mechanism": "PLAIN"} if module == _PLAIN else {})
    if module == _OAUTH:
        if "clientId" not in options:  # no client credentials: an unsecured JWT or a custom handler
            raise ValueError("OAuthBearerLoginModule without clientId/clientSecret is not supported: "
                             "give kafka.sasl.oauthbearer.* settings instead")
        settings = {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc"}
        return settings | {_OAUTH_OPTIONS[key]: value for key, value in options.items() if key in _OAUTH_OPTIONS}
    raise ValueError(f"login module {module} is not supported: give its librdkafka settings "
                     "(kafka.sasl.*) instead")


def _options(text: str) -> dict[str, str]:
    options = {}
    for key, raw in _OPTION.findall(text):
        options[key] = raw[1:-1].replace('\\"', '"').replace("\\\\", "\\") if raw.startswith('"') else raw
    return options
