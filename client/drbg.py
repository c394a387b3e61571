"""HMAC_DRBG (NIST SP 800-90A Rev. 1, §10.1.2) with SHA-256, and an exact ``randbelow`` driven by it.

The device uses it for one thing: RAPPOR's *permanent* randomized response (Erlingsson, Pihur and Korolova,
"RAPPOR", CCS 2014). Chromium's RAPPOR client does the same (``components/rappor/rappor_metric.cc``: the
fake-data mask of a report comes from an ``HmacByteVectorGenerator``, an HMAC_DRBG keyed with the client
secret and personalized with the metric and its data). Seeding the generator with the device secret and
(campaign, value) makes the randomized report a deterministic function of them, so the same value always
yields the same report without a table of raw values on disk, while different devices (different secrets)
get independent draws.

Security: HMAC_DRBG is a NIST-approved deterministic random bit generator; with a 256-bit secret seed its
output is computationally indistinguishable from uniform to anyone who does not hold the secret, so the
exact samplers of :mod:`deniable.shared.sampling` keep their output law (up to that computational
assumption) when driven by :meth:`HmacDrbg.randbelow`.
"""

from __future__ import annotations

import hmac

__all__ = ["HmacDrbg"]

_OUTLEN = 32  # SHA-256 output length in bytes
_MAX_REQUEST = 7500  # bytes per generate call (SP 800-90A Table 2: 2^19 bits)
_RESEED_INTERVAL = 1 << 48


class HmacDrbg:
    """HMAC_DRBG with SHA-256, without prediction resistance or reseeding (SP 800-90A §10.1.2).

    ``HmacDrbg(entropy, nonce, personalization)`` instantiates; :meth:`generate` returns bytes;
    :meth:`randbelow` returns an exactly uniform integer in ``[0, n)`` by rejection sampling on the
    generated bits (no modulo bias).
    """

    __slots__ = ("_buffer", "_key", "_reseed_counter", "_value")

    def __init__(self, entropy: bytes, nonce: bytes = b"", personalization: bytes = b"") -> None:
        if len(entropy) < 32:
            raise ValueError(f"HMAC_DRBG needs at least 32 bytes of entropy input, got {len(entropy)}")
        self._key = b"\x00" * _OUTLEN
        self._value = b"\x01" * _OUTLEN
        self._update(entropy + nonce + personalization)
        self._reseed_counter = 1
        self._buffer = b""

    def _hmac(self, data: bytes) -> bytes:
        return hmac.digest(self._key, data, "sha256")  # one-shot HMAC-SHA256 (OpenSSL), the same bytes

    def _update(self, provided: bytes) -> None:
        """HMAC_DRBG_Update (§10.1.2.2)."""
        self._key = self._hmac(self._value + b"\x00" + provided)
        self._value = self._hmac(self._value)
        if provided:
            self._key = self._hmac(self._value + b"\x01" + provided)
            self._value = self._hmac(self._value)

    def generate(self, nbytes: int, additional: bytes = b"") -> bytes:
        """HMAC_DRBG_Generate (§10.1.2.5): ``nbytes`` pseudorandom bytes."""
        if not 0 < nbytes <= _MAX_REQUEST:
            raise ValueError(f"HMAC_DRBG requests must be 1..{_MAX_REQUEST} bytes, got {nbytes}")
        if self._reseed_counter > _RESEED_INTERVAL:
            raise RuntimeError("HMAC_DRBG reseed interval exhausted; instantiate a new generator")
        if additional:
            self._update(additional)
        out = bytearray()
        while len(out) < nbytes:
            self._value = self._hmac(self._value)
            out += self._value
        self._update(additional)
        self._reseed_counter += 1
        return bytes(out[:nbytes])

    def _take(self, nbytes: int) -> bytes:
        """The next ``nbytes`` of the stream of ``generate(64)`` blocks (whatever the request sizes were)."""
        buffer = self._buffer
        while len(buffer) < nbytes:
            buffer += self.generate(64)
        self._buffer = buffer[nbytes:]
        return buffer[:nbytes]

    def randbelow(self, n: int) -> int:
        """Uniform integer in ``[0, n)``: draw bit_length(n−1) bits, reject values ≥ n (P(reject) < 1/2)."""
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        if n == 1:
            return 0
        nbits = (n - 1).bit_length()
        nbytes = (nbits + 7) // 8
        shift = 8 * nbytes - nbits
        take = self._take
        while True:
            candidate = int.from_bytes(take(nbytes), "big") >> shift
            if candidate < n:
                return candidate
