"""API key format and hashing: ``ll_<key id>_<secret>``; only a SHA-256 of the whole key is stored.

The key id is public (shown by ``latencylens keys list``, used to revoke); the secret is 256 random
bits, so a plain SHA-256 is enough (no password stretching is needed for a high-entropy token).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

PREFIX: Final = "ll"
KEY_ID_BYTES: Final = 6
SECRET_BYTES: Final = 32
_KEY = re.compile(r"^ll_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})$")


def new_key() -> tuple[str, str]:
    """A fresh ``(key_id, raw_key)``."""
    key_id = secrets.token_hex(KEY_ID_BYTES)
    return key_id, f"{PREFIX}_{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"


def key_id_of(raw_key: str) -> str | None:
    """The key id of a well-formed key, else None."""
    match = _KEY.match(raw_key.strip())
    return match.group(1) if match else None


def hash_key(raw_key: str) -> str:
    """Hex SHA-256 of the key, as stored."""
    return hashlib.sha256(raw_key.strip().encode()).hexdigest()


def matches(raw_key: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented key with a stored hash."""
    return hmac.compare_digest(hash_key(raw_key), stored_hash)
