"""``GET /api/v1/campaigns/<id>/estimate[?question=<id>&round=<label>&group_by=<field>&group_after=<value>``
``&level=0.95&noise=...&refresh=true&sample=q]``, ``GET /api/v1/campaigns/<id>/top[?j=1&refresh=true]`` (central) and
``GET /api/v1/campaigns/<id>/rounds`` (analyst)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.api.auth import current_role
from deniable.aggregator.api.bodies import query_bool, query_float, query_int, query_params, query_str
from deniable.aggregator.api.context import current_service
from deniable.shared.limits import MAX_TOP

bp = Blueprint("estimates", __name__, url_prefix="/api/v1/campaigns")


@bp.get("/<campaign_id>/estimate")
@query_params("round", "group_by", "group_after", "level", "noise", "refresh", "sample", "question")
def estimate(campaign_id: str) -> dict[str, Any]:
    """Unbiased counts with stderr and CI (local), or a noisy release charged to the budget (central)."""
    return current_service().estimate(
        campaign_id,
        group_by=query_str("group_by"),
        level=query_float("level", default=0.95, low=0.0, high=1.0),
        noise=query_str("noise"),
        refresh=query_bool("refresh"),
        round=query_str("round"),
        role=current_role(),
        sample=query_str("sample"),
        group_after=query_str("group_after"),
        question=query_str("question"),
    )


@bp.get("/<campaign_id>/top")
@query_params("j", "refresh")
def top(campaign_id: str) -> dict[str, Any]:
    """The j most common answers of a central campaign (exponential mechanism), charged to the budget."""
    return current_service().top(
        campaign_id, j=query_int("j", default=1, low=1, high=MAX_TOP), refresh=query_bool("refresh"),
        role=current_role(),
    )  # fmt: skip


@bp.get("/<campaign_id>/rounds")
def rounds(campaign_id: str) -> dict[str, Any]:
    """The rounds of a recurring campaign that hold reports, each with its number of reports."""
    return current_service().rounds(campaign_id)
