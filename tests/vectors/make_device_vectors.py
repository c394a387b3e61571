"""Generate ``tests/vectors/device-v1.json``: known answers of the device's exact randomness (run by hand).

    .venv/bin/python tests/vectors/make_device_vectors.py

Everything here is deterministic (no HPKE, no CSPRNG), so a rerun writes the same file unless the Python
code changed; ``tests/unit/test_device_vectors.py`` recomputes every entry from today's Python code and
``js/test/`` checks the JavaScript client against the same file. It holds:

- ``hmac_drbg``: HMAC_DRBG (SHA-256) outputs of :class:`deniable.client.drbg.HmacDrbg` for given entropy,
  nonce, personalization and additional input, and the integers its ``randbelow`` draws;
- ``exp_lower``: the rational weight r ≤ e^ε of :func:`deniable.shared.sampling.exp_lower` for doubles ε
  (r as reduced numerator and denominator in decimal);
- ``samplers``: each exact sampler run on :func:`deniable.shared.sampling.seeded_randbelow` over a seeded
  numpy generator, with the *tape* (every byte the sampler took, in order) and its outputs. A port that
  replays the tape must take exactly these bytes (the draw rule: ⌈log₂ n⌉ bits, big-endian, redrawn while
  ≥ n) and return exactly these outputs;
- ``drbg_samplers``: the device randomizers driven by ``HmacDrbg.randbelow`` (permanent responses);
- ``canonical_json`` and ``descriptors``: RFC 8785 texts and pinned fingerprints beyond those of
  ``wire-v*.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from deniable.client.drbg import HmacDrbg
from deniable.shared import sampling
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig

OUT = Path(__file__).with_name("device-v1.json")
PUBLIC_KEY = bytes.fromhex("def07c42c7a2f4ece24b457057d2353b1f52c04b8444d9bc88039e632b2e2a0f")


class Recorder:
    """A numpy byte source that records every byte it hands out."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.tape = bytearray()

    def bytes(self, length: int) -> bytes:
        chunk = self.rng.bytes(length)
        self.tape += chunk
        return chunk


def frac(x: Fraction) -> list[str]:
    return [str(x.numerator), str(x.denominator)]


def drbg_cases() -> list[dict[str, Any]]:
    cases = []
    for i, (entropy, nonce, pers) in enumerate(
        [
            (bytes(range(32)), b"", b""),
            (bytes.fromhex("11" * 32), bytes.fromhex("0102030405060708"), b"deniable/test"),
            (bytes(range(48)), b"nonce", "campaign-\u00e9/value".encode()),
        ]
    ):
        drbg = HmacDrbg(entropy, nonce, pers)
        calls = []
        for nbytes, additional in [(32, b""), (1, b""), (64, b"extra"), (100, b""), (7, bytes([i]) * 40)]:
            calls.append(
                {
                    "nbytes": nbytes,
                    "additional_hex": additional.hex(),
                    "out_hex": drbg.generate(nbytes, additional).hex(),
                }
            )
        rb = HmacDrbg(entropy, nonce, pers)
        bounds = [1, 2, 3, 7, 8, 9, 255, 256, 257, 1000, 65537, 2**31 - 1, 2**64 + 13, 10**40 + 7, 1, 2]
        draws = [str(rb.randbelow(n)) for n in bounds]
        cases.append(
            {
                "entropy_hex": entropy.hex(),
                "nonce_hex": nonce.hex(),
                "personalization_hex": pers.hex(),
                "generate": calls,
                "randbelow": {"bounds": [str(n) for n in bounds], "out": draws},
            }
        )
    return cases


EPSILONS = [
    0.0,
    0.001,
    0.01,
    0.1,
    0.25,
    0.5,
    0.693147,
    1.0,
    1.5,
    2.0,
    2.302585092994046,
    3.0,
    5.0,
    7.5,
    9.999,
    10.0,
    1e-7,
    0.3,
    4.4,
    6.02,
    8.125,
    12.5,
    20.0,
]
#: Edge cases (subnormal, tiny, far beyond the campaign range) and 40 doubles drawn uniformly from [0.001, 10].
EPSILONS += [1e-300, 5e-324, 50.0, 100.0] + [float(x) for x in np.random.default_rng(16).uniform(0.001, 10.0, 40)]


def samplers_cases() -> list[dict[str, Any]]:
    weights = {eps: sampling.exp_lower(Fraction(eps)) for eps in (0.5, 1.0, 2.0, 5.0)}
    runs: list[tuple[str, dict[str, Any], Callable[[sampling.RandBelow], Any]]] = []
    for eps, w in weights.items():
        for k in (2, 5, 12):
            for x in (0, k - 1):
                runs.append(
                    (
                        "randomized_response",
                        {"true_index": x, "k": k, "weight": frac(w), "epsilon": eps},
                        lambda rb, x=x, k=k, w=w: sampling.randomized_response(x, k, w, rb),
                    )
                )
        for k in (3, 10) if eps != 1.0 else (3, 10, 70):
            runs.append(
                (
                    "unary_bits",
                    {"true_index": k // 2, "k": k, "weight": frac(w), "epsilon": eps},
                    lambda rb, k=k, w=w: sampling.unary_bits(k // 2, k, w, rb),
                )
            )
        runs.append(
            (
                "unary_set_bits",
                {"selected": str(0b1011001), "k": 9, "weight": frac(w), "epsilon": eps},
                lambda rb, w=w: sampling.unary_set_bits(0b1011001, 9, w, rb),
            )
        )
    for num, den in ((0, 1), (1, 3), (2, 3), (1, 1), (999, 1000)):
        runs.append(("bernoulli", {"num": num, "den": den}, lambda rb, n=num, d=den: sampling.bernoulli(n, d, rb)))
    for g in (Fraction(0), Fraction(1, 2), Fraction(1), Fraction(7, 3), Fraction(1, 10**6)):
        runs.append(("bernoulli_exp", {"gamma": frac(g)}, lambda rb, g=g: sampling.bernoulli_exp(g, rb)))
    for g in (Fraction(1, 4), Fraction(2)):
        runs.append(("geometric_exp", {"gamma": frac(g)}, lambda rb, g=g: sampling.geometric_exp(g, rb)))
    for s in (Fraction(1), Fraction(5, 2), Fraction(40)):
        runs.append(("discrete_laplace", {"scale": frac(s)}, lambda rb, s=s: sampling.discrete_laplace(s, rb)))
    for s2 in (Fraction(1, 2), Fraction(4), Fraction(1000, 3)):
        runs.append(("discrete_gaussian", {"sigma2": frac(s2)}, lambda rb, s2=s2: sampling.discrete_gaussian(s2, rb)))
    cases = []
    for seed, (name, args, run) in enumerate(runs):
        source = Recorder(seed)
        rb = sampling.seeded_randbelow(source)
        calls = 5 if name.startswith("unary") else 25  # a unary report is k draws of ~18 bytes each
        outputs = [run(rb) for _ in range(calls)]
        cases.append(
            {
                "sampler": name,
                "args": args,
                "seed": seed,
                "calls": calls,
                "outputs": [str(int(v)) for v in outputs],
                "tape_hex": source.tape.hex(),
            }
        )
    return cases


def drbg_sampler_cases() -> list[dict[str, Any]]:
    w = sampling.exp_lower(Fraction(1.0))
    cases = []
    for name, k, x in (("randomized_response", 4, 2), ("unary_bits", 16, 5)):
        drbg = HmacDrbg(bytes.fromhex("22" * 32), b"", f"deniable/test/{name}".encode())
        fn = sampling.randomized_response if name == "randomized_response" else sampling.unary_bits
        outputs = [str(fn(x, k, w, drbg.randbelow)) for _ in range(20)]
        cases.append(
            {
                "sampler": name,
                "args": {"true_index": x, "k": k, "weight": frac(w), "epsilon": 1.0},
                "entropy_hex": "22" * 32,
                "nonce_hex": "",
                "personalization_hex": f"deniable/test/{name}".encode().hex(),
                "outputs": outputs,
            }
        )
    return cases


CANONICAL = [
    {"b": 1, "a": [True, False, None], "c": {"z": 1.0, "y": -0.0}},
    {"numbers": [1.5, 1e-7, 0.000001, 1e21, 1e20, 123456789.125, -2.5e-10, 5e-324, 1.7976931348623157e308]},
    {"text": 'quote " backslash \\ controls \b\f\n\r\t \u0001 \u001f del \u007f é 😀 \u2028'},
    {"nested": [[], {}, [{"k": "v"}]], "": "empty key", "Z": 0, "a": 2, "é": 3},
    [1, "two", 3.25],
]


def descriptors() -> list[dict[str, Any]]:
    key = {"public_key": PUBLIC_KEY}
    configs = [
        CampaignConfig.create(
            id="rounds",
            question="Weekly: how was your week?",
            categories=["bad", "ok", "good"],
            epsilon=0.1,
            mechanism="grr",
            recurring=True,
            **key,
        ),
        CampaignConfig.create(
            id="tiny-eps",
            question="Pick one",
            categories=[f"c{i}" for i in range(7)],
            epsilon=0.001,
            mechanism="olh",
            **key,
        ),
        CampaignConfig.create(
            id="wide",
            question='Emoji "quoted"\nnewline',
            categories=["😀", "é", "\u00e9\u0301"],
            epsilon=9.75,
            mechanism="oue",
            group_fields=["a", "b"],
            group_values={"b": ["x", "y"]},
            **key,
        ),
        CampaignConfig.create(
            id="central-gauss",
            question="Salary band?",
            categories=["lo", "hi"],
            epsilon=0.5,
            trust_model="central",
            budget=3.0,
            **key,
        ),
    ]
    return [
        {
            "config": c.to_json(),
            "canonical": canonical_json({k: v for k, v in c.to_json().items() if k != "status"}).decode(),
            "fingerprint": c.pinned_fingerprint(),
        }
        for c in configs
    ]


def build() -> dict[str, Any]:
    return {
        "description": "deniable device randomness known-answer vectors; see tests/vectors/make_device_vectors.py",
        "rr_digits": sampling.RR_DIGITS,
        "hmac_drbg": drbg_cases(),
        "exp_lower": [{"epsilon": eps, "r": frac(sampling.exp_lower(Fraction(eps)))} for eps in EPSILONS],
        "samplers": samplers_cases(),
        "drbg_samplers": drbg_sampler_cases(),
        "canonical_json": [{"value": v, "canonical": canonical_json(v).decode()} for v in CANONICAL],
        "descriptors": descriptors(),
    }


def main() -> None:
    OUT.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
