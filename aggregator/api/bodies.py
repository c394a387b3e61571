"""Reading request bodies and query strings safely: every problem is a 4xx, never a 500.

* Content type other than ``application/json``, or a ``charset`` other than UTF-8 (RFC 8259 §8.1: JSON
  between systems is UTF-8; a body labelled UTF-16 would otherwise be read as UTF-8) → 415.
* Body over ``MAX_CONTENT_LENGTH`` → 413 (the serving front stops reading at the limit).
* Not UTF-8, not JSON, a duplicate key, NaN/Infinity, or nested past the interpreter's recursion limit
  → 400. The parser is the one strict parser of the decrypted payloads
  (:func:`deniable.shared.canonical_json.parse_json`), so that a body and a payload cannot disagree on what a
  document says (``{"id": "a", "id": "b"}`` would otherwise create ``b``).
* A body of the wrong JSON type (an array where an object is expected) → 400 (:func:`json_object`).
* A query parameter the route does not take → 400 naming the ones it takes: a typo (``?groupby=``) or an
  unsupported option (``?format=csv``) must not silently answer something else. A view declares its query
  parameters with :func:`query_params`; a route without the decorator takes none; :func:`install_query_check`
  enforces it before the view runs (after authentication), and the ``query_*`` readers refuse to read an
  undeclared name, so the declaration and the reads cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, current_app, request
from werkzeug.exceptions import BadRequest, HTTPException, UnsupportedMediaType

from deniable.shared.canonical_json import parse_json
from deniable.shared.errors import InvalidReport
from deniable.shared.limits import MAX_QUERY_CHARS

__all__ = [
    "install_query_check",
    "json_body",
    "json_object",
    "query_bool",
    "query_float",
    "query_int",
    "query_params",
    "query_str",
]

_View = TypeVar("_View", bound=Callable[..., Any])


def query_params(*names: str) -> Callable[[_View], _View]:
    """Declare the query parameters a view takes (any other gets 400)."""

    def mark(view: _View) -> _View:
        view.query_params = names  # type: ignore[attr-defined]
        return view

    return mark


def _declared() -> tuple[str, ...]:
    view = current_app.view_functions.get(request.endpoint or "")
    return tuple(getattr(view, "query_params", ()))


def _check_query() -> None:
    if request.endpoint is None:  # no such route (404/405): routing answers, not the parameters
        return
    known = _declared()
    unknown = sorted(set(request.args) - set(known))
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        takes = f"it takes {', '.join(known)}" if known else "it takes none"
        noun = "parameter" if len(unknown) == 1 else "parameters"
        raise BadRequest(f"unknown query {noun} {shown} for this route; {takes}")


def install_query_check(app: Flask) -> None:
    """Refuse, before any view runs, query parameters its route does not declare (:func:`query_params`)."""
    app.before_request(_check_query)


def _arg(name: str) -> str | None:
    if name not in _declared():  # a bug of the view, caught by its tests: declare what you read
        raise AssertionError(f"query parameter {name!r} is read but not declared with @query_params")
    return request.args.get(name)


def json_body() -> Any:
    """The request's JSON document (any JSON type; callers check the shape)."""
    if request.mimetype != "application/json":
        shown = request.mimetype or "none"
        raise UnsupportedMediaType(
            f"the request body must be JSON with 'Content-Type: application/json', got {shown!r}"
        )
    charset = request.mimetype_params.get("charset")
    if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise UnsupportedMediaType(
            f"the request body must be UTF-8 JSON, got charset {charset[:32]!r}; send UTF-8 and "
            "'Content-Type: application/json'"
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
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("the request body is not UTF-8; send UTF-8 encoded JSON") from exc
    try:
        return parse_json(raw, what="the request body")
    except InvalidReport as exc:
        raise BadRequest(str(exc)) from exc


def json_object(what: str) -> dict[str, Any]:
    """The request's JSON body, which must be an object (``what`` it describes, for the message)."""
    body = json_body()
    if not isinstance(body, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(body), "a number")
        raise BadRequest(f"the body must be a JSON object describing {what}, got {kind}")
    return body


def query_str(name: str, *, default: str | None = None, max_length: int = MAX_QUERY_CHARS) -> str | None:
    """A query-string parameter, at most ``max_length`` characters."""
    raw = _arg(name)
    value = default if raw is None else raw
    if value is not None and len(value) > max_length:
        raise BadRequest(f"query parameter {name!r} must be at most {max_length} characters")
    return value


def query_bool(name: str) -> bool:
    """A boolean query-string parameter: ``true``/``1`` or ``false``/``0`` (absent: false)."""
    raw = _arg(name)
    if raw is None:
        return False
    value = raw.lower()
    if value not in ("true", "1", "false", "0"):
        raise BadRequest(f"query parameter {name!r} must be true or false, got {raw[:32]!r}")
    return value in ("true", "1")


def query_float(name: str, *, default: float, low: float, high: float) -> float:
    """A finite number strictly between ``low`` and ``high`` from the query string."""
    raw = _arg(name)
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
    raw = _arg(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 20 and low <= int(raw) <= high):
        raise BadRequest(f"query parameter {name!r} must be a whole number from {low} to {high}, got {raw[:32]!r}")
    return int(raw)
