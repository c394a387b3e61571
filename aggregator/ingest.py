"""Report batches: validate, decrypt, decode each envelope, then store the good ones in one transaction.

A batch is ``{"reports": [envelope, ...]}`` with 1 to ``max_batch`` envelopes (``docs/wire-format.md``).
Batch-level problems (not an object, no list, too few or too many items) are a 400 and store nothing.
Each envelope then ends as exactly one of:

* ``rejected`` with a reason: malformed envelope, an envelope of another format version than the
  campaign's, a ciphertext of the wrong padded length, a failed proof of possession (checked from the
  envelope alone, before anything is looked up, so a forger learns nothing about the pseudonym), a
  ciphertext that does not open under this campaign's key and binding (tampered, replayed under another id
  or campaign), a payload outside the campaign's report space, or, in a campaign with admission
  tokens, a missing, forged or foreign token or one already spent. Nothing of it is stored.
* ``duplicate``: its report id is already stored (a retry: idempotent) or its device pseudonym already
  reported to this campaign (one device counts once; in a recurring campaign, once per round). Nothing
  changes.
* ``accepted``: stored, tallied and counted in the same SQLite transaction, committed (fsync) before the
  reply is sent.

Decryption is CPU work done before the write lock is taken, so concurrent batches decrypt in parallel and
only the short insert is serialized. In local campaigns the payload holds the randomized report only: the
raw value never left the device, and nothing here can see it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from deniable.aggregator import survey_tally
from deniable.aggregator.store import ReportRow, Store
from deniable.shared.contract import BATCH_STATUSES
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.envelope import Envelope, ciphertext_bytes, open_envelope
from deniable.shared.errors import CampaignClosed, InvalidReport, InvalidRequest, PermissionDenied
from deniable.shared.limits import MAX_GROUP_VALUES_DEFAULT, MAX_ROUNDS
from deniable.shared.shuffle import ShuffledBatch, open_inner, verify_batch
from deniable.shared.survey import encode_answers

__all__ = ["decode_envelope", "parse_batch", "submit_batch", "submit_shuffled_batch"]


def parse_batch(body: Any, *, max_batch: int) -> list[Any]:
    """The list of envelopes of a batch body; 400 if the body is not ``{"reports": [1..max_batch]}``."""
    if not isinstance(body, dict) or not isinstance(body.get("reports"), list):
        raise InvalidRequest('the body must be a JSON object {"reports": [envelope, ...]}')
    extra = sorted(str(key)[:40] for key in body if key != "reports")
    if extra:
        raise InvalidRequest(f"unexpected keys in the batch body: {extra[:5]}; send only 'reports'")
    items: list[Any] = body["reports"]
    if not 1 <= len(items) <= max_batch:
        raise InvalidRequest(
            f"a batch must hold 1 to {max_batch} envelopes, got {len(items)}; split larger uploads"
        )
    return items


def decode_envelope(item: Any, config: CampaignConfig, private_key: bytes) -> ReportRow:
    """Validate, decrypt and decode one envelope into a storable row; raises ``InvalidReport``."""
    envelope = Envelope.from_json(item)
    if envelope.version != config.envelope_version:
        raise InvalidReport(
            f"envelope 'v' is {envelope.version}, but campaign '{config.id}' takes format version "
            f"{config.envelope_version} envelopes only; seal the report again under the campaign's descriptor"
        )
    payload = open_envelope(
        envelope, campaign_id=config.id, private_key=private_key, padded_length=config.padded_length
    )
    parsed = config.decode(payload)
    decoded, groups = parsed.value, parsed.groups
    if config.admission is not None:
        assert parsed.token is not None  # decode requires it
        parsed.token.verify(config.admission, config.id)  # forged, altered or foreign: InvalidReport
    if config.is_survey:  # every question's slot of the tally vector (deniable.aggregator.survey_tally)
        wire: Any = encode_answers(config.questions, parsed.answers)
        support: tuple[int, ...] = survey_tally.report_support(config, parsed.answers)
    elif config.trust_model == "central":
        wire = decoded
        support = (decoded,)
    else:
        wire, supported = config.build_mechanism().stored_form(decoded)  # decoded once, by config.decode
        support = tuple(supported)
    return ReportRow(
        report_id=envelope.report_id,
        pseudonym=envelope.pseudonym,
        groups=groups,
        report_json=json.dumps(wire, separators=(",", ":")),
        support=support,
        round="" if parsed.round is None else parsed.round,
        token_nonce=None if parsed.token is None else parsed.token.nonce,
    )


def _claimed_id(item: Any) -> str | None:
    """The report id an envelope claims, if it is a short string (echoed back in a rejection)."""
    report_id = item.get("report_id") if isinstance(item, dict) else None
    return report_id if isinstance(report_id, str) and len(report_id) <= 64 else None


def submit_batch(
    store: Store,
    config: CampaignConfig,
    private_key: bytes,
    body: Any,
    *,
    max_batch: int,
    max_group_values: int = MAX_GROUP_VALUES_DEFAULT,
) -> dict[str, Any]:
    """Process one batch for the campaign ``config``; return the reply body.

    Every group field has a bounded domain: its declared ``group_values`` (checked when the payload is
    decoded), or at most ``max_group_values`` distinct values (checked by the store, in the transaction);
    a recurring campaign holds at most :data:`~deniable.shared.limits.MAX_ROUNDS` distinct rounds. A report
    past a cap is rejected with the reason.

    Raises ``CampaignClosed`` (409) for a closed campaign and ``InvalidRequest`` (400) for a malformed batch.
    """
    if config.status != "open":
        raise CampaignClosed(f"campaign {config.id!r} is closed; no more reports are accepted")
    items = parse_batch(body, max_batch=max_batch)
    results: list[dict[str, Any]] = []
    rows: list[ReportRow] = []
    positions: list[int] = []
    for item in items:
        try:
            row = decode_envelope(item, config, private_key)
        except InvalidReport as exc:
            results.append({"report_id": _claimed_id(item), "status": "rejected", "reason": str(exc)})
            continue
        positions.append(len(results))
        results.append({"report_id": row.report_id, "status": "accepted", "reason": None})
        rows.append(row)
    if rows:
        outcomes = store.ingest(
            config.id, rows, k=survey_tally.width(config), group_fields=config.group_fields,
            capped_fields={field: max_group_values for field in config.undeclared_group_fields},
            max_rounds=MAX_ROUNDS if config.recurring else None,
        )  # fmt: skip
        for position, (status, reason) in zip(positions, outcomes, strict=True):
            results[position]["status"] = status
            results[position]["reason"] = reason
    counts = dict.fromkeys(BATCH_STATUSES, 0)
    for result in results:
        counts[result["status"]] += 1
    return {"results": results, **counts}


def submit_shuffled_batch(store: Store, config: CampaignConfig, private_key: bytes, body: Any) -> dict[str, Any]:
    """Process one batch a shuffled campaign's shuffler forwarded; return the reply body.

    The batch must be signed by the shuffler the descriptor names (``shuffler.verify_key``; 403 otherwise,
    nothing stored) and hold at least ``shuffler.min_batch`` inner ciphertexts (400 otherwise: a batch below
    the threshold is never stored, so never part of an estimate). Each ciphertext is decrypted with the
    campaign key and decoded; one that does not open or decode is counted as rejected (it came from a
    device the shuffler could not check, since it cannot read the inner layer). The rest are stored with
    ``report_id``/``pseudonym`` derived from the ciphertext's SHA-256, which says nothing about the device,
    and the batch id is recorded in the same transaction, so the same batch sent twice is stored once.
    """
    if config.status != "open":
        raise CampaignClosed(f"campaign {config.id!r} is closed; no more batches are accepted")
    if config.trust_model != "shuffled" or config.shuffler is None:
        raise InvalidRequest(
            f"campaign {config.id!r} is {config.trust_model}: it takes envelopes from devices at "
            f"/api/v1/campaigns/{config.id}/reports, not shuffled batches"
        )
    assert config.padded_length is not None
    try:
        batch = ShuffledBatch.from_json(body, inner_bytes=ciphertext_bytes(config.padded_length))
    except InvalidReport as exc:
        raise InvalidRequest(str(exc)) from exc
    threshold = config.shuffler.min_batch
    if len(batch.reports) < threshold:
        raise InvalidRequest(
            f"a batch of campaign {config.id!r} must hold at least {threshold} reports (its declared min_batch), "
            f"got {len(batch.reports)}; nothing was stored"
        )
    if not verify_batch(config.shuffler.verify_key_bytes, config.id, batch):
        raise PermissionDenied(
            f"the batch signature does not verify under the shuffler key registered with campaign {config.id!r}; "
            "only that shuffler may forward batches to it"
        )
    mechanism = config.build_mechanism()
    rows: list[ReportRow] = []
    for ct in batch.reports:
        try:
            payload = open_inner(ct, campaign_id=config.id, private_key=private_key, padded_length=config.padded_length)
            report = config.decode(payload).value
        except InvalidReport:
            continue
        digest = hashlib.sha256(ct).hexdigest()
        rows.append(ReportRow(
            report_id=digest[:32], pseudonym=digest, groups={},
            report_json=json.dumps(mechanism.encode_report(report), separators=(",", ":")),
            support=tuple(mechanism.support(report)),
        ))  # fmt: skip
    status, accepted = store.ingest_batch(config.id, batch.batch_id, len(batch.reports), rows, k=config.k)
    return {
        "batch_id": batch.batch_id,
        "status": status,
        "n": len(batch.reports),
        "accepted": accepted,
        "rejected": len(batch.reports) - len(rows) if status == "accepted" else 0,
    }
