"""RSA blind signatures, RFC 9474: RSABSSA-SHA384-PSS-Deterministic (48-byte salt, no message prefix).

The variant is the one Privacy Pass uses for its publicly verifiable tokens (RFC 9578, token type 0x0002):
the message signed is a token input that already carries a fresh 32-byte random nonce, so the randomizing
prefix of the *Randomized* variants adds nothing (RFC 9474 §4, "Deterministic" only means no prefix; the
PSS salt is still random, so two signatures of one message differ).

Protocol (RFC 9474 §4; ``docs/admission-tokens.md``):

1. client ``blind(pk, msg)``: EM = EMSA-PSS-ENCODE(msg, modBits − 1) with a fresh 48-byte salt
   (RFC 8017 §9.1.1, MGF1-SHA-384), m = OS2IP(EM) (refused unless gcd(m, n) = 1), r uniform in [1, n)
   with gcd(r, n) = 1, blinded = m · r^e mod n; keep inv = r⁻¹ mod n.
2. issuer ``blind_sign(sk, blinded)``: s = blinded^d mod n, computed with CRT under a fresh *base blinding*
   (s = (blinded · u^e)^d · u⁻¹ for random u, so that the time of Python's modular exponentiation tells
   nothing about d), and checked: s^e mod n must equal blinded before it is released (a faulty CRT
   result would leak p and q).
3. client ``finalize(pk, msg, blind_sig, inv)``: sig = blind_sig · inv mod n, then the *standard*
   RSASSA-PSS verification of ``cryptography`` (SHA-384, MGF1-SHA-384, salt length 48); a signature that
   does not verify is refused.
4. anyone ``verify(pk, msg, sig)``: that same standard verification.

Blindness: for r uniform in Z_n^*, m · r^e is uniform in Z_n^* whatever m is, so the issuer's view of a
signing session is independent of the message and of the final signature, even to an issuer of unbounded
power. Unforgeability: a client that completed q sessions cannot produce q + 1 valid signatures (the
one-more-RSA-inversion assumption, Bellare, Namprempre, Pointcheval and Semanko 2003).

Pure integer arithmetic plus ``hashlib`` and ``cryptography`` (keys, PSS verification): no I/O, safe for
the device. The randomness comes from :mod:`secrets`.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from deniable.shared.errors import InvalidParameter

__all__ = [
    "HASH_BYTES",
    "MODULUS_BITS",
    "PUBLIC_EXPONENT",
    "SALT_BYTES",
    "BlindingResult",
    "blind",
    "blind_sign",
    "emsa_pss_encode",
    "finalize",
    "generate_key",
    "modulus_bytes",
    "verify",
]

#: Modulus length of the keys deniable generates (Privacy Pass token type 0x0002: Nk = 256 bytes).
MODULUS_BITS = 2048
PUBLIC_EXPONENT = 65537
#: SHA-384 output length (hLen) and the PSS salt length of the PSS variants (sLen = hLen = 48).
HASH_BYTES = 48
SALT_BYTES = 48

RandBelow = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class BlindingResult:
    """What ``blind`` returns: the blinded message to send, and ``inv`` (r⁻¹ mod n) to keep secret."""

    blinded: bytes
    inv: int


def generate_key(bits: int = MODULUS_BITS) -> rsa.RSAPrivateKey:
    """A fresh RSA key for blind signing only (e = 65537; never reuse it for anything else)."""
    return rsa.generate_private_key(public_exponent=PUBLIC_EXPONENT, key_size=bits)


def modulus_bytes(key: rsa.RSAPublicKey | rsa.RSAPrivateKey) -> int:
    """k = ⌈modBits / 8⌉, the length of blinded messages and signatures."""
    return (key.key_size + 7) // 8


def _i2osp(x: int, length: int) -> bytes:
    return x.to_bytes(length, "big")


def _os2ip(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _mgf1(seed: bytes, length: int) -> bytes:
    """MGF1 with SHA-384 (RFC 8017 §B.2.1)."""
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha384(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def emsa_pss_encode(msg: bytes, em_bits: int, salt: bytes) -> bytes:
    """EMSA-PSS-ENCODE (RFC 8017 §9.1.1) with SHA-384 and MGF1-SHA-384; ``len(salt)`` is sLen."""
    em_len = (em_bits + 7) // 8
    if em_len < HASH_BYTES + len(salt) + 2:
        raise InvalidParameter(f"an encoding of {em_bits} bits is too short for SHA-384 and a {len(salt)}-byte salt")
    m_hash = hashlib.sha384(msg).digest()
    h = hashlib.sha384(b"\x00" * 8 + m_hash + salt).digest()
    db = b"\x00" * (em_len - len(salt) - HASH_BYTES - 2) + b"\x01" + salt
    masked = bytearray(a ^ b for a, b in zip(db, _mgf1(h, em_len - HASH_BYTES - 1), strict=True))
    masked[0] &= 0xFF >> (8 * em_len - em_bits)
    return bytes(masked) + h + b"\xbc"


def _unit_below(n: int, randbelow: RandBelow) -> int:
    """r uniform in [1, n) with gcd(r, n) = 1 (rejection sampling; a non-unit has probability ≈ 2^−1023)."""
    while True:
        r = 1 + randbelow(n - 1)
        if math.gcd(r, n) == 1:
            return r


def blind(
    public_key: rsa.RSAPublicKey,
    msg: bytes,
    *,
    salt: bytes | None = None,
    inv: int | None = None,
    randbelow: RandBelow = secrets.randbelow,
) -> BlindingResult:
    """Blind ``msg`` for ``public_key`` (RFC 9474 §4.2). ``salt`` and ``inv`` are drawn fresh unless given
    (known-answer tests only); raises ``InvalidParameter`` when the encoding is not a unit mod n."""
    numbers = public_key.public_numbers()
    n, e = numbers.n, numbers.e
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    m = _os2ip(emsa_pss_encode(msg, public_key.key_size - 1, salt))
    if math.gcd(m, n) != 1:
        raise InvalidParameter("the encoded message is not invertible modulo n; blind it again")
    if inv is None:
        r = _unit_below(n, randbelow)
        inv = pow(r, -1, n)
    else:
        r = pow(inv, -1, n)
    blinded = m * pow(r, e, n) % n
    return BlindingResult(_i2osp(blinded, modulus_bytes(public_key)), inv)


def blind_sign(
    private_key: rsa.RSAPrivateKey, blinded: bytes, *, randbelow: RandBelow = secrets.randbelow
) -> bytes:
    """The issuer's blind signature of ``blinded`` (RFC 9474 §4.3), self-checked before it is returned.

    Raises ``InvalidParameter`` when ``blinded`` has the wrong length or is not below n.
    """
    k = modulus_bytes(private_key)
    if not isinstance(blinded, bytes) or len(blinded) != k:
        raise InvalidParameter(f"a blinded message must be {k} bytes")
    private = private_key.private_numbers()
    public = private.public_numbers
    n, e = public.n, public.e
    m = _os2ip(blinded)
    if m >= n:
        raise InvalidParameter("the blinded message is not below the modulus")
    u = _unit_below(n, randbelow)  # base blinding against timing attacks on the exponentiation
    c = m * pow(u, e, n) % n
    s1 = pow(c % private.p, private.dmp1, private.p)
    s2 = pow(c % private.q, private.dmq1, private.q)
    s = (s2 + private.q * (private.iqmp * (s1 - s2) % private.p)) * pow(u, -1, n) % n
    if pow(s, e, n) != m:
        raise ArithmeticError("the blind signature failed its own check (a fault); nothing was released")
    return _i2osp(s, k)


def _pss() -> padding.PSS:
    return padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=SALT_BYTES)


def verify(public_key: rsa.RSAPublicKey, msg: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a valid RSASSA-PSS (SHA-384, MGF1-SHA-384, sLen 48) signature of ``msg``."""
    try:
        public_key.verify(signature, msg, _pss(), hashes.SHA384())
    except InvalidSignature:
        return False
    return True


def finalize(public_key: rsa.RSAPublicKey, msg: bytes, blind_sig: bytes, inv: int) -> bytes:
    """Unblind the issuer's answer into the signature of ``msg`` (RFC 9474 §4.4) and verify it.

    Raises ``InvalidParameter`` when the answer has the wrong length or the result does not verify (a
    faulty or malicious issuer).
    """
    k = modulus_bytes(public_key)
    if not isinstance(blind_sig, bytes) or len(blind_sig) != k:
        raise InvalidParameter(f"a blind signature must be {k} bytes")
    n = public_key.public_numbers().n
    z = _os2ip(blind_sig)
    if z >= n:
        raise InvalidParameter("the blind signature is not below the modulus")
    signature = _i2osp(z * inv % n, k)
    if not verify(public_key, msg, signature):
        raise InvalidParameter("the issuer's blind signature does not verify for this message and key")
    return signature
