"""``GET /healthz``: liveness and readiness (public)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.service import current_service

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    """``{"status": "ok"}`` once the database answers."""
    return current_service().health()
