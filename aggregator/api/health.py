"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness), both public.

``/healthz`` answers 200 as long as the process serves requests and the database answers a query: a
supervisor restarts the service when it fails. ``/readyz`` answers 200 only when the service can take
reports now (a write probe in a transaction, every open campaign's key usable, free disk above the floor
``MIN_FREE_DISK_BYTES``) and 503 with the reasons otherwise: a load balancer sends no traffic while it
fails, and restarting would not help (the operator must act).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify
from flask.typing import ResponseReturnValue

from deniable.aggregator.api.context import current_service
from deniable.shared.contract import error_body

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    """Liveness: ``{"status": "ok"}`` once the database answers a query."""
    return current_service().health()


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """200 ``{"status": "ready", "checks": {...}}``, or 503 with ``"not_ready"`` and each failing check's
    ``reason`` (also joined in ``error.message``, the API's error shape)."""
    ready, body = current_service().readiness(min_free_bytes=int(current_app.config["MIN_FREE_DISK_BYTES"]))
    if ready:
        return body
    reasons = "; ".join(check["reason"] for check in body["checks"].values() if not check["ok"])
    response = jsonify({**body, **error_body("not_ready", reasons)})
    response.headers["Retry-After"] = "5"
    return response, 503
