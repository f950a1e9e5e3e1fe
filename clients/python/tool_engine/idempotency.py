"""Idempotency keys of ``append`` (docs/api.md, "Writes, conflicts and
read-your-writes").

A key is any string of 1 to 255 bytes of UTF-8 without control characters,
opaque and case-sensitive. A retry with the same key and the same commands
returns the first call's reply (``duplicate`` true) and writes nothing, so a
write whose reply was lost can be sent again safely. The stored events' ids
derive from the session and the key (``event_ids``), as the engine derives
them.
"""

from __future__ import annotations

import hashlib
import unicodedata
import uuid

MAX_KEY_BYTES = 255
"""The longest idempotency key, in bytes."""

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_key() -> str:
    """A fresh random key (a version 4 UUID): make one per logical write,
    before the first try, and send it on every retry."""
    return str(uuid.uuid4())


def check_key(key: str) -> None:
    """Raises ValueError, naming the problem and the fix, when ``key`` is not
    a usable idempotency key (the engine's rule)."""
    data = key.encode("utf-8", "surrogatepass")
    if not key:
        raise ValueError(f"idempotency key is empty: send 1 to {MAX_KEY_BYTES} bytes (a UUID, say) or no key")
    if len(data) > MAX_KEY_BYTES:
        raise ValueError(f"idempotency key of {len(data)} bytes is too long: at most {MAX_KEY_BYTES} (a UUID is 36)")
    for ch in key:
        if unicodedata.category(ch) == "Cs":
            raise ValueError(f"idempotency key {key!r} is not UTF-8")
        if unicodedata.category(ch) == "Cc":
            raise ValueError(f"idempotency key {key!r} holds a control character (U+{ord(ch):04X}): use printable characters")


def _ulid(n: int) -> str:
    # 128 bits as 26 characters of Crockford base32, the first carrying the top 3 bits.
    return "".join(_ALPHABET[(n >> (5 * (25 - i))) & 31] for i in range(26))


def event_ids(session: str, key: str, n: int) -> list[str]:
    """The ids of the ``n`` events an append with idempotency key ``key``
    stores on ``session``: the first 16 bytes of SHA-256("toolintent/engine
    idempotency key v1" 0x00 session 0x00 key) as a ULID, then that 128-bit
    number plus 1, 2, ... for further events."""
    digest = hashlib.sha256(b"toolintent/engine idempotency key v1\x00" + session.encode() + b"\x00" + key.encode()).digest()
    first = int.from_bytes(digest[:16], "big")
    return [_ulid((first + i) % (1 << 128)) for i in range(n)]
