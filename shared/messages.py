"""How an error message shows a value it got: the one helper, so every message truncates alike.

A message quotes what it refused (``'epsilon' must be a number in [0.001, 10], got 11``) but never echoes
an unbounded string back (a request body may hold megabytes): strings longer than :data:`SHOWN_CHARS`
are described by their length, other objects by their type (``containers=True`` shows a short JSON array
or object as compact JSON, for messages that compare two values). No I/O.
"""

from __future__ import annotations

import json

__all__ = ["SHOWN_CHARS", "show"]

#: Longest string a message quotes in full (the JavaScript client, js/src/errors.js, writes the same).
SHOWN_CHARS = 60


def show(value: object, *, containers: bool = False) -> str:
    """``'yes'``, ``3``, ``None``, ``a string of 2000 characters``, ``a list`` (with ``containers``:
    ``["a", "b"]`` or ``a list of 5000 items``): a value as a message shows it."""
    if isinstance(value, str):
        return repr(value) if len(value) <= SHOWN_CHARS else f"a string of {len(value)} characters"
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if containers and isinstance(value, list | dict):
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        except (TypeError, ValueError, RecursionError):
            text = None
        if text is not None and len(text) <= SHOWN_CHARS:
            return text
        noun = "item" if isinstance(value, list) else "key"
        return f"a {type(value).__name__} of {len(value)} {noun}{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"
