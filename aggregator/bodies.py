"""Reading request bodies and query strings safely: every problem is a 4xx, never a 500.

* Content type other than ``application/json`` → 415.
* Body over ``MAX_CONTENT_LENGTH`` → 413 (werkzeug stops reading at the limit).
* Not UTF-8, not JSON, NaN/Infinity, or nested past the interpreter's recursion limit (the C parser
  raises ``RecursionError`` instead of overflowing the stack) → 400.
"""

from __future__ import annotations

import json
import math
from typing import Any

from flask import request
from werkzeug.exceptions import BadRequest, HTTPException, UnsupportedMediaType

__all__ = ["json_body", "query_bool", "query_float", "query_int", "query_str"]


def _reject_constant(name: str) -> Any:
    raise BadRequest(f"the request body contains {name}, which is not valid JSON; send finite numbers")


def json_body() -> Any:
    """The request's JSON document (any JSON type; callers check the shape)."""
    if request.mimetype != "application/json":
        shown = request.mimetype or "none"
        raise UnsupportedMediaType(
            f"the request body must be JSON with 'Content-Type: application/json', got {shown!r}"
        )
    try:
        raw = request.get_data(cache=False)  # raises 413 past MAX_CONTENT_LENGTH
    except HTTPException:
        raise
    except Exception as exc:  # the WSGI server could not read the body (bad chunked encoding, cut connection)
        raise BadRequest(
            "the request body could not be read (malformed chunked encoding or a cut connection); send it again"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("the request body is not UTF-8; send UTF-8 encoded JSON") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from exc


def query_str(name: str, *, default: str | None = None, max_length: int = 64) -> str | None:
    """A query-string parameter, at most ``max_length`` characters."""
    value = request.args.get(name, default)
    if value is not None and len(value) > max_length:
        raise BadRequest(f"query parameter {name!r} must be at most {max_length} characters")
    return value


def query_bool(name: str) -> bool:
    """A boolean query-string parameter: ``true``/``1`` or ``false``/``0`` (absent: false)."""
    raw = request.args.get(name)
    if raw is None:
        return False
    value = raw.lower()
    if value not in ("true", "1", "false", "0"):
        raise BadRequest(f"query parameter {name!r} must be true or false, got {raw[:32]!r}")
    return value in ("true", "1")


def query_float(name: str, *, default: float, low: float, high: float) -> float:
    """A finite number strictly between ``low`` and ``high`` from the query string."""
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low < value < high):
        raise BadRequest(
            f"query parameter {name!r} must be a number in ({low:g}, {high:g}), got {raw[:32]!r}"
        )
    return value


def query_int(name: str, *, default: int, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (inclusive) from the query string, in plain decimal digits."""
    raw = request.args.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 20 and low <= int(raw) <= high):
        raise BadRequest(f"query parameter {name!r} must be a whole number from {low} to {high}, got {raw[:32]!r}")
    return int(raw)
