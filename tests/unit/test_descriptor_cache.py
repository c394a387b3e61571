"""The stored descriptor is parsed and validated once per (campaign, descriptor hash, status), and a report is
decoded once on ingest (``Mechanism.stored_form`` gives what encode_report and support would, from the
decoded report)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from deniable.aggregator.service import Service, config_of
from deniable.shared.mechanisms import MECHANISMS, mechanism_from_name


def test_the_validated_descriptor_is_reused_until_its_text_or_status_changes(tmp_path: Path) -> None:
    service = Service(tmp_path, database=tmp_path / "deniable.sqlite3")
    service.create_campaign({"id": "c1", "question": "q?", "categories": ["a", "b", "c"], "epsilon": 1.0})
    record = service.store.get_campaign("c1")
    first = config_of(record)
    assert config_of(service.store.get_campaign("c1")) is first  # a second request: no parse
    closed = config_of(dataclasses.replace(record, status="closed"))
    assert closed is not first and closed.status == "closed" and first.status == "open"
    edited = json.loads(record.config_json) | {"question": "another question?"}
    other = config_of(dataclasses.replace(record, config_json=json.dumps(edited)))
    assert other is not first and other.question == "another question?"
    service.close_campaign("c1")
    assert service.campaign("c1").status == "closed"


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_stored_form_is_the_wire_report_and_its_support(name: str) -> None:
    mechanism = mechanism_from_name(name, epsilon=2.0, k=MECHANISMS[name].fixed_k or 7)
    for value in range(mechanism.k):
        report = mechanism.decode_report(mechanism.encode_report(mechanism.randomize(value)))
        assert mechanism.stored_form(report) == (mechanism.encode_report(report), mechanism.support(report))
