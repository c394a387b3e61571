"""``POST /api/v1/campaigns/<id>/reports``: a batch of encrypted envelopes from anonymous devices."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.bodies import json_body
from deniable.aggregator.service import current_service

bp = Blueprint("reports", __name__, url_prefix="/api/v1/campaigns")


@bp.post("/<campaign_id>/reports")
def submit(campaign_id: str) -> dict[str, Any]:
    """Each envelope accepted, duplicate or rejected; accepted ones are durable when this returns."""
    return current_service().submit_reports(campaign_id, json_body())
