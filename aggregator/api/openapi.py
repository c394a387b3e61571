"""``GET /api/v1/openapi.json``: the OpenAPI document of this API (public)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.openapi_document import document as build_document

bp = Blueprint("openapi", __name__)


@bp.get("/api/v1/openapi.json")
def document() -> dict[str, Any]:
    """Every route with its security and schemas."""
    return build_document()
