"""Canonical JSON (RFC 8785, JCS) and the one strict JSON parser of deniable.

The device seals the canonical JSON of its payload, the descriptor's pinned fingerprint hashes the canonical
JSON of the descriptor, and the aggregator parses every request body and decrypted payload with
:func:`parse_json`, so that a body and a payload cannot disagree on what a JSON text is. Pure functions of
their input: no I/O, no cryptography.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

from deniable.shared.errors import InvalidParameter, InvalidReport

__all__ = ["Canonical", "canonical_json", "parse_json", "parse_json_object"]


class Canonical:
    """A value already encoded as canonical JSON (by :func:`canonical_json`), written as it is where it
    appears inside another value: a part encoded once is not encoded again with every whole that holds it
    (canonical JSON of an object or array is the concatenation of its members' canonical JSON)."""

    __slots__ = ("text",)

    def __init__(self, encoded: bytes) -> None:
        self.text = encoded.decode("utf-8")


def canonical_json(obj: Any) -> bytes:
    """Serialize to canonical JSON (RFC 8785, JCS) in UTF-8: sorted keys, no whitespace, shortest numbers.

    Keys are sorted by code point (the same as JCS's UTF-16 order for the ASCII keys deniable uses); floats
    are written as ECMAScript does (``1.0`` → ``1``, ``1e-07`` → ``1e-7``). NaN, infinities, non-string
    keys, lone surrogates and other types raise ``InvalidParameter``.
    """
    parts: list[str] = []
    _canonical(obj, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidParameter("canonical JSON strings must be valid Unicode (no lone surrogates)") from exc


#: The JSON string literal of a ``str``: what ``json.dumps(s, ensure_ascii=False)`` writes (the same function
#: json.dumps calls), without building an encoder per string.
_string = json.encoder.encode_basestring


def _canonical(obj: Any, out: list[str]) -> None:
    # exact types first (the payloads and descriptors are plain str/dict/int/list); subclasses, floats and
    # everything else take the general branches below, which define the result
    kind = type(obj)
    if kind is str:
        out.append(_string(obj))
    elif kind is dict:
        _mapping(obj, out)
    elif kind is int:
        out.append(str(obj))
    elif kind is list:
        if all(type(item) is str for item in obj):  # labels, options: one join, the same text
            out.append("[" + ",".join(map(_string, obj)) + "]")
            return
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif obj is None or isinstance(obj, bool):
        out.append("null" if obj is None else ("true" if obj else "false"))
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(_ecmascript_number(obj))
    elif isinstance(obj, str):
        out.append(_string(obj))
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(obj, Mapping):
        _mapping(obj, out)
    elif kind is Canonical:
        out.append(obj.text)
    else:
        raise InvalidParameter(f"canonical JSON cannot encode a {type(obj).__name__}")


def _mapping(obj: Mapping[Any, Any], out: list[str]) -> None:
    if not all(isinstance(key, str) for key in obj):
        raise InvalidParameter("canonical JSON object keys must be strings")
    out.append("{")
    for i, key in enumerate(sorted(obj)):
        if i:
            out.append(",")
        out.append(_string(key))
        out.append(":")
        _canonical(obj[key], out)
    out.append("}")


def _ecmascript_number(x: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(x):
        raise InvalidParameter(f"canonical JSON numbers must be finite, got {x!r}")
    if x == 0:
        return "0"
    shortest = repr(x)  # Python's repr is the shortest round-trip digit string, as ECMAScript requires
    if "e" not in shortest:  # positional (1e-4 ≤ |x| < 1e16): ECMAScript writes the same digits
        return shortest[:-2] if shortest.endswith(".0") else shortest
    exponent = decimal.Decimal(shortest).adjusted()
    if -7 < exponent < 21:
        text = format(decimal.Decimal(shortest), "f")
        return text[:-2] if text.endswith(".0") else text
    mantissa, _, exp = shortest.partition("e")
    mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
    return f"{mantissa}e{'+' if int(exp) > 0 else '-'}{abs(int(exp))}"


def parse_json(data: bytes, *, what: str) -> Any:
    """Parse strict UTF-8 JSON of any type: duplicate keys, NaN/Infinity, invalid UTF-8 and nesting past the
    interpreter's recursion limit are refused. The one strict parser of deniable: decrypted payloads and
    the aggregator's request bodies both go through it.

    Raises ``InvalidReport`` naming ``what`` on any problem.
    """

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise InvalidReport(f"{what} has a duplicate key {key[:40]!r}; send each key once")
            obj[key] = value
        return obj

    def no_constants(name: str) -> Any:
        raise InvalidReport(f"{what} contains {name}, which is not JSON")

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except InvalidReport:
        raise
    except json.JSONDecodeError as exc:
        raise InvalidReport(f"{what} is not UTF-8 JSON: {type(exc).__name__}: {exc.msg} at char {exc.pos}") from exc
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidReport(f"{what} is not UTF-8 JSON: {type(exc).__name__}") from exc


def parse_json_object(data: bytes, *, what: str) -> dict[str, Any]:
    """Parse strict UTF-8 JSON (:func:`parse_json`) that must be an object.

    Raises ``InvalidReport`` naming ``what`` on any problem.
    """
    obj = parse_json(data, what=what)
    if not isinstance(obj, dict):
        raise InvalidReport(f"{what} must be a JSON object, got a {type(obj).__name__}")
    return obj
