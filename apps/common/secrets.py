"""Secrets a user gives us (API keys of their own providers), stored encrypted with a key derived from SECRET_KEY.

Rotating SECRET_KEY makes stored secrets unreadable: `secret_decrypt` then answers "" and the user re-enters them.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"lorekeeper-secrets:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def secret_encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def secret_decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return ""
