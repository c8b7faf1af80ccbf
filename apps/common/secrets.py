"""Secrets a user gives us (API keys of their own providers), stored encrypted with a key derived from SECRET_KEY.

Rotating SECRET_KEY keeps them readable: put the old key in SECRET_KEY_FALLBACKS (Django's own setting for a
rotation), and stored secrets are read with whichever key made them while new ones are made with the current key.
`manage.py secrets_rotate` re-encrypts every stored secret with the current key, after which the old key can leave
the fallbacks. A secret no key can read answers "" and the user enters it again.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _fernet_for(secret_key: str) -> Fernet:
    digest = hashlib.sha256(b"lorekeeper-secrets:" + secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _fernet() -> MultiFernet:
    """The current key first (it encrypts), then the fallbacks (they only decrypt)."""
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet_for(key) for key in keys])


def secret_encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def secret_decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return ""


def secret_rotate(token: str) -> str:
    """`token` encrypted again with the current key (unchanged when empty or unreadable by every key)."""
    if not token:
        return token
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        return token
