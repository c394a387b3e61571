"""``POST /api/v1/campaigns/<id>/tokens`` (issuer): blind-sign an account's admission-token requests."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.api.bodies import json_body
from deniable.aggregator.api.context import current_service

bp = Blueprint("tokens", __name__, url_prefix="/api/v1/campaigns")


@bp.post("/<campaign_id>/tokens")
def issue(campaign_id: str) -> dict[str, Any]:
    """One blind signature per token request, counted against the account's quota for the campaign."""
    return current_service().issue_tokens(campaign_id, json_body())
