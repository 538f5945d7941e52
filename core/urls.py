"""Backend URLs: parsed in one way for every adapter, shown with their secrets hidden.

A URL can carry a password (`postgresql://user:secret@host/db`) or a key in
its query (`?api_key=...`, `?authToken=...`). Every message that names a URL
names `redact(url)`, so a secret never reaches a traceback, a log line or the
CLI's output.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from recallstack.core.errors import InvalidInputError

HIDDEN = "***"
SECRET_PARAMETERS = frozenset(
    {"api_key", "apikey", "key", "token", "auth_token", "authtoken", "password", "secret"}
)
"""Query parameters whose values are secrets (compared lowercased)."""


def redact(url: str) -> str:
    """`url` with its password and the values of secret query parameters replaced."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # malformed: its secrets found by pattern
        return scrub(url, url)
    secret = any(name.lower() in SECRET_PARAMETERS for name, _ in parse_qsl(parts.query))
    if password is None and not secret:
        return url
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{HIDDEN}@{host}"
    query = urlencode(
        [
            (name, HIDDEN if name.lower() in SECRET_PARAMETERS else value)
            for name, value in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def scrub(text: str, url: str) -> str:
    """`text` (a driver's message, say) with the secrets of `url` replaced, as written
    in the URL and percent-decoded; also when the URL cannot be parsed."""
    for secret in secrets(url):
        text = text.replace(secret, HIDDEN)
    return text


def secrets(url: str) -> list[str]:
    """The password and secret query values in `url`, as written and percent-decoded,
    longest first; read by pattern, so a malformed URL gives them too."""
    found: list[str] = []
    if (userinfo := _USERINFO.match(url)) is not None and ":" in userinfo[1]:
        found.append(userinfo[1].partition(":")[2])
    query = url.partition("?")[2].partition("#")[0]
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if unquote(name).lower() in SECRET_PARAMETERS:
            found.append(value)
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@")
"""The part before a URL's host that names a user and password (up to the last `@`)."""


@dataclass(frozen=True)
class Endpoint:
    """A server URL's parts, as an adapter builds its driver's client from them."""

    scheme: str
    host: str
    """As it goes into a URL: an IPv6 address in brackets."""
    port: int | None
    path: str
    params: dict[str, str]

    def secret(self, parameter: str, environment: str) -> str | None:
        """A key or token: from the URL's query, else from the service's usual variable."""
        return self.params.get(parameter) or os.environ.get(environment) or None


def endpoint(url: str) -> Endpoint:
    """Parse a server URL; a malformed one is an `InvalidInputError` naming the part."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise InvalidInputError(f"{redact(url)!r}: the host is malformed ({exc})") from None
    try:
        port = parts.port
    except ValueError:
        raise InvalidInputError(
            f"{redact(url)!r}: the port is not a number from 0 to 65535"
        ) from None
    host = parts.hostname
    if not host:
        raise InvalidInputError(f"{redact(url)!r}: the URL names no host")
    return Endpoint(
        scheme=parts.scheme.lower(),
        host=f"[{host}]" if ":" in host else host,
        port=port,
        path=parts.path,
        params=dict(parse_qsl(parts.query)),
    )
