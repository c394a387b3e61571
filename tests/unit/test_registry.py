"""A mechanism knows itself: a throwaway mechanism, defined here and nowhere else, is registered once and then
runs through the generic descriptor, payload, ingest, estimate, batch export and recount, OpenAPI, audit and
privacy-loss (trade-off) paths like the shipped ones.

``ShiftRR`` is k-ary randomized response whose wire report is a JSON *string*: the category index plus a
public ``shift`` (= k + 7, a public parameter the descriptor pins, as OLH pins g). Nothing outside this file
knows its name, wire type or parameter; if any module still listed mechanisms itself, these tests fail.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from flask import Flask
from support.reports import device_reports, seal_reports

from deniable.aggregator.api.app import create_app
from deniable.aggregator.openapi_document import document
from deniable.aggregator.store import Store
from deniable.aggregator.tools.audit import audit, auditable
from deniable.aggregator.tools.tradeoff import audit_tradeoff, exact_law
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidConfig, InvalidParameter, InvalidReport
from deniable.shared.keys import generate_keypair
from deniable.shared.mechanisms import (
    MECHANISMS,
    OLH,
    REGISTRY,
    Mechanism,
    Tally,
    mechanism_class,
    mechanism_from_name,
    mechanism_names,
    register,
    unregister,
)
from deniable.shared.mechanisms.base import ReportLayout
from deniable.shared.mechanisms.mean import DEFAULT_LATTICE, Duchi
from deniable.shared.sampling import RandBelow, randomized_response

ADMIN = {"Authorization": "Bearer " + "a" * 40}
ANALYST = {"Authorization": "Bearer " + "b" * 40}


@dataclass(frozen=True)
class ShiftRR(Mechanism[int]):
    """k-ary randomized response; the wire report is ``str(y + shift)`` with the public ``shift = k + 7``."""

    name: ClassVar[str] = "test-shift-rr"
    wire_type: ClassVar[type] = str
    wire_description: ClassVar[str] = "string of decimal digits"
    param_rules: ClassVar[dict[str, str]] = {"shift": "k + 7"}
    report_layout: ClassVar[ReportLayout] = "index"  # decoded, a report is the category index

    def public_params(self) -> dict[str, int]:
        return {"shift": self.k + 7}

    @property
    def p_star(self) -> float:
        return float(self.weight / (self.weight + self.k - 1))

    @property
    def q_star(self) -> float:
        return float(1 / (self.weight + self.k - 1))

    def randomize(self, value: int, *, randbelow: RandBelow = secrets.randbelow) -> int:
        return randomized_response(self.check_value(value), self.k, self.weight, randbelow)

    def simulate(self, values: Any, *, rng: np.random.Generator) -> Any:
        x = self._check_values(values)
        keep = rng.random(x.size) < self.p_star
        return np.where(keep, x, (x + 1 + rng.integers(0, self.k - 1, size=x.size)) % self.k)

    def output_probability(self, value: int, report: int) -> float:
        return self.p_star if self.decode_report(report) == self.check_value(value) else self.q_star

    def encode_report(self, report: int) -> str:
        return str(self.decode_report(report) + self.public_params()["shift"])

    def decode_report(self, obj: Any) -> int:
        if isinstance(obj, str) and obj.isascii() and obj.isdigit() and len(obj) <= 8:
            obj = int(obj) - self.public_params()["shift"]
        elif isinstance(obj, bool) or not isinstance(obj, Integral):
            raise InvalidReport(f"a {self.name} report must be a string of digits, got {obj!r}")
        if not 0 <= int(obj) < self.k:
            raise InvalidReport(f"a {self.name} report names no category: {obj!r}")
        return int(obj)

    def widest_report(self) -> int:
        return self.k - 1

    def support(self, report: int) -> list[int]:
        return [self.decode_report(report)]

    def _tally_simulated(self, reports: Any) -> Tally | None:
        return None  # the generic tally (support of each report) is enough here

    def split_simulated(self, simulated: Any) -> list[int]:
        return [int(y) for y in np.asarray(simulated).tolist()]

    def support_pattern_law(self) -> tuple[float, float, float, float]:
        p, q = self.p_star, self.q_star  # one category per report: 0 ∈ S and 1 ∈ S exclude each other
        return (1 - p - q, q, p, 0.0)


@contextlib.contextmanager
def registered_as(cls: type[Mechanism[Any]]) -> Iterator[None]:
    """``cls`` in the registry for the ``with`` block, and out of it afterwards whatever happens."""
    register(cls)
    try:
        yield
    finally:
        unregister(cls.name)
    assert cls.name not in MECHANISMS


@pytest.fixture(autouse=True, scope="module")
def registered() -> Iterator[None]:
    with registered_as(ShiftRR):
        yield


def names() -> list[str]:
    """Every one-choice mechanism: the shipped ones and the throwaway one (registered at test time)."""
    return [*(name for name in REGISTRY["choice"] if name != ShiftRR.name), ShiftRR.name]


def k_for(name: str, default: int = 4) -> int:
    return MECHANISMS[name].fixed_k or default


def test_the_registry_lists_it_with_its_facts() -> None:
    assert ShiftRR.name in mechanism_names("choice") and mechanism_class(ShiftRR.name) is ShiftRR
    assert mechanism_class(ShiftRR.name, "number") is None
    assert isinstance(mechanism_from_name(ShiftRR.name, epsilon=1.0, k=5), ShiftRR)
    with pytest.raises(InvalidParameter, match="already registered"):
        register(type("Impostor", (ShiftRR,), {}))


@pytest.mark.parametrize("name", ["binary-rr", "grr", "oue", "olh", ShiftRR.name])
def test_descriptor_create_fills_the_public_params_and_round_trips(name: str) -> None:
    k = k_for(name)
    config = CampaignConfig.create(id="c1", question="q?", categories=[f"c{i}" for i in range(k)], epsilon=1.0,
                                   public_key=generate_keypair()[1], mechanism=name)  # fmt: skip
    assert dict(config.params) == {"k": k, **config.build_mechanism().public_params()}
    assert CampaignConfig.from_json(config.to_json()) == config
    wrong = {**config.to_json(), "params": {**config.params, "k": k, **dict.fromkeys(config.params, 999)}}
    with pytest.raises(InvalidConfig, match=r"'params\."):
        CampaignConfig.from_json(wrong)


def test_a_wrong_public_param_names_its_rule() -> None:
    config = CampaignConfig.create(id="c1", question="q?", categories=["a", "b", "c"], epsilon=1.0,
                                   public_key=generate_keypair()[1], mechanism=ShiftRR.name)  # fmt: skip
    with pytest.raises(InvalidConfig, match=r"'params.shift' must be 10 \(k \+ 7\)"):
        CampaignConfig.from_json({**config.to_json(), "params": {"k": 3, "shift": 11}})


@pytest.mark.parametrize("name", names())
def test_payload_make_decode_and_refuse_the_wrong_json_type(name: str) -> None:
    k = k_for(name)
    config = CampaignConfig.create(id="c1", question="q?", categories=[f"c{i}" for i in range(k)], epsilon=2.0,
                                   public_key=generate_keypair()[1], mechanism=name)  # fmt: skip
    mechanism = config.build_mechanism()
    report = mechanism.randomize(1)
    payload = config.make_payload(report)
    assert isinstance(payload["report"], mechanism.wire_type)
    assert config.decode(payload).value == mechanism.decode_report(mechanism.encode_report(report))
    wrong = [] if mechanism.wire_type is not list else 0
    with pytest.raises(InvalidReport, match=f"a {name} report must be a JSON {mechanism.wire_description}"):
        config.decode({"report": wrong, "groups": {}})
    sealed = config.seal(payload, device_secret=bytes(32))
    assert len(sealed.ciphertext) == 48 + (config.padded_length or 0)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    data_dir = tmp_path_factory.mktemp("registry")
    app = create_app({"DATA_DIR": str(data_dir), "ADMIN_TOKEN": "a" * 40, "ANALYST_TOKEN": "b" * 40})
    app.config["TEST_DATA_DIR"] = data_dir
    return app


@pytest.mark.parametrize("name", names())
def test_ingest_estimate_export_and_recount_through_the_service(app: Flask, name: str, tmp_path: Path) -> None:
    """Create a campaign with the mechanism, post simulated devices' sealed reports, read the estimate:
    every count within 5 standard errors of the truth (fixed seed); then export the stored reports to
    Parquet columns (the mechanism's ``report_layout``) and recount them with the batch kernel: the tally
    of the reports sent, exactly."""
    http = app.test_client()
    k = k_for(name)
    cid = f"reg-{name}"
    body = {"id": cid, "question": "q?", "categories": [f"c{i}" for i in range(k)], "epsilon": 2.0,
            "mechanism": name}  # fmt: skip
    created = http.post("/api/v1/campaigns", json=body, headers=ADMIN)
    assert created.status_code == 201, created.get_json()
    config = CampaignConfig.from_json(created.get_json())
    rng = np.random.default_rng(7)
    values = rng.integers(0, k, size=600)
    mechanism = config.build_mechanism()
    reports = device_reports(mechanism, mechanism.simulate(values, rng=rng))
    posted = http.post(f"/api/v1/campaigns/{cid}/reports", json={"reports": seal_reports(config, reports, rng=rng)})
    assert posted.status_code == 200 and posted.get_json()["accepted"] == 600, posted.get_json()
    estimate = http.get(f"/api/v1/campaigns/{cid}/estimate", headers=ANALYST).get_json()
    assert estimate["n"] == 600 and estimate["mechanism"] == name
    truth = np.bincount(values, minlength=k)
    for row, true in zip(estimate["categories"], truth, strict=True):
        assert abs(row["count"] - true) <= 5 * row["stderr"], (row, true)

    import pyarrow.parquet as pq

    from deniable.aggregator.batch.export import export_campaign
    from deniable.aggregator.batch.kernel import Plan, tally_table

    summary = export_campaign(Store(app.config["TEST_DATA_DIR"] / "deniable.sqlite3"), cid, tmp_path / "out",
                              rows_per_file=250)  # fmt: skip
    plan = Plan(descriptor=config.to_json(), check=False)
    parts = [tally_table(pq.read_table(tmp_path / "out" / f), plan)["cells"][()] for f in summary.files]
    assert len(parts) == 3 and sum(parts, Tally.zero(k)) == mechanism.tally(reports)


@dataclass(frozen=True)
class RenamedOLH(OLH):
    """OLH under another wire name: the batch columns must follow its layout, not its name."""

    name: ClassVar[str] = "test-renamed-olh"


def test_batch_columns_follow_the_declared_layout_not_the_name() -> None:
    import pyarrow as pa

    from deniable.aggregator.batch.columns import arrow_fields, to_columns, to_simulated

    with registered_as(RenamedOLH):
        mechanism = mechanism_from_name(RenamedOLH.name, epsilon=2.0, k=6)
        rng = np.random.default_rng(4)
        reports = device_reports(mechanism, mechanism.simulate(rng.integers(0, 6, size=300), rng=rng))
        assert [f.name for f in arrow_fields(mechanism)] == ["seed", "y"]
        table = pa.table(to_columns(mechanism, reports), schema=pa.schema(arrow_fields(mechanism)))
        assert mechanism.tally(to_simulated(mechanism, table)) == mechanism.tally(reports)


@dataclass(frozen=True)
class RenamedDuchi(Duchi):
    """Duchi under another wire name: a number question asks the class, not the name, whether it has a lattice."""

    name: ClassVar[str] = "test-renamed-duchi"


def test_a_number_question_asks_its_mechanism_class_for_the_lattice() -> None:
    from deniable.shared.questions import make_question

    with registered_as(RenamedDuchi):
        for name, params in ((RenamedDuchi.name, {}), ("piecewise", {"lattice": DEFAULT_LATTICE})):
            question = make_question(id="age", text="Age?", kind="number", epsilon=1.0, mechanism=name,
                                     range=[0, 10])  # fmt: skip
            assert question.params() == params, name


def test_the_openapi_document_names_it() -> None:
    schemas = document()["components"]["schemas"]
    assert ShiftRR.name in schemas["CampaignCreate"]["properties"]["mechanism"]["enum"]
    assert ShiftRR.name in schemas["CampaignConfig"]["properties"]["mechanism"]["enum"]


@pytest.mark.parametrize("name", names())
def test_the_support_pattern_law_is_the_law_of_its_reports(name: str) -> None:
    """The law of (0 ∈ S, 1 ∈ S) each mechanism states (the privacy-loss view's exact law) is the law of its
    simulated reports: each code's frequency within 5 standard errors (n = 200,000, fixed seed)."""
    k = k_for(name)
    mechanism = mechanism_from_name(name, epsilon=1.0, k=k)
    n = 200_000
    codes = mechanism.support_pattern(mechanism.simulate(np.zeros(n, dtype=np.int64), rng=np.random.default_rng(5)))
    law = np.array(mechanism.support_pattern_law())
    assert law.sum() == pytest.approx(1.0) and np.all(law >= 0)
    frequency = np.bincount(codes, minlength=4) / n
    assert np.all(np.abs(frequency - law) <= 5 * np.sqrt(law * (1 - law) / n)), (frequency, law)
    assert np.array_equal(exact_law(name, epsilon=1.0, k=k).p0, law[law + law[[0, 2, 1, 3]] > 0])


def test_the_privacy_loss_view_runs_on_it() -> None:
    """Its exact law comes from the class: it holds its claim, and spending twice the claim is caught."""
    held = audit_tradeoff(ShiftRR.name, epsilon=1.0, k=4, trials=100_000, seed=7)
    assert not held.refuted and 0.95 < held.epsilon_lower_bound <= 1.0, held.summary()
    assert audit_tradeoff(ShiftRR.name, epsilon=1.0, spend=2.0, k=4, trials=100_000, seed=8).refuted


@pytest.mark.parametrize("name", ["grr", ShiftRR.name])
@pytest.mark.parametrize("exact", [False, True])
def test_the_auditor_runs_on_it(name: str, exact: bool) -> None:
    assert name in auditable()
    result = audit(name, epsilon=1.0, k=4, trials=8_000 if exact else 40_000, confidence=1 - 1e-6, seed=3,
                   exact=exact)  # fmt: skip
    assert not result.violated, result.summary()
    assert result.epsilon_lower_bound > 0.4, result.summary()
