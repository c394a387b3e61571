"""Generate the known-answer vectors ``tests/vectors/wire-v2.json`` (run by hand; the tests never run it).

    .venv/bin/python tests/vectors/make_vectors.py             # wire-v2.json (one-question campaigns)
    .venv/bin/python tests/vectors/make_vectors.py --surveys   # wire-v3.json (surveys, format 3)

The survey vectors derive every device answer exactly as ``Client.submit`` does (deterministic in the
device secret: report id, drawn question, reports), so a port can check its derivation as well as its
encoding; only the HPKE ciphertexts are random.

Ciphertexts and randomized reports use real randomness (HPKE ephemeral keys, the mechanisms' ``secrets``
samplers), so every run writes different ciphertexts: regenerate only when the wire format changes, and
bump the file name with ``FORMAT_VERSION``. The vectors are specified in ``docs/wire-format.md``. The files
of older versions (``wire-v1.json``) stay as they were recorded: the aggregator still reads campaigns of
those versions and ``tests/unit/test_wire_vectors.py`` checks every file.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, hpke_info, pad_plaintext, seal, signed_message
from deniable.shared.formats import FORMAT_VERSION, SUITE_ID
from deniable.shared.ids import device_signing_key, make_pseudonym, new_report_id, pseudonym_of_key
from deniable.shared.keys import encode_key, generate_keypair
from deniable.shared.mechanisms import olh_hash

OUT = Path(__file__).with_name(f"wire-v{FORMAT_VERSION}.json")
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
DEVICE_SECRETS = [bytes.fromhex(f"{i:02x}" * 32) for i in (0x11, 0x22, 0x33)]


def campaigns(public_key: bytes) -> dict[str, CampaignConfig]:
    """One campaign per mechanism plus a central one, small enough to read by eye."""
    common = {"public_key": public_key}
    return {
        "binary-rr": CampaignConfig.create(
            id="smoking-2026",
            question="Did you smoke in the last 30 days?",
            categories=["no", "yes"],
            epsilon=1.0,
            mechanism="binary-rr",
            group_fields=["country"],
            group_values={"country": ["NL", "DE", "FR"]},
            **common,
        ),
        "grr": CampaignConfig.create(
            id="commute-mode",
            question="How did you get to work today?",
            categories=["walk", "bike", "car", "bus", "train"],
            epsilon=2.0,
            mechanism="grr",
            group_fields=["country", "age-band"],
            group_values={"age-band": ["18-34", "35-64", "65+"]},
            **common,
        ),
        "oue": CampaignConfig.create(
            id="app-crash-screen",
            question="Which screen were you on when the app crashed?",
            categories=[f"screen-{i}" for i in range(10)],
            epsilon=1.0,
            mechanism="oue",
            **common,
        ),
        "olh": CampaignConfig.create(
            id="favourite-emoji",
            question="Your most used emoji this week?",
            categories=["😀", "😂", "❤️", "👍", "🙏", "😭", "🔥", "🎉", "🤔", "😊", "✨", "👀"],
            epsilon=2.0,
            mechanism="olh",
            group_fields=["platform"],
            **common,
        ),
        "central": CampaignConfig.create(
            id="salary-band",
            question="Which band is your gross yearly salary in?",
            categories=["<30k", "30-60k", "60-100k", ">100k"],
            epsilon=0.5,
            trust_model="central",
            budget=2.0,
            adjacency="replace",
            group_fields=["country"],
            group_values={"country": ["NL", "DE", "FR", "BE"]},
            **common,
        ),
    }


GROUPS = {
    (): [{}],
    ("country",): [{"country": "NL"}, {"country": "DE"}, {"country": "FR"}],
    ("country", "age-band"): [{"country": "NL", "age-band": "18-34"}, {"country": "BE", "age-band": "65+"}],
    ("platform",): [{"platform": "android"}, {"platform": "ios"}],
}


def envelope_case(config: CampaignConfig, value: int, groups: dict[str, str], device: int) -> dict[str, Any]:
    """Randomize (local) or pass (central) ``value``, seal it, and record everything needed to check it."""
    if config.trust_model == "central":
        payload = config.make_payload(value, groups)
        extra: dict[str, Any] = {}
    else:
        mechanism = config.build_mechanism()
        report = mechanism.randomize(value)
        payload = config.make_payload(report, groups)
        extra = {"support": mechanism.support(report)}
    envelope = config.seal(payload, device_secret=DEVICE_SECRETS[device])
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    assert envelope.device_key is not None
    return {
        "device_secret_hex": DEVICE_SECRETS[device].hex(),
        "device_key_hex": envelope.device_key.hex(),
        "envelope": envelope.to_json(),
        "info_hex": info.hex(),
        "plaintext": canonical_json(payload).decode("utf-8"),
        "payload": payload,
        **extra,
    }


def b64(raw: bytes) -> str:
    """base64url without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def flip(text: str, index: int) -> str:
    """Flip the lowest bit of byte ``index`` of a base64url byte string."""
    raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    raw[index] ^= 1
    return b64(bytes(raw))


def raw_seal(
    config: CampaignConfig, plaintext: bytes, *, signer: Ed25519PrivateKey | None = None, pad: bool = True,
    version: int = FORMAT_VERSION,
) -> dict[str, Any]:
    """A signed envelope around arbitrary plaintext bytes (to vector payloads ``seal`` would never produce),
    padded to the campaign's length unless ``pad`` is false; ``signer`` defaults to device 0's key."""
    signer = device_signing_key(DEVICE_SECRETS[0], config.id) if signer is None else signer
    device_key = signer.public_key().public_bytes_raw()
    rid, pseudonym = new_report_id(), pseudonym_of_key(device_key, config.id)
    info = hpke_info(config.id, version, rid, pseudonym)
    assert config.padded_length is not None
    # A payload longer than the campaign's length (wider than any valid one) is sent as it is.
    body = pad_plaintext(plaintext, max(config.padded_length, len(plaintext))) if pad else plaintext
    ct = SUITE.encrypt(body, X25519PublicKey.from_public_bytes(config.public_key_bytes), info=info)
    signature = signer.sign(signed_message(info, ct))
    return Envelope(version, rid, pseudonym, ct, device_key, signature).to_json()


def main() -> None:
    private, public = generate_keypair()
    configs = campaigns(public)
    cases: list[dict[str, Any]] = []
    for name, config in configs.items():
        groups = GROUPS[config.group_fields]
        envelopes = [
            envelope_case(config, value % config.k, groups[i % len(groups)], i % len(DEVICE_SECRETS))
            for i, value in enumerate((0, 1, config.k - 1))
        ]
        cases.append(
            {
                "name": name,
                "config": config.to_json(),
                "fingerprint": config.pinned_fingerprint(),
                "padded_length": config.padded_length,
                "envelopes": envelopes,
            }
        )

    good = cases[0]["envelopes"][0]["envelope"]
    smoking = configs["binary-rr"]
    undecryptable = [
        {
            "name": "sealed to another key",
            "campaign_id": "smoking-2026",
            "envelope": seal(
                good_payload(cases),
                campaign_id="smoking-2026",
                public_key=generate_keypair()[1],
                device_secret=DEVICE_SECRETS[0],
                padded_length=smoking.padded_length,
            ).to_json(),
        },
    ]
    attacker = Ed25519PrivateKey.generate()
    forged_ct = seal(
        {"groups": {"country": "NL"}, "report": 1},
        campaign_id="smoking-2026",
        public_key=smoking.public_key_bytes,
        device_secret=DEVICE_SECRETS[2],
        padded_length=smoking.padded_length,
    ).ciphertext
    forged_info = hpke_info("smoking-2026", FORMAT_VERSION, good["report_id"], good["pseudonym"])
    forged = [
        {"name": "bit flipped in the AEAD body", "campaign_id": "smoking-2026",
         "envelope": {**good, "ct": flip(good["ct"], 40)}},
        {"name": "bit flipped in the tag", "campaign_id": "smoking-2026",
         "envelope": {**good, "ct": flip(good["ct"], -1)}},
        {"name": "bit flipped in enc", "campaign_id": "smoking-2026", "envelope": {**good, "ct": flip(good["ct"], 0)}},
        {"name": "bit flipped in the signature", "campaign_id": "smoking-2026",
         "envelope": {**good, "sig": flip(good["sig"], 5)}},
        {"name": "opened as another campaign", "campaign_id": "commute-mode", "envelope": good},
        {"name": "replayed under a fresh report id", "campaign_id": "smoking-2026",
         "envelope": {**good, "report_id": new_report_id()}},
        {"name": "replayed under another pseudonym", "campaign_id": "smoking-2026",
         "envelope": {**good, "pseudonym": make_pseudonym(DEVICE_SECRETS[2], "smoking-2026")}},
        {"name": "another device's key under this pseudonym", "campaign_id": "smoking-2026",
         "envelope": {**good, "device_key": encode_key(device_signing_key(DEVICE_SECRETS[2], "smoking-2026")
                                                       .public_key().public_bytes_raw())}},
        {
            "name": "another answer sealed under the captured pseudonym, signed by the attacker's key",
            "campaign_id": "smoking-2026",
            "envelope": {
                **good,
                "ct": b64(forged_ct),
                "device_key": b64(attacker.public_key().public_bytes_raw()),
                "sig": b64(attacker.sign(signed_message(forged_info, forged_ct))),
            },
        },
    ]  # fmt: skip
    malformed = [
        {"name": "unknown version", "envelope": {**good, "v": 3}, "field": "'v'"},
        {"name": "version as a string", "envelope": {**good, "v": "2"}, "field": "'v'"},
        {
            "name": "version 1 keys under version 2",
            "envelope": {k: v for k, v in good.items() if k not in ("device_key", "sig")},
            "field": "'device_key'",
        },
        {
            "name": "short device key",
            "envelope": {**good, "device_key": good["device_key"][:-3]},
            "field": "'device_key'",
        },
        {"name": "short signature", "envelope": {**good, "sig": good["sig"][:-3]}, "field": "'sig'"},
        {"name": "padded base64", "envelope": {**good, "ct": good["ct"] + "="}, "field": "ct"},
        {
            "name": "standard base64 alphabet",
            "envelope": {**good, "ct": good["ct"][:-2] + "+/"},
            "field": "ct",
        },
        {
            "name": "ciphertext shorter than enc + tag",
            "envelope": {**good, "ct": good["ct"][:60]},
            "field": "ct",
        },
        {
            "name": "uppercase report id",
            "envelope": {**good, "report_id": good["report_id"].upper()},
            "field": "report_id",
        },
        {
            "name": "short pseudonym",
            "envelope": {**good, "pseudonym": good["pseudonym"][:-2]},
            "field": "pseudonym",
        },
        {"name": "extra key", "envelope": {**good, "ip": "127.0.0.1"}, "field": "ip"},
        {
            "name": "missing key",
            "envelope": {k: v for k, v in good.items() if k != "pseudonym"},
            "field": "pseudonym",
        },
    ]
    by_name = {case["name"]: configs[case["name"]] for case in cases}
    bad_payloads = [
        ("binary-rr", b'{"groups":{"country":"NL"},"report":2}', "report outside {0, 1}"),
        ("binary-rr", b'{"groups":{},"report":1}', "missing group field"),
        ("binary-rr", b'{"groups":{"country":"NL","city":"Delft"},"report":1}', "extra group field"),
        ("grr", b'{"groups":{"age-band":"18-34","country":"NL"},"report":5}', "report outside [0, 5)"),
        ("oue", b'{"groups":{},"report":"0400"}', "oue report with 4 hex digits for k = 10"),
        ("oue", b'{"groups":{},"report":"400"}', "oue report setting bit 10 >= k"),
        ("olh", b'{"groups":{"platform":"ios"},"report":{"seed":"00000000000000ff","y":8}}', "olh y >= g"),
        ("central", b'{"groups":{"country":"NL"},"value":4}', "central value outside [0, 4)"),
        ("central", b'{"groups":{"country":"NL"},"report":1}', "local payload in a central campaign"),
        ("grr", b"[3]", "payload not an object"),
        ("grr", b'{"groups":{},"report":1,"report":2}', "duplicate key"),
        ("binary-rr", b'{"groups":{"country":"NL"},"report":1}\x00\x01', "non-zero byte in the padding"),
    ]
    rejected_payloads = [
        {
            "name": why,
            "campaign": name,
            "envelope": raw_seal(by_name[name], plaintext),
            "plaintext_hex": plaintext.hex(),
        }
        for name, plaintext, why in bad_payloads
    ]
    rejected_payloads.append(unpadded_case(by_name["grr"]))
    olh_examples = [
        {"seed": seed, "g": g, "hashes": [olh_hash(int(seed, 16), v, g) for v in range(k)]}
        for seed, g, k in (
            ("9e3779b97f4a7c15", 8, 12),
            ("0123456789abcdef", 8, 12),
            ("ffffffffffffffff", 4, 6),
            ("0000000100000002", 21, 5),
        )
    ]
    vectors = {
        "description": f"deniable wire format v{FORMAT_VERSION} known-answer vectors; see docs/wire-format.md",
        "format_version": FORMAT_VERSION,
        "suite": SUITE_ID,
        "keypair": {
            "private_key_hex": private.hex(),
            "public_key_hex": public.hex(),
            "public_key": encode_key(public),
        },
        "campaigns": cases,
        "undecryptable": undecryptable,
        "forged": forged,
        "malformed_envelopes": malformed,
        "rejected_payloads": rejected_payloads,
        "olh_hash": olh_examples,
    }
    OUT.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


def unpadded_case(config: CampaignConfig) -> dict[str, Any]:
    """A correctly signed envelope whose valid payload was not padded to the campaign's length."""
    unpadded = b'{"groups":{"age-band":"65+","country":"NL"},"report":1}'
    return {
        "name": "not padded to the campaign's length",
        "campaign": "grr",
        "envelope": raw_seal(config, unpadded, pad=False),
        "plaintext_hex": unpadded.hex(),
    }


def good_payload(cases: list[dict[str, Any]]) -> dict[str, Any]:
    payload: dict[str, Any] = cases[0]["envelopes"][0]["payload"]
    return payload




# ---------------------------------------------------------------------------------------------- surveys (v3)
SURVEY_OUT = Path(__file__).with_name("wire-v3.json")


def survey_campaigns(public_key: bytes) -> dict[str, CampaignConfig]:
    """Surveys of every kind, split and trust model, small enough to read by eye."""
    common: dict[str, Any] = {"public_key": public_key}
    return {
        "per-question": CampaignConfig.create_survey(
            id="health-2026",
            title="Health survey 2026",
            questions=[
                {"id": "smoke", "text": "Did you smoke in the last 30 days?", "kind": "choice",
                 "categories": ["no", "yes"], "share": 2},
                {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99], "share": 1},
                {"id": "apps", "text": "Which apps did you use today?", "kind": "multi",
                 "options": ["mail", "maps", "news", "chat", "music"], "max_selected": 3, "optional": True,
                 "share": 1},
            ],
            epsilon=2.0,
            split="per_question",
            group_fields=["country"],
            group_values={"country": ["NL", "DE", "FR"]},
            **common,
        ),
        "sampling": CampaignConfig.create_survey(
            id="app-feedback",
            title="App feedback",
            questions=[
                {"id": "screen", "text": "Which screen do you use most?", "kind": "choice",
                 "categories": [f"screen-{i}" for i in range(10)], "mechanism": "oue"},
                {"id": "emoji", "text": "Your most used emoji?", "kind": "choice",
                 "categories": ["😀", "😂", "❤️", "👍", "🙏", "😭", "🔥", "🎉", "🤔", "😊", "✨", "👀"],
                 "mechanism": "olh"},
                {"id": "minutes", "text": "Minutes in the app today?", "kind": "number", "range": [0, 240],
                 "steps": 48, "mechanism": "piecewise", "optional": True},
                {"id": "rating", "text": "Rate the app from 1 to 5", "kind": "number", "range": [1, 5],
                 "mechanism": "duchi"},
                {"id": "features", "text": "Which features did you use?", "kind": "multi",
                 "options": ["search", "share", "sync", "export", "themes", "offline"], "max_selected": 6,
                 "mechanism": "bitvector"},
                {"id": "income", "text": "Yearly income (EUR)?", "kind": "choice",
                 "bins": [0, 20000, 40000, 80000, 1000000], "clip": True, "optional": True},
            ],
            epsilon=1.0,
            split="sampling",
            **common,
        ),
        "recurring": CampaignConfig.create_survey(
            id="weekly-mood",
            title="Weekly mood",
            questions=[
                {"id": "mood", "text": "How was your week?", "kind": "choice",
                 "categories": ["bad", "ok", "good"], "mechanism": "grr"},
                {"id": "sleep", "text": "Hours of sleep per night?", "kind": "number", "range": [0, 12],
                 "steps": 24, "mechanism": "hybrid"},
            ],
            epsilon=1.0,
            split="per_question",
            recurring=True,
            group_fields=["platform"],
            **common,
        ),
        "central": CampaignConfig.create_survey(
            id="salary-survey",
            title="Salary survey",
            questions=[
                {"id": "band", "text": "Which band is your salary in?", "kind": "choice",
                 "categories": ["<30k", "30-60k", "60-100k", ">100k"]},
                {"id": "benefits", "text": "Which benefits do you get?", "kind": "multi",
                 "options": ["car", "phone", "pension", "gym"], "max_selected": 4, "optional": True},
                {"id": "hours", "text": "Hours worked per week?", "kind": "number", "range": [0, 80]},
            ],
            epsilon=0.5,
            trust_model="central",
            budget=2.0,
            group_fields=["country"],
            group_values={"country": ["NL", "DE", "FR", "BE"]},
            **common,
        ),
        "one-number": CampaignConfig.create_survey(
            id="commute-minutes",
            title="Commute",
            questions=[{"id": "minutes", "text": "Minutes to work today?", "kind": "number", "range": [0, 120],
                        "clip": True}],
            epsilon=1.5,
            **common,
        ),
    }  # fmt: skip


SURVEY_ANSWERS: dict[str, list[tuple[dict[str, Any], dict[str, str]]]] = {
    "per-question": [
        ({"smoke": "yes", "age": 37, "apps": ["mail", "maps"]}, {"country": "NL"}),
        ({"smoke": "no", "age": 64.5}, {"country": "DE"}),  # apps skipped
        ({"smoke": "no", "age": 99, "apps": []}, {"country": "FR"}),
    ],
    "sampling": [
        ({"screen": "screen-3", "emoji": "🔥", "minutes": 42, "rating": 5, "features": ["sync"], "income": 52000},
         {}),
        ({"screen": "screen-9", "emoji": "😀", "rating": 1, "features": []}, {}),
        ({"screen": "screen-0", "emoji": "👀", "minutes": 240, "rating": 3.5,
          "features": ["search", "share", "sync", "export", "themes", "offline"], "income": 2e6}, {}),
    ],
    "recurring": [
        ({"mood": "good", "sleep": 7.5}, {"platform": "android"}),
        ({"mood": "bad", "sleep": 0}, {"platform": "ios"}),
    ],
    "central": [
        ({"band": "60-100k", "benefits": ["phone", "pension"], "hours": 38}, {"country": "NL"}),
        ({"band": "<30k", "hours": 80}, {"country": "BE"}),
    ],
    "one-number": [({"minutes": 25}, {}), ({"minutes": 300}, {})],  # 300 is clipped to 120 on the device
}  # fmt: skip


def decoded_reports(config: CampaignConfig, answers: dict[str, Any]) -> dict[str, Any]:
    """What each answered question's report counts for: the support (choice, multi), the unbiased value t of
    the mean as an exact fraction (number), or the central value."""
    out: dict[str, Any] = {}
    for qid, report in answers.items():
        question = config.question_by_id(qid)
        if report is None:
            out[qid] = None
        elif question.central:
            out[qid] = {"value": list(report) if isinstance(report, tuple) else report}
        elif question.kind == "number":
            t = question.build_mechanism().value_of_report(report)
            out[qid] = {"t": f"{t.numerator}/{t.denominator}"}
        else:
            out[qid] = {"support": question.build_mechanism().support(report)}
    return out


def survey_envelope_case(config: CampaignConfig, answers: dict[str, Any], groups: dict[str, str], device: int,
                         round: str | None) -> dict[str, Any]:  # fmt: skip
    """One device's answers derived exactly as ``Client.submit`` derives them (deterministic in the secret),
    sealed; records the inputs, the derivation and what the payload decodes to."""
    from deniable.client.memo import (
        drawn_question,
        survey_one_shot,
        survey_permanent,
        survey_round_report_id,
    )
    from deniable.client.report import normalize_answers

    secret = DEVICE_SECRETS[device]
    normalized = normalize_answers(config, answers)
    drawn = drawn_question(config, secret)
    if round is None:
        report_id, reports = survey_one_shot(config, secret, normalized)
        permanent: dict[str, str] = {}
    else:
        asked = range(len(config.questions)) if drawn is None else (drawn,)
        reports, permanent = {}, {}
        for i in asked:
            qid = config.questions[i].id
            pid, report = survey_permanent(config, secret, i, normalized[qid])
            reports[qid] = None if normalized[qid] is None else report
            if normalized[qid] is not None:
                permanent[qid] = pid
        report_id = survey_round_report_id(config, secret, normalized, round)
    payload = config.make_payload(reports, groups, round)
    envelope = config.seal(payload, device_secret=secret, report_id=report_id)
    info = hpke_info(config.id, envelope.version, envelope.report_id, envelope.pseudonym)
    assert envelope.device_key is not None
    case: dict[str, Any] = {
        "device_secret_hex": secret.hex(),
        "answers": answers,
        "normalized": {k: list(v) if isinstance(v, tuple) else v for k, v in normalized.items()},
        "drawn": drawn,
        "device_key_hex": envelope.device_key.hex(),
        "envelope": envelope.to_json(),
        "info_hex": info.hex(),
        "plaintext": canonical_json(payload).decode("utf-8"),
        "payload": payload,
        "decoded": decoded_reports(config, config.decode(payload).answers),
    }
    if round is not None:
        case["round"] = round
        case["permanent_ids"] = permanent
    return case


def survey_main() -> None:
    private, public = generate_keypair()
    configs = survey_campaigns(public)
    cases = []
    for name, config in configs.items():
        envelopes = [
            survey_envelope_case(config, answers, groups, i % len(DEVICE_SECRETS),
                                 "2026-w49" if config.recurring else None)
            for i, (answers, groups) in enumerate(SURVEY_ANSWERS[name])
        ]  # fmt: skip
        cases.append({"name": name, "config": config.to_json(), "fingerprint": config.pinned_fingerprint(),
                      "padded_length": config.padded_length, "envelopes": envelopes})  # fmt: skip
    health, feedback = configs["per-question"], configs["sampling"]
    bad_payloads = [
        ("per-question", b'{"answers":{"age":1,"apps":null},"groups":{"country":"NL"}}', "a question missing"),
        ("per-question", b'{"answers":{"age":1,"apps":null,"smoke":1,"zzz":0},"groups":{"country":"NL"}}',
         "an unknown question"),
        ("per-question", b'{"answers":{"age":1,"apps":null,"smoke":null},"groups":{"country":"NL"}}',
         "null (skipped) for a required question"),
        ("per-question", b'{"answers":{"age":1,"apps":8,"smoke":1},"groups":{"country":"NL"}}',
         "padding report outside [0, k + m)"),
        ("per-question", b'{"answers":{"age":259,"apps":0,"smoke":1},"groups":{"country":"NL"}}',
         "hybrid report outside [0, lattice + 3)"),
        ("per-question", b'{"answers":{"age":1.0,"apps":0,"smoke":1},"groups":{"country":"NL"}}',
         "number report not an integer"),
        ("per-question", b'{"groups":{"country":"NL"},"report":1}', "a one-question payload in a survey"),
        ("per-question", b'{"answers":{"age":1,"apps":0,"smoke":1},"groups":{"country":"XX"}}',
         "undeclared group value"),
        ("sampling", b'{"answers":{"rating":0,"screen":"001"},"groups":{}}', "two answers in a sampling survey"),
        ("sampling", b'{"answers":{},"groups":{}}', "no answer in a sampling survey"),
        ("sampling", b'{"answers":{"features":"7f"},"groups":{}}', "bit vector setting bit 6 >= k"),
        ("sampling", b'{"answers":{"rating":null},"groups":{}}', "null for a required question"),
        ("central", b'{"groups":{"country":"NL"},"values":{"band":1,"benefits":[2,1],"hours":38}}',
         "multi value not increasing"),
        ("central", b'{"groups":{"country":"NL"},"values":{"band":1,"benefits":null,"hours":81}}',
         "number value outside the grid [0, 80]"),
        ("central", b'{"answers":{"band":1,"benefits":null,"hours":8},"groups":{"country":"NL"}}',
         "local answers in a central survey"),
        ("recurring", b'{"answers":{"mood":1,"sleep":3},"groups":{"platform":"ios"}}', "missing round"),
    ]
    rejected = [
        {"name": why, "campaign": name, "plaintext_hex": plaintext.hex(),
         "envelope": raw_seal(configs[name], plaintext, version=configs[name].envelope_version)}
        for name, plaintext, why in bad_payloads
    ]  # fmt: skip
    good = cases[0]["envelopes"][0]["envelope"]
    forged = [
        {"name": "a survey's envelope relabelled version 1", "campaign_id": health.id,
         "envelope": {k: v for k, v in {**good, "v": 1}.items() if k not in ("device_key", "sig")}},
        {"name": "opened as another survey", "campaign_id": feedback.id, "envelope": good},
    ]  # fmt: skip
    vectors = {
        "description": "deniable wire format v3 (surveys) known-answer vectors; see docs/wire-format.md",
        "format_version": 3,
        "suite": SUITE_ID,
        "keypair": {"private_key_hex": private.hex(), "public_key_hex": public.hex(), "public_key": encode_key(public)},
        "campaigns": cases,
        "forged": forged,
        "rejected_payloads": rejected,
    }
    SURVEY_OUT.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {SURVEY_OUT}")


if __name__ == "__main__":
    import sys

    # ``--surveys`` writes only wire-v3.json; the v1 and v2 files stay as they were recorded.
    survey_main() if sys.argv[1:] == ["--surveys"] else main()
