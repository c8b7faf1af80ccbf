"""Hardware profile detection: a model served from the user's own machine or network is profile A (small context,
one call at a time, looser duplicate thresholds); anything else is a hosted model, profile B."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings

if TYPE_CHECKING:
    from apps.llm.models import Connection

# Ports the local servers listen on by default: Ollama, LM Studio, llama.cpp, text-generation-webui, KoboldCpp.
LOCAL_PORTS = {11434, 1234, 8080, 5000, 5001}
LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa")


def _is_private_host(host: str) -> bool:
    if host in ("localhost", "host.docker.internal") or host.endswith(LOCAL_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local


def detect_profile(api: str, base_url: str) -> str:
    if api == "ollama":
        return "A"
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if _is_private_host((parts.hostname or "").lower()) or port in LOCAL_PORTS:
        return "A"
    return "B"


def connection_context_size(connection: Connection) -> int:
    """Tokens the connection's model takes in one call: its own `context_window`, else the default of its hardware
    profile (settings.LOREKEEPER_LLM["context_window"])."""
    return connection.context_window or settings.LOREKEEPER_LLM["context_window"][connection.effective_profile]
