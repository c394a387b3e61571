"""HMAC_DRBG (SP 800-90A) and the permanent randomized response it drives."""

from __future__ import annotations

import math
import secrets

import pytest
from scipy import stats

from deniable.client.drbg import HmacDrbg
from deniable.client.memo import permanent_response
from deniable.shared.mechanisms import GRR, OLH, OUE

# NIST CAVP HMAC_DRBG.rsp, [SHA-256], PredictionResistance = False, no reseed, COUNT = 0.
NIST_ENTROPY = "ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488"
NIST_NONCE = "659ba96c601dc69fc902940805ec0ca8"
NIST_RETURNED = (
    "e528e9abf2dece54d47c7e75e5fe302149f817ea9fb4bee6f4199697d04d5b89"
    "d54fbb978a15b5c443c9ec21036d2460b6f73ebad0dc2aba6e624abf07745bc1"
    "07694bb7547bb0995f70de25d6b29e2d3011bb19d27676c07162c8b5ccde0668"
    "961df86803482cb37ed6d5c0bb8d50cf1f50d476aa0458bdaba806f48be9dcb8"
)


def test_nist_cavp_known_answer() -> None:
    drbg = HmacDrbg(bytes.fromhex(NIST_ENTROPY), bytes.fromhex(NIST_NONCE))
    drbg.generate(128)  # CAVP discards the first generate
    assert drbg.generate(128).hex() == NIST_RETURNED


def test_known_answer_fails_for_a_changed_input() -> None:
    drbg = HmacDrbg(bytes.fromhex(NIST_ENTROPY), bytes.fromhex(NIST_NONCE), b"x")
    drbg.generate(128)
    assert drbg.generate(128).hex() != NIST_RETURNED


def test_rejects_short_entropy_and_bad_requests() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        HmacDrbg(b"short")
    drbg = HmacDrbg(bytes(32))
    for n in (0, 7501):
        with pytest.raises(ValueError, match=r"1\.\.7500"):
            drbg.generate(n)
    with pytest.raises(ValueError, match="n >= 1"):
        drbg.randbelow(0)


def test_randbelow_reads_the_stream_of_generate_64_blocks() -> None:
    """randbelow's bytes are the concatenation of generate(64) blocks (the stream the device vectors fix),
    whatever the sizes of the requests, after any use of generate."""
    stream_drbg, drbg = HmacDrbg(b"\x05" * 32, b"n", b"p"), HmacDrbg(b"\x05" * 32, b"n", b"p")
    assert stream_drbg.generate(16) == drbg.generate(16)
    stream = b"".join(stream_drbg.generate(64) for _ in range(20))
    bounds = [2**130 + 7, 3, 2**64, 255, 256, 2**8 + 1, 10**40] * 8
    position, expected = 0, []
    for n in bounds:
        nbits = (n - 1).bit_length()
        nbytes = (nbits + 7) // 8
        while True:
            candidate = int.from_bytes(stream[position : position + nbytes], "big") >> (8 * nbytes - nbits)
            position += nbytes
            if candidate < n:
                expected.append(candidate)
                break
    assert position < len(stream)
    assert [drbg.randbelow(n) for n in bounds] == expected


@pytest.mark.parametrize("n", [2, 3, 7, 10, 256, 1000])
def test_randbelow_is_uniform(n: int) -> None:
    """χ² goodness of fit of 200·n draws against the uniform law on [0, n) (fixed seed, α = 1e-4)."""
    drbg = HmacDrbg(b"\x07" * 32, str(n).encode())
    draws = 200 * n
    counts = [0] * n
    for _ in range(draws):
        counts[drbg.randbelow(n)] += 1
    assert stats.chisquare(counts).pvalue > 1e-4
    assert drbg.randbelow(1) == 0


def test_permanent_response_is_a_function_of_secret_campaign_and_value() -> None:
    mech = OUE(epsilon=1.0, k=16)
    secret = secrets.token_bytes(32)
    first = permanent_response(mech, secret, "c1", 3)
    assert permanent_response(mech, secret, "c1", 3) == first
    assert len(first[0]) == 32 and int(first[0], 16) >= 0
    others = {
        permanent_response(mech, secret, "c1", 4)[0],
        permanent_response(mech, secret, "c2", 3)[0],
        permanent_response(mech, secrets.token_bytes(32), "c1", 3)[0],
    }
    assert first[0] not in others and len(others) == 3


@pytest.mark.parametrize("mechanism", [GRR(epsilon=1.0, k=4), OUE(epsilon=1.0, k=4), OLH(epsilon=1.0, k=4)])
def test_permanent_response_has_the_mechanism_law_across_devices(mechanism: GRR) -> None:
    """Across 3000 device secrets, P(true value ∈ Support(report)) = p* and P(other value ∈ Support) = q*.

    Tolerance: 4 analytic binomial standard errors.
    """
    n = 3000
    hits_true = hits_other = 0
    for i in range(n):
        secret = i.to_bytes(32, "big")
        _, report = permanent_response(mechanism, secret, "law", 1)
        support = mechanism.support(report)
        hits_true += 1 in support
        hits_other += 2 in support
    for hits, p in ((hits_true, mechanism.p_star), (hits_other, mechanism.q_star)):
        assert abs(hits - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (hits, n * p)
