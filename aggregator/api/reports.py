"""``POST /api/v1/campaigns/<id>/reports``: a batch of encrypted envelopes from anonymous devices."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from deniable.aggregator.api.bodies import json_body
from deniable.aggregator.api.context import current_service
from deniable.aggregator.front import ENVIRON_INGEST_LIMIT
from deniable.shared.errors import RateLimited

bp = Blueprint("reports", __name__, url_prefix="/api/v1/campaigns")


def _spend_ingestion_tokens(body: Any) -> None:
    """Take one ingestion token per report beyond the one the front took for the request (429 if short).

    The refusal is :class:`~deniable.shared.errors.RateLimited` (429 ``rate_limited`` with ``Retry-After``,
    as the front's refusal of a request past the bucket, and the class the device client raises on it).
    Served by ``deniable serve`` the front puts its rate limiter for this client into the ASGI scope; an app
    run otherwise (a test client) has none and is not rate limited.
    """
    scope = request.environ.get("asgi.scope") or {}
    take = (scope.get("extensions") or {}).get("deniable", {}).get(ENVIRON_INGEST_LIMIT)
    reports = body.get("reports") if isinstance(body, dict) else None
    if take is None or not isinstance(reports, list) or len(reports) <= 1:
        return
    verdict = take(len(reports) - 1)
    if not verdict.allowed:
        raise RateLimited(
            f"this address sent more reports than this aggregator accepts per second; nothing of this batch "
            f"of {len(reports)} was stored: wait for Retry-After seconds and send it again (or in smaller batches)",
            retry_after=verdict.retry_after,
        )


@bp.post("/<campaign_id>/reports")
def submit(campaign_id: str) -> dict[str, Any]:
    """Each envelope accepted, duplicate or rejected; accepted ones are durable when this returns."""
    body = json_body()
    _spend_ingestion_tokens(body)
    return current_service().submit_reports(campaign_id, body)


@bp.post("/<campaign_id>/batches")
def submit_batch(campaign_id: str) -> dict[str, Any]:
    """A shuffled campaign's batch from its shuffler (signed); stored once per batch id, durable on return."""
    return current_service().submit_shuffled_batch(campaign_id, json_body())
