"""The shuffler's operations: take device uploads, form shuffled batches, forward them to the aggregator.

:meth:`Shuffler.submit` answers one upload of ``{"reports": [<shuffled envelope>, ...]}`` per report, like
the aggregator does (``docs/wire-format.md`` §9 and §12): ``accepted`` only once stored and committed,
``duplicate`` for a retry or a device that already reported, ``rejected`` with the reason. It opens the
outer layer with the shuffler's key, checks the campaign, the dedup token, the inner ciphertext's length
(the campaign's one length) and the admission token if the campaign has one; it cannot open the inner
layer, which is sealed to the aggregator.

:meth:`Shuffler.forward_once` forms every batch that can be formed (at least ``min_batch`` reports
pending; at most what fits one request to the aggregator) and sends every batch that is due. A batch is
formed and its reports removed from ``pending`` in one transaction, so after a crash each report is either
still pending or in exactly one batch; a batch is sent until the aggregator answers that it stored it
(``accepted`` or ``duplicate``, the same batch id stored before), with exponential back-off between
attempts, so every batch is stored exactly once whatever fails in between.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from deniable.aggregator.ingest import parse_batch
from deniable.aggregator.shuffler.keys import ShufflerKeys
from deniable.aggregator.shuffler.store import DueBatch, ShufflerStore, Taken
from deniable.client.transport import HTTPTransport, Transport, error_message
from deniable.shared.contract import MAX_BATCH
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import ciphertext_bytes
from deniable.shared.errors import (
    CampaignClosed,
    InvalidConfig,
    InvalidReport,
    TransportError,
    UnknownCampaign,
)
from deniable.shared.limits import (
    MAX_BODY_BYTES_DEFAULT,
    SHUFFLE_DESCRIPTOR_TTL,
    SHUFFLE_FORWARD_TIMEOUT,
    SHUFFLE_RETRY_MAX,
    SHUFFLE_RETRY_MIN,
)
from deniable.shared.shuffle import ShuffledEnvelope, batch_capacity, open_outer, shuffle, sign_batch
from deniable.shared.tokens import Token

__all__ = ["DATABASE_NAME", "Shuffler"]

log = logging.getLogger("deniable.shuffler")

DATABASE_NAME = "shuffler.sqlite3"
#: Seconds a worker holds a batch it is sending before another may send it.
_LEASE = SHUFFLE_FORWARD_TIMEOUT + 30


def _claimed_id(item: Any) -> str | None:
    rid = item.get("report_id") if isinstance(item, dict) else None
    return rid if isinstance(rid, str) and len(rid) <= 64 else None


class Shuffler:
    """One shuffler data dir: its store, keys and the aggregator it forwards to."""

    def __init__(
        self,
        data_dir: Path,
        *,
        upstream: str,
        max_batch: int = MAX_BATCH,
        upstream_max_body: int = MAX_BODY_BYTES_DEFAULT,
        transport: Transport | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.store = ShufflerStore(self.data_dir / DATABASE_NAME)
        self.keys = ShufflerKeys.load_or_create(self.data_dir)
        self.upstream = upstream.rstrip("/")
        self.max_batch = max_batch
        self.upstream_max_body = upstream_max_body
        self.transport: Transport = transport or HTTPTransport(self.upstream, timeout=SHUFFLE_FORWARD_TIMEOUT)
        self._configs: dict[str, tuple[CampaignConfig, float]] = {}
        self._lock = threading.Lock()

    # -- descriptors ---------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """What an aggregator's admin registers in a shuffled campaign's ``shuffler`` object."""
        return {"public_key": self.keys.public_key, "verify_key": self.keys.verify_key, "upstream": self.upstream}

    def campaign(self, campaign_id: str, *, fresh: bool = False) -> CampaignConfig:
        """The campaign's descriptor, from the aggregator (cached for a minute, and in the database so that
        uploads are taken while the aggregator is down). Raises ``UnknownCampaign``, ``InvalidConfig`` (not a
        shuffled campaign of this shuffler) or ``TransportError`` (never fetched and the aggregator is down)."""
        now = time.time()
        with self._lock:
            cached = self._configs.get(campaign_id)
        if cached is not None and not fresh and now - cached[1] < SHUFFLE_DESCRIPTOR_TTL:
            return cached[0]
        try:
            config = self._fetch(campaign_id)
        except TransportError:
            stored = self.store.cached_config(campaign_id)
            if stored is None:
                raise
            config = CampaignConfig.from_json(stored[0])
        with self._lock:
            self._configs[campaign_id] = (config, now)
        return config

    def _fetch(self, campaign_id: str) -> CampaignConfig:
        path = f"/api/v1/campaigns/{urllib.parse.quote(campaign_id, safe='')}"
        response = self.transport.request("GET", path)
        if response.status == 404:
            raise UnknownCampaign(f"the aggregator has no campaign {campaign_id!r}")
        if response.status != 200 or not isinstance(response.body, dict):
            raise TransportError(
                f"the aggregator answered {response.status} for campaign {campaign_id!r}: {error_message(response)}"
            )
        config = CampaignConfig.from_json(response.body)
        if config.trust_model != "shuffled" or config.shuffler is None:
            raise InvalidConfig(
                f"campaign {campaign_id!r} is {config.trust_model}; this shuffler takes shuffled campaigns only"
            )
        if config.shuffler.public_key != self.keys.public_key or config.shuffler.verify_key != self.keys.verify_key:
            raise InvalidConfig(
                f"campaign {campaign_id!r} names another shuffler (its shuffler keys are not this shuffler's); "
                "send its reports to the shuffler its descriptor names"
            )
        self.store.cache_config(campaign_id, response.body)
        return config

    # -- uploads -------------------------------------------------------------------------------------

    def submit(self, campaign_id: str, body: Any) -> dict[str, Any]:
        """Check and store one upload; the per-report verdicts (see the module docstring)."""
        config = self.campaign(campaign_id)
        if config.status != "open":
            raise CampaignClosed(f"campaign {campaign_id!r} is closed; no more reports are accepted")
        items = parse_batch(body, max_batch=self.max_batch)
        assert config.padded_length is not None
        inner_bytes = ciphertext_bytes(config.padded_length)
        results: list[dict[str, Any]] = []
        taken: list[Taken] = []
        positions: list[int] = []
        for item in items:
            try:
                envelope = ShuffledEnvelope.from_json(item)
                outer = open_outer(envelope, campaign_id=config.id, private_key=self.keys.hpke_private,
                                   inner_bytes=inner_bytes, with_token=config.admission is not None)  # fmt: skip
                nonce = None
                if config.admission is not None:
                    assert outer.token is not None
                    token = Token.parse(outer.token)
                    token.verify(config.admission, config.id)
                    nonce = token.nonce
            except InvalidReport as exc:
                results.append({"report_id": _claimed_id(item), "status": "rejected", "reason": str(exc)})
                continue
            positions.append(len(results))
            results.append({"report_id": envelope.report_id, "status": "accepted", "reason": None})
            taken.append(Taken(envelope.report_id, outer.dedup, outer.inner, nonce))
        if taken:
            for position, (status, reason) in zip(positions, self.store.take(config.id, taken), strict=True):
                results[position]["status"], results[position]["reason"] = status, reason
        counts = {status: 0 for status in ("accepted", "duplicate", "rejected")}
        for result in results:
            counts[result["status"]] += 1
        return {"results": results, **counts}

    # -- forwarding ----------------------------------------------------------------------------------

    def batch_limit(self, config: CampaignConfig) -> int:
        """The most reports of one batch: what fits one request to the aggregator (at least the threshold)."""
        assert config.padded_length is not None and config.shuffler is not None
        return max(config.shuffler.min_batch, batch_capacity(config.padded_length, self.upstream_max_body))

    def form_batches(self) -> int:
        """Form every batch that can be formed now; return how many reports went into batches."""
        moved = 0
        for campaign_id in self.store.campaign_ids():
            if self.store.pending_count(campaign_id) == 0:
                continue
            try:
                config = self.campaign(campaign_id)
            except (TransportError, InvalidConfig, UnknownCampaign) as exc:
                log.warning("cannot form batches of campaign %r now: %s", campaign_id, exc)
                continue
            assert config.shuffler is not None
            limit = self.batch_limit(config)

            def sign(batch_id: str, reports: list[bytes], cid: str = config.id) -> dict[str, Any]:
                return sign_batch(self.keys.signing_key, cid, batch_id, reports)

            while True:
                n = self.store.form_batch(
                    config.id, threshold=config.shuffler.min_batch, max_size=limit, permute=shuffle,
                    sign=sign,
                )  # fmt: skip
                if n == 0:
                    break
                moved += n
                log.info("formed a batch of %d reports for campaign %r", n, config.id)
        return moved

    def send_due(self) -> int:
        """Send every batch that is due; return how many the aggregator stored."""
        sent = 0
        while True:
            batch = self.store.claim_due(time.time(), _LEASE)
            if batch is None:
                return sent
            if self._send(batch):
                sent += 1

    def _send(self, batch: DueBatch) -> bool:
        path = f"/api/v1/campaigns/{urllib.parse.quote(batch.campaign_id, safe='')}/batches"
        try:
            response = self.transport.request("POST", path, batch.body)
        except TransportError as exc:
            self._later(batch, str(exc))
            return False
        reply = response.body if isinstance(response.body, dict) else {}
        if (
            response.status == 200
            and reply.get("batch_id") == batch.batch_id
            and reply.get("status") in ("accepted", "duplicate")
        ):
            self.store.delivered(batch)
            log.info("the aggregator stored batch %s (%d reports, %s)", batch.batch_id, batch.n, reply["status"])
            return True
        self._later(batch, f"the aggregator answered {response.status}: {error_message(response)}")
        return False

    def _later(self, batch: DueBatch, error: str) -> None:
        wait = min(SHUFFLE_RETRY_MAX, SHUFFLE_RETRY_MIN * 2 ** min(batch.attempts, 16))
        log.warning("batch %s not stored by the aggregator (%s); retrying in %.0f s", batch.batch_id, error, wait)
        self.store.retry_later(batch, time.time() + wait, error)

    def forward_once(self) -> tuple[int, int]:
        """One pass: form what can be formed, send what is due; ``(reports batched, batches stored)``."""
        return self.form_batches(), self.send_due()

    def run_forwarder(self, stop: threading.Event, interval: float) -> None:
        """Forward every ``interval`` seconds until ``stop`` is set; a failed pass is logged and retried."""
        while not stop.wait(interval):
            try:
                self.forward_once()
            except Exception:  # a bug or a broken database must not end the thread; it is logged
                log.exception("the forwarder's pass failed; retrying in %.1f s", interval)

    def status(self) -> dict[str, Any]:
        return {"campaigns": self.store.status()}
