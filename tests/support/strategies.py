"""The hypothesis strategies of the suite, in one place (unit and system tests import them from here).

Each is what one or more tests draw from; their ranges are the domains the tests claim a property over, so
a change here changes what those tests prove (the docstrings and comments say for which test).

* identifiers: :data:`campaign_slugs` (descriptor ids and group fields, ≤ 21 characters),
  :data:`envelope_slugs` (the full 64 of a campaign id in ``hpke_info``), :func:`hex_text`;
* labels: :data:`labels` (categories), :data:`group_labels` (declared group values), both without
  surrounding whitespace (the descriptor refuses it);
* JSON: :func:`json_values` builds every JSON document strategy, :data:`any_json` (with floats, NaN and
  infinities: what ``decode_payload`` must refuse cleanly), :data:`exact_json` (no floats, integers beyond
  2⁶³: what canonical JSON must round-trip), :data:`wide_json` (longer texts), :data:`finite_json` (what a
  fuzzing client can send over HTTP), :data:`payloads` (objects of :data:`exact_json`);
* descriptors: :func:`campaign_configs` (every trust model, mechanism, group and budget shape);
* numbers: :data:`mechanism_epsilons`, :data:`small_k`, :data:`central_epsilons`, :data:`cent_epsilons`
  (ε on a grid of hundredths, exact in decimal), :data:`ledger_epsilons`, :data:`ledger_answers`;
* malformed envelopes for the fuzzer: :func:`bad_base64`, :func:`broken_envelope_field`.
"""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any, Literal

from hypothesis import strategies as st

from deniable.shared.descriptor import CampaignConfig

__all__ = [
    "B64URL",
    "any_json",
    "bad_base64",
    "broken_envelope_field",
    "campaign_configs",
    "campaign_slugs",
    "cent_epsilons",
    "central_epsilons",
    "envelope_slugs",
    "exact_json",
    "finite_json",
    "group_labels",
    "hex_text",
    "json_values",
    "labels",
    "ledger_answers",
    "ledger_epsilons",
    "mechanism_epsilons",
    "payloads",
    "small_k",
    "wide_json",
]

B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# -- identifiers and labels ---------------------------------------------------------------------------------

campaign_slugs = st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True)
envelope_slugs = st.from_regex(r"[a-z0-9][a-z0-9-]{0,63}", fullmatch=True)
labels = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() == s)
group_labels = st.text(min_size=1, max_size=8).filter(lambda s: s.strip() == s)


def hex_text(length: int) -> st.SearchStrategy[str]:
    """Lower-case hex strings of exactly ``length`` characters (report ids: 32, pseudonyms: 64)."""
    return st.text("0123456789abcdef", min_size=length, max_size=length)


# -- JSON ---------------------------------------------------------------------------------------------------


def json_values(
    *,
    floats: Literal["any", "finite", "none"] = "any",
    int_bound: int | None = None,
    text_size: int = 20,
    key_size: int = 8,
    width: int = 3,
    dict_width: int | None = None,
    max_leaves: int = 10,
) -> st.SearchStrategy[Any]:
    """JSON documents: null, booleans, integers (within ±``int_bound`` if given), floats (``"any"`` includes
    NaN and ±∞, which JSON cannot carry; ``"finite"``; ``"none"``) and texts as leaves, nested in lists and
    objects of at most ``width`` members (objects: ``dict_width`` if given), at most ``max_leaves`` leaves."""
    leaves = st.none() | st.booleans()
    leaves |= st.integers() if int_bound is None else st.integers(-int_bound, int_bound)
    if floats == "any":
        leaves |= st.floats()
    elif floats == "finite":
        leaves |= st.floats(allow_nan=False, allow_infinity=False)
    leaves |= st.text(max_size=text_size)
    members = width if dict_width is None else dict_width
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=width) | st.dictionaries(st.text(max_size=key_size), inner, max_size=members)
        ),
        max_leaves=max_leaves,
    )


#: Anything a JSON parser may hand over, NaN and infinities included (payload decoding must refuse cleanly).
any_json = json_values()
#: No floats, integers beyond 64 bits: what canonical JSON must round-trip exactly.
exact_json = json_values(floats="none", int_bound=2**70, width=4, max_leaves=12)
#: Longer texts and wider containers (envelope decoding of arbitrary JSON).
wide_json = json_values(text_size=100, key_size=10, width=4, dict_width=5, max_leaves=20)
#: What a client can send over HTTP (finite floats only), for the fuzzer.
finite_json = json_values(floats="finite", text_size=50, key_size=10, width=5, max_leaves=30)
#: Objects of :data:`exact_json` (plaintexts to seal).
payloads = st.dictionaries(st.text(max_size=10), exact_json, max_size=5)


# -- descriptors --------------------------------------------------------------------------------------------


@st.composite
def campaign_configs(draw: st.DrawFn, public_key: bytes) -> CampaignConfig:
    """Descriptors of both trust models: 2–12 categories, ε in [0.01, 10], every local mechanism that fits k
    (binary-rr only at k = 2), up to 3 group fields with or without declared values (always declared for
    central), a central budget ≥ ε and either adjacency."""
    categories = draw(st.lists(labels, min_size=2, max_size=12, unique=True))
    epsilon = draw(st.floats(min_value=0.01, max_value=10.0))
    central = draw(st.booleans())
    mechanisms = ["auto", "grr", "oue", "olh"] + (["binary-rr"] if len(categories) == 2 else [])
    group_fields = draw(st.lists(campaign_slugs, max_size=3, unique=True))
    return CampaignConfig.create(
        id=draw(campaign_slugs),
        question=draw(st.text(min_size=1, max_size=50)),
        categories=categories,
        epsilon=epsilon,
        public_key=public_key,
        mechanism=None if central else draw(st.sampled_from(mechanisms)),
        group_fields=group_fields,
        trust_model="central" if central else "local",
        budget=draw(st.floats(min_value=epsilon, max_value=100.0)) if central else None,
        adjacency=draw(st.sampled_from(["add-remove", "replace"])) if central else None,
        group_values={
            name: draw(st.lists(group_labels, min_size=1, max_size=4, unique=True))
            for name in group_fields
            if central or draw(st.booleans())
        },
    )


# -- numbers ------------------------------------------------------------------------------------------------

#: ε of the mechanisms' law tests (the likelihood-ratio bound is claimed over this range).
mechanism_epsilons = st.floats(min_value=0.05, max_value=8.0, allow_nan=False)
small_k = st.integers(min_value=2, max_value=9)
#: ε of a central campaign (the exact budget arithmetic is claimed from 0.001 to 20).
central_epsilons = st.floats(min_value=1e-3, max_value=20.0, allow_nan=False, allow_infinity=False)
#: ε in hundredths, 0.01 to 3: a decimal that sums exactly, where binary floats drift.
cent_epsilons = st.integers(min_value=1, max_value=300).map(lambda c: float(Decimal(c) / 100))
#: The device ledger's property test: campaign ε values, then answers (campaign index, value, round index).
ledger_epsilons = st.lists(st.sampled_from([0.1, 0.25, 0.3, 0.5, 1.0, 1.5, 2.0, 3.0, 4.5]), min_size=1, max_size=6)
ledger_answers = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from(["a", "b", "c"]), st.integers(0, 3)), min_size=1, max_size=25
)


# -- malformed envelopes ------------------------------------------------------------------------------------


def bad_base64() -> st.SearchStrategy[str]:
    """Texts that are not the canonical unpadded base64url of a ciphertext of ≥ 48 bytes."""
    return st.one_of(
        st.text(min_size=1, max_size=120).filter(lambda s: any(c not in B64URL for c in s)),  # foreign chars
        st.text(B64URL, min_size=64, max_size=120).map(lambda s: s + "="),  # padding
        st.text(B64URL, min_size=1, max_size=120).filter(lambda s: len(s) % 4 == 1),  # impossible length
        st.text(B64URL, max_size=60),  # decodes to fewer than 48 bytes
        st.binary(min_size=48, max_size=90)
        .map(  # non-canonical trailing bits
            lambda b: (lambda t: t[:-1] + B64URL[(B64URL.index(t[-1]) | 1) % 64])(
                base64.urlsafe_b64encode(b).rstrip(b"=").decode()
            )
        )
        .filter(lambda t: len(t) % 4 in (2, 3)),
    )


def broken_envelope_field() -> st.SearchStrategy[tuple[str, Any]]:
    """One field of an envelope and a wrong value for it (``<drop>``, ``<extra>``, ``<replace>``: remove a
    field, add an unknown one, replace the whole envelope)."""
    hexes = st.text("0123456789abcdef", max_size=80)
    return st.one_of(
        st.tuples(st.just("ct"), bad_base64() | finite_json.filter(lambda v: not isinstance(v, str))),
        st.tuples(st.sampled_from(["report_id", "pseudonym"]), hexes | finite_json | st.text(max_size=70)),
        st.tuples(st.just("report_id"), st.text("0123456789ABCDEF", min_size=32, max_size=32)),
        st.tuples(st.just("v"), finite_json.filter(lambda v: v != 1 or isinstance(v, bool))),
        st.tuples(st.just("<drop>"), st.sampled_from(["v", "report_id", "pseudonym", "ct"])),
        st.tuples(st.just("<extra>"), st.text(min_size=1, max_size=20)),
        st.tuples(st.just("<replace>"), finite_json),
    )
