"""The one list of local mechanisms: every place that needs a mechanism by its wire name asks here.

A mechanism class knows itself: its wire ``name``, its ``kind`` (``choice``: one of k categories, a
frequency oracle of :mod:`.base`; ``multi``: a set of at most m of k options, :mod:`.sets`; ``number``: a
bounded number, :mod:`.mean`), the Python type of its wire report (``wire_type``: ``int``, ``str`` or
``dict``, JSON integer, string or object) and how a message describes it (``wire_description``), its public
parameters (``public_params()``, e.g. OLH's g), and, for the auditor and the simulations, the support
pattern and the split of its simulated output. The descriptor, the payload codec, the OpenAPI document,
the auditor and the test harness read these from the class found here; nothing else lists mechanisms.

The built-in mechanisms are registered in one list, in ``deniable.shared.mechanisms`` (the package, which
Python imports before any of its modules); registering a new one is one :func:`register` call (also usable
as a class decorator). A test may register a throwaway one and :func:`unregister` it afterwards. Names are
unique across kinds. No I/O.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from deniable.shared.errors import InvalidParameter

__all__ = ["JSON_TYPES", "KINDS", "REGISTRY", "Kind", "mechanism_class", "mechanism_names", "register", "unregister"]

Kind = Literal["choice", "multi", "number"]
#: The kinds of answer a local mechanism randomizes.
KINDS: tuple[Kind, ...] = ("choice", "multi", "number")
#: JSON Schema type of each wire report type.
JSON_TYPES: dict[type, str] = {int: "integer", str: "string", dict: "object"}

#: Kind → wire name → class, in registration order (the built-in ones first).
REGISTRY: dict[str, dict[str, type[Any]]] = {kind: {} for kind in KINDS}

_C = TypeVar("_C", bound=type[Any])


def register(cls: _C) -> _C:
    """Add a mechanism class to the registry (a class decorator); its name must be new in every kind."""
    name, kind = getattr(cls, "name", None), getattr(cls, "kind", None)
    if not isinstance(name, str) or not name or kind not in REGISTRY:
        raise InvalidParameter(f"a mechanism needs a wire 'name' and a 'kind' in {KINDS}, got {name!r}, {kind!r}")
    if getattr(cls, "wire_type", None) not in JSON_TYPES:
        raise InvalidParameter(f"mechanism {name!r} needs a 'wire_type' among int, str, dict")
    for registered in REGISTRY.values():
        if name in registered and registered[name] is not cls:
            raise InvalidParameter(f"a mechanism named {name!r} is already registered")
    REGISTRY[kind][name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a mechanism (tests that registered a throwaway one)."""
    for registered in REGISTRY.values():
        registered.pop(name, None)


def mechanism_names(kind: Kind = "choice") -> tuple[str, ...]:
    """The wire names of one kind, in registration order."""
    return tuple(REGISTRY[kind])


def mechanism_class(name: object, kind: Kind = "choice") -> type[Any] | None:
    """The class of wire name ``name`` in ``kind``, or None."""
    return REGISTRY[kind].get(name) if isinstance(name, str) else None
