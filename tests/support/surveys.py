"""Surveys (format 3) for device-side tests: example question sets and an in-memory desk that serves their
descriptors and opens what devices send, as the aggregator's ingest does (size, proof, HPKE, payload).

The aggregator's own handling of surveys is tested against the real server elsewhere; this desk lets the
device tests check every envelope byte for byte without depending on it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from deniable.client import Response
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import ENC_BYTES, TAG_BYTES, Envelope, open_envelope
from deniable.shared.errors import InvalidReport
from deniable.shared.keys import generate_keypair
from deniable.shared.payload import Payload

#: One question of each kind, the multi one optional, and a number histogram (choice with bins).
HEALTH: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Did you smoke in the last 30 days?", "kind": "choice", "categories": ["no", "yes"]},
    {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]},
    {"id": "apps", "text": "Which apps did you use today?", "kind": "multi",
     "options": ["mail", "maps", "news", "chat", "music"], "max_selected": 3, "optional": True},
]  # fmt: skip

#: Five questions for the benchmark and the size tests: every kind, mechanisms named.
FIVE: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": ["no", "yes"], "mechanism": "binary-rr"},
    {"id": "mode", "text": "Commute?", "kind": "choice", "categories": ["walk", "bike", "car", "bus", "train"],
     "mechanism": "oue", "optional": True},
    {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99], "mechanism": "piecewise"},
    {"id": "income", "text": "Income?", "kind": "choice", "bins": [0, 20000, 40000, 80000, 1000000], "clip": True},
    {"id": "apps", "text": "Apps?", "kind": "multi", "options": ["mail", "maps", "news", "chat"],
     "max_selected": 2, "mechanism": "bitvector", "optional": True},
]  # fmt: skip


@dataclass
class Desk:
    """An in-memory aggregator of surveys: ``GET /api/v1/campaigns/<id>`` and ``POST .../reports``.

    Every posted envelope is checked as the aggregator does (the campaign's version and size, the proof of
    possession, HPKE, the payload) and kept with its decoded :class:`Payload`; a report id seen before is a
    duplicate.
    """

    configs: dict[str, CampaignConfig] = field(default_factory=dict)
    keys: dict[str, bytes] = field(default_factory=dict)
    received: dict[str, list[tuple[Envelope, Payload]]] = field(default_factory=dict)
    sizes: dict[str, set[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, **kwargs: Any) -> CampaignConfig:
        private, public = generate_keypair()
        config = CampaignConfig.create_survey(public_key=public, **kwargs)
        self.configs[config.id], self.keys[config.id] = config, private
        self.received[config.id], self.sizes[config.id] = [], set()
        return config

    def add(self, config: CampaignConfig, private: bytes) -> None:
        self.configs[config.id], self.keys[config.id] = config, private
        self.received.setdefault(config.id, [])
        self.sizes.setdefault(config.id, set())

    def request(self, method: str, path: str, body: Any = None) -> Response:
        with self.lock:
            parts = path.strip("/").split("/")  # api v1 campaigns <id> [reports]
            config = self.configs.get(parts[3]) if len(parts) >= 4 else None
            if config is None:
                return Response(404, {"error": {"code": "unknown_campaign", "message": "no such campaign"}})
            if method == "GET":
                return Response(200, config.to_json())
            results = [self._ingest(config, item) for item in body["reports"]]
            counts = {s: sum(r["status"] == s for r in results) for s in ("accepted", "duplicate", "rejected")}
            return Response(200, {"results": results, **counts})

    def _ingest(self, config: CampaignConfig, item: Any) -> dict[str, Any]:
        try:
            envelope = Envelope.from_json(item)
            if envelope.version != config.envelope_version:
                raise InvalidReport(f"campaign takes format version {config.envelope_version} envelopes only")
            self.sizes[config.id].add(len(envelope.ciphertext))
            plain = open_envelope(envelope, campaign_id=config.id, private_key=self.keys[config.id],
                                  padded_length=config.padded_length)  # fmt: skip
            payload = config.decode(plain)
        except InvalidReport as exc:
            return {"report_id": item.get("report_id"), "status": "rejected", "reason": str(exc)}
        seen = {e.report_id for e, _ in self.received[config.id]}
        if envelope.report_id in seen:
            return {"report_id": envelope.report_id, "status": "duplicate", "reason": None}
        self.received[config.id].append((envelope, payload))
        return {"report_id": envelope.report_id, "status": "accepted", "reason": None}

    def payloads(self, campaign_id: str) -> list[Payload]:
        return [payload for _, payload in self.received[campaign_id]]


def ciphertext_bytes(config: CampaignConfig) -> int:
    """The one ciphertext size of every envelope of ``config``."""
    assert config.padded_length is not None
    return ENC_BYTES + config.padded_length + TAG_BYTES
