"""The X25519 public-key check refuses exactly the keys a trial exchange refuses (an all-zero shared secret).

``deniable.shared.keys.check_public_key`` tests membership in the small-order u-coordinates instead of
running an exchange; this checks the two agree on every small-order encoding (canonical or not, bit 255
set or not), their neighbours, and random keys.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable.shared.errors import InvalidParameter
from deniable.shared.keys import _P, _SMALL_ORDER_U, check_public_key, generate_keypair


def _exchange_refuses(raw: bytes) -> bool:
    try:
        X25519PrivateKey.generate().exchange(X25519PublicKey.from_public_bytes(raw))
    except ValueError:
        return True
    return False


def _check_refuses(raw: bytes) -> bool:
    try:
        check_public_key(raw)
    except InvalidParameter:
        return True
    return False


SMALL = sorted({u + p for u in _SMALL_ORDER_U for p in (0, _P) if u + p < 2**255})


@pytest.mark.parametrize("high_bit", [0, 1 << 255])
@pytest.mark.parametrize("u", SMALL)
def test_every_small_order_encoding_is_refused_as_the_exchange_refuses_it(u: int, high_bit: int) -> None:
    raw = (u | high_bit).to_bytes(32, "little")
    assert _exchange_refuses(raw) and _check_refuses(raw)
    for near in (u - 2, u - 1, u + 1, u + 2):
        if 0 <= near < 2**255:
            other = (near | high_bit).to_bytes(32, "little")
            assert _check_refuses(other) == _exchange_refuses(other), near


@settings(max_examples=300)
@given(raw=st.binary(min_size=32, max_size=32))
def test_random_keys_agree_with_the_exchange(raw: bytes) -> None:
    assert _check_refuses(raw) == _exchange_refuses(raw)


def test_real_keys_pass_and_bad_lengths_are_refused() -> None:
    for _ in range(20):
        check_public_key(generate_keypair()[1])
    for bad in (b"", bytes(31), bytes(33)):
        with pytest.raises(InvalidParameter, match="32 raw bytes"):
            check_public_key(bad)
