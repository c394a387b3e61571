"""Campaigns: create (admin), list (analyst), read (public), close (admin)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.auth import ADMIN, current_role
from deniable.aggregator.bodies import json_object
from deniable.aggregator.service import current_service

bp = Blueprint("campaigns", __name__, url_prefix="/api/v1/campaigns")


@bp.post("")
def create() -> tuple[dict[str, Any], int]:
    """Create a campaign and its HPKE key pair; 201 with the public config."""
    return current_service().create_campaign(json_object("the campaign")), 201


@bp.get("")
def list_all() -> dict[str, Any]:
    """Every campaign with its counters (exact report counts of central add/remove campaigns: admin only)."""
    return current_service().list_campaigns(exact_counts=current_role() == ADMIN)


@bp.get("/<campaign_id>")
def get_one(campaign_id: str) -> dict[str, Any]:
    """The public config a device fetches and pins."""
    return current_service().get_campaign(campaign_id)


@bp.post("/<campaign_id>/close")
def close(campaign_id: str) -> dict[str, Any]:
    """Close the campaign: later report batches get 409."""
    return current_service().close_campaign(campaign_id)
