"""Which provider URLs the server may call on a user's behalf.

A user-chosen URL is a server-side request forgery risk on a hosted deployment: "http://10.0.0.5:6379" would have
the server talk to its own network. LOREKEEPER_PROVIDER_PRIVATE_HOSTS decides: allowed (the default, for a
self-hosted install next to its Ollama) or refused (a public deployment: production sets it off), in which case a
host that is or resolves to a loopback, private, link-local or reserved address is refused, both when the URL is
saved and again at every call (a name may resolve differently later).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from apps.common.exceptions import ApplicationError


def _blocked(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast or ip.is_unspecified
    )


def provider_url_check(url: str, *, field: str = "base_url") -> None:
    """Raise ApplicationError naming `field` when `url` may not be called."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApplicationError("The URL must start with http:// or https:// and name a host.", {"field": field})
    try:
        parts.port  # noqa: B018 — raises on a port outside 0-65535
    except ValueError as exc:
        raise ApplicationError("The URL's port is not a valid port.", {"field": field}) from exc
    if settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ApplicationError(f"Cannot resolve {parts.hostname!r}.", {"field": field}) from exc
    if any(_blocked(info[4][0]) for info in infos):
        raise ApplicationError("This deployment does not call private or local network addresses.", {"field": field})
