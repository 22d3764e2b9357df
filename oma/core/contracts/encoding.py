"""How a payload says it is encrypted: the ``encoding`` metadata the codec
(``oma.runtime.codec``) writes, and which a reader of past runs checks to
read a plaintext payload without the codec (a run recorded before
encryption was turned on)."""

from __future__ import annotations

ENCRYPTED_ENCODING = b"binary/encrypted"
"""``encoding`` metadata of an encrypted payload (the value Temporal's samples use)."""
