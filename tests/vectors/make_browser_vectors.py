"""Generate ``tests/vectors/browser-v1.json``: what the device computes from a descriptor, before HPKE (run by hand).

    .venv/bin/python tests/vectors/make_browser_vectors.py

Deterministic (no CSPRNG, no HPKE: the ephemeral key is the only randomness of an envelope), so a rerun
writes the same file unless the Python code changed; ``tests/system/test_browser_vectors.py`` recomputes it from
today's code and ``js/test/`` checks the JavaScript client against it. It holds:

- ``one_shot``: for each campaign of ``wire-v2.json`` (and a recurring and a version-1 one), device
  secrets and answers: the one-shot report id, the report, the canonical plaintext (before padding), the
  padded length, the pseudonym and device key, and the answer tag (:mod:`deniable.client.memo`);
- ``permanent``: the permanent randomized responses of a recurring campaign and the report ids of rounds;
- ``invalid_descriptors``: descriptors the device must refuse, each with the error code and the exact
  message of ``CampaignConfig.from_json`` (the JS client gives the same code and message).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from deniable.client.drbg import HmacDrbg
from deniable.client.memo import answer_tag, one_shot_answer, permanent_response, round_report_id
from deniable.shared.canonical_json import canonical_json
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import DeniableError
from deniable.shared.ids import device_public_key, make_pseudonym
from deniable.shared.mechanisms.mean import NumberRange, mean_mechanism_from_name
from deniable.shared.mechanisms.sets import set_mechanism_from_name

HERE = Path(__file__).parent
OUT = HERE / "browser-v1.json"
SECRETS = ("11" * 32, "a5" * 32, bytes(range(32)).hex())


def _campaigns() -> list[dict[str, Any]]:
    wire = json.loads((HERE / "wire-v2.json").read_text(encoding="utf-8"))
    configs = [c["config"] for c in wire["campaigns"]]
    recurring = copy.deepcopy(configs[1])
    recurring.update(id="weekly-mood", recurring=True)
    v1 = json.loads((HERE / "wire-v1.json").read_text(encoding="utf-8"))["campaigns"][2]["config"]
    return [*configs, recurring, v1]


def _groups(config: CampaignConfig, i: int) -> dict[str, str]:
    groups = {}
    for name in config.group_fields:
        declared = config.group_values.get(name)
        groups[name] = declared[i % len(declared)] if declared else ["nl", "d\u00e9", "usa \u2603"][i % 3]
    return groups


def one_shot_cases() -> list[dict[str, Any]]:
    cases = []
    for obj in _campaigns():
        config = CampaignConfig.from_json(obj)
        for s, secret_hex in enumerate(SECRETS):
            secret = bytes.fromhex(secret_hex)
            for index in sorted({0, config.k - 1, (s * 7) % config.k}):
                groups = _groups(config, index + s)
                round_ = "2026-w48" if config.recurring else None
                if config.recurring:
                    report_id, report = permanent_response(config.build_mechanism(), secret, config.id, index)
                    report_id = round_report_id(secret, config.id, index, "2026-w48")
                else:
                    report_id, report = one_shot_answer(config, secret, index)
                payload = config.make_payload(report, groups, round_)
                case: dict[str, Any] = {
                    "config": obj,
                    "device_secret_hex": secret_hex,
                    "index": index,
                    "groups": groups,
                    "round": round_,
                    "report_id": report_id,
                    "plaintext": canonical_json(payload).decode("utf-8"),
                    "padded_length": config.padded_length,
                    "pseudonym": make_pseudonym(secret, config.id, config.format_version),
                    "answer_tag": answer_tag(secret, config.id, index, groups),
                }
                if config.format_version >= 2:
                    case["device_key_hex"] = device_public_key(secret, config.id).hex()
                cases.append(case)
    return cases


def permanent_cases() -> list[dict[str, Any]]:
    config = CampaignConfig.from_json(_campaigns()[5])
    out = []
    for secret_hex in SECRETS:
        secret = bytes.fromhex(secret_hex)
        for index in range(config.k):
            report_id, report = permanent_response(config.build_mechanism(), secret, config.id, index)
            out.append({
                "config": config.to_json(),
                "device_secret_hex": secret_hex,
                "index": index,
                "report_id": report_id,
                "report": config.build_mechanism().encode_report(report),
                "rounds": {r: round_report_id(secret, config.id, index, r) for r in ("2026-11-29", "w48")},
            })  # fmt: skip
    return out


def survey_mechanism_cases() -> list[dict[str, Any]]:
    """The set and mean randomizers (and the grid rounding) driven by an HmacDrbg, as a device runs them."""
    out: list[dict[str, Any]] = []

    def drbg(label: str) -> HmacDrbg:
        return HmacDrbg(bytes(range(32)), label.encode(), b"deniable/test/survey-mechanisms")

    for name, epsilon, k, m in (("bitvector", 1.0, 6, 2), ("bitvector", 3.5, 11, 4), ("padding", 1.0, 6, 2),
                                ("padding", 0.7, 9, 3), ("padding", 2.0, 4, 1)):  # fmt: skip
        mechanism = set_mechanism_from_name(name, epsilon=epsilon, k=k, m=m)
        for selected in ([], [0], sorted({1, k - 1})[:m]):
            source = drbg(f"{name}-{epsilon}-{k}-{m}-{selected}")
            reports = [mechanism.encode_report(mechanism.randomize(selected, randbelow=source.randbelow))
                       for _ in range(12)]  # fmt: skip
            label = f"{name}-{epsilon}-{k}-{m}-{selected}"
            out.append({"kind": "multi", "mechanism": name, "epsilon": epsilon, "k": k, "m": m, "label": label,
                        "input": selected, "outputs": reports})  # fmt: skip
    means = (("duchi", 1.0, 10, 256), ("piecewise", 2.0, 10, 256), ("piecewise", 0.5, 7, 16),
             ("hybrid", 1.5, 4, 32), ("hybrid", 0.3, 4, 8))  # fmt: skip
    for name, epsilon, steps, lattice in means:
        mechanism = mean_mechanism_from_name(name, epsilon=epsilon, steps=steps, lattice=lattice)
        for j in sorted({0, steps // 2, steps}):
            source = drbg(f"{name}-{epsilon}-{steps}-{lattice}-{j}")
            reports = [mechanism.randomize(j, randbelow=source.randbelow) for _ in range(12)]
            out.append({"kind": "number", "mechanism": name, "epsilon": epsilon, "steps": steps,
                        "lattice": lattice, "label": f"{name}-{epsilon}-{steps}-{lattice}-{j}", "input": j,
                        "outputs": reports})  # fmt: skip
    for lo, hi, steps, value in ((0, 10, 10, 3.25), (-1.5, 2.5, 8, 0.1), (18, 99, 81, 42), (0, 1, 3, 1.0)):
        grid = NumberRange(lo, hi, steps)
        source = drbg(f"grid-{lo}-{hi}-{steps}-{value}")
        indices = [grid.grid_index(value, randbelow=source.randbelow) for _ in range(12)]
        out.append({"kind": "grid", "lo": lo, "hi": hi, "steps": steps, "label": f"grid-{lo}-{hi}-{steps}-{value}",
                    "input": value, "outputs": indices})  # fmt: skip
    return out


def _bad(name: str, change: dict[str, Any], base: int = 0, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    obj = copy.deepcopy(_campaigns()[base])
    for key in drop:
        obj.pop(key, None)
    obj.update(change)
    return {"name": name, "descriptor": obj}


def _bad_surveys() -> list[dict[str, Any]]:
    """Survey descriptors (format 3) the device must refuse: one change each to the per-question vector."""
    base = json.loads((HERE / "wire-v3.json").read_text(encoding="utf-8"))["campaigns"][0]["config"]

    def bad(name: str, change: Any) -> dict[str, Any]:
        obj = copy.deepcopy(base)
        change(obj)
        return {"name": f"survey: {name}", "descriptor": obj}

    SAMPLING = {"mode": "sampling", "requested": "sampling", "reason": "requested"}

    def question(i: int, **fields: Any) -> Any:
        return lambda obj: obj["questions"][i].update(fields)

    return [
        bad("missing title", lambda obj: obj.pop("title")),
        bad("a top-level question key", lambda obj: obj.update(question="q?")),
        bad("no questions", lambda obj: obj.update(questions=[])),
        bad("unknown kind", question(0, kind="ranking")),
        bad("epsilon not the share's", question(1, epsilon=0.6)),
        bad("share out of range", question(1, share=0)),
        bad("optional written false", question(0, optional=False)),
        bad("binary-rr with 3 categories", question(0, categories=["a", "b", "c"], params={"k": 3})),
        bad("max_selected above the options", question(2, max_selected=6)),
        bad("number range reversed", question(1, range=[99, 18])),
        bad("wrong params", question(2, params={"k": 5, "m": 2})),
        bad("mechanism of another kind", question(2, mechanism="grr")),
        bad("duplicate question ids", lambda obj: obj["questions"][1].update(id="smoke")),
        bad("split unknown", lambda obj: obj.update(split={"mode": "all", "requested": "all", "reason": "x"})),
        bad("sampling with shares", lambda obj: obj.update(split=SAMPLING)),
    ]


def _bad_admissions() -> list[dict[str, Any]]:
    """Descriptors with an ``admission`` object the device must refuse (the issuer key of the token vectors)."""
    issuer = json.loads((HERE / "admission-tokens-v1.json").read_text(encoding="utf-8"))["issuer_key"]
    good = {"type": "privacy-pass-blind-rsa", "token_type": 2, "issuer_key": issuer, "tokens_per_account": 5}
    ed25519_spki = "MCowBQYDK2VwAyEA" + "A" * 43  # an Ed25519 key: DER, but not RSA
    return [
        _bad(f"admission: {name}", {"admission": {**good, **change}})
        for name, change in [
            ("issuer key not DER", {"issuer_key": "AAAA"}),
            ("issuer key not RSA", {"issuer_key": ed25519_spki}),
            ("issuer key padded", {"issuer_key": issuer + "="}),
            ("no tokens per account", {"tokens_per_account": 0}),
            ("tokens per account a boolean", {"tokens_per_account": True}),
            ("tokens per account too many", {"tokens_per_account": 10_001}),
            ("another token type", {"token_type": 1}),
        ]
    ] + [_bad("admission: a key missing", {"admission": {k: v for k, v in good.items() if k != "type"}})]


def invalid_cases() -> list[dict[str, Any]]:
    cases = [
        _bad("epsilon too large", {"epsilon": 11}),
        _bad("epsilon a string", {"epsilon": "1"}),
        _bad("epsilon a boolean", {"epsilon": True}),
        _bad("epsilon too small", {"epsilon": 0.0001}),
        _bad("unknown key", {"extra": 1}),
        _bad("missing suite", {}, drop=("suite",)),
        _bad("id not a slug", {"id": "Smoking"}),
        _bad("question empty", {"question": ""}),
        _bad("one category", {"categories": ["only"]}),
        _bad("duplicate categories", {"categories": ["no", "no"]}),
        _bad("categories not a list", {"categories": "no,yes"}),
        _bad("unknown mechanism", {"mechanism": "laplace"}),
        _bad("binary-rr with 3 categories", {"categories": ["a", "b", "c"], "params": {"k": 3}}),
        _bad("params k wrong", {"params": {"k": 3}}),
        _bad("params extra key", {"params": {"k": 2, "g": 3}}),
        _bad("format version 9", {"format_version": 9}),
        _bad("format version boolean", {"format_version": True}),
        _bad("unknown suite", {"suite": "X25519-HKDF-SHA256-AES128GCM"}),
        _bad("status unknown", {"status": "paused"}),
        _bad("trust model unknown", {"trust_model": "federated"}),
        _bad("public key short", {"public_key": "AAAA"}),
        _bad("public key padded", {"public_key": "3vB8Qsei9OziS0VwV9I1Ox9SwEuERNm8iAOeYysuKg8="}),
        _bad("public key small order", {"public_key": "A" * 43}),
        _bad("budget on a local campaign", {"budget": 2.0}),
        _bad("recurring not a boolean", {"recurring": "yes"}),
        _bad("group value undeclared field", {"group_values": {"city": ["x"]}}),
        _bad("group fields not slugs", {"group_fields": ["Country"], "group_values": {}}),
        _bad("olh g wrong", {"params": {"k": 12, "g": 5}}, base=3),
        _bad("central without budget", {"budget": None}, base=4),
        _bad("central budget below epsilon", {"budget": 0.1}, base=4),
        _bad("central recurring", {"recurring": True}, base=4),
        _bad("central with a mechanism", {"mechanism": "grr"}, base=4),
        _bad("central adjacency unknown", {"adjacency": "swap"}, base=4),
        {"name": "not an object", "descriptor": ["id"]},
        *_bad_admissions(),
        *_bad_surveys(),
    ]
    for case in cases:
        try:
            CampaignConfig.from_json(case["descriptor"])
        except DeniableError as exc:
            case["code"], case["message"] = exc.code, str(exc)
        else:  # pragma: no cover - a vector that Python accepts is a mistake in this file
            raise AssertionError(f"{case['name']}: Python accepts it")
    # a float written where an integer is required: Python's json keeps 2.0 a float; the text is the vector
    text = json.dumps(_campaigns()[0]).replace('"k": 2', '"k": 2.0')
    try:
        CampaignConfig.from_json(json.loads(text))
    except DeniableError as exc:
        cases.append({"name": "params k written 2.0", "text": text, "code": exc.code, "message": str(exc)})
    return cases


def build() -> dict[str, Any]:
    return {
        "description": (
            "What a device computes from a descriptor before HPKE: one-shot and permanent reports, report ids, "
            "plaintexts, pseudonyms, answer tags; and descriptors it must refuse, with Python's code and message. "
            "Made by tests/vectors/make_browser_vectors.py; checked by tests/test_browser_vectors.py and js/test/."
        ),
        "one_shot": one_shot_cases(),
        "permanent": permanent_cases(),
        "invalid_descriptors": invalid_cases(),
        "survey_mechanisms": survey_mechanism_cases(),
    }


def main() -> None:
    OUT.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
