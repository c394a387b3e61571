"""Validators for the fields of a campaign descriptor: each raises ``InvalidConfig`` naming the field,
the allowed range and what it got (``'categories' must be a list of 2..4096 labels, got 1 of them``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from deniable.shared.errors import InvalidConfig, InvalidParameter
from deniable.shared.keys import check_public_key as check_key_bytes
from deniable.shared.keys import decode_key
from deniable.shared.limits import (
    MAX_CATEGORIES,
    MAX_CATEGORY_CHARS,
    MAX_GROUP_FIELDS,
    MAX_GROUP_VALUE_CHARS,
    MAX_GROUP_VALUES,
    MIN_CATEGORIES,
    ROUND_PATTERN,
    SLUG_PATTERN,
)
from deniable.shared.messages import show

__all__ = [
    "check_categories",
    "check_choice",
    "check_group_fields",
    "check_group_values",
    "check_labels",
    "check_number",
    "check_params",
    "check_public_key",
    "check_recurring",
    "check_round",
    "check_slug",
    "check_text",
    "check_trimmed_labels",
    "check_unicode",
    "plural",
]

SLUG_RE = re.compile(SLUG_PATTERN.removeprefix("^").removesuffix("$"))
#: A round label of a recurring campaign: ``"2026-11-29"``, ``"w48"``.
ROUND_RE = re.compile(ROUND_PATTERN.removeprefix("^").removesuffix("$"))


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``"1 report"``, ``"2 reports"``, ``"0 campaigns"`` (messages and command-line output)."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


def check_unicode(name: str, value: str, error: type[ValueError]) -> None:
    if not _encodes(value):
        raise error(f"{name} must be valid Unicode text (it contains a lone surrogate)")


def check_slug(name: str, value: object) -> None:
    if not isinstance(value, str) or SLUG_RE.fullmatch(value) is None:
        raise InvalidConfig(
            f"{name!r} must be a slug matching {SLUG_PATTERN} (lowercase letters, digits, '-'), "
            f"got {show(value)}"
        )


def check_text(name: str, value: object, max_chars: int) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars:
        raise InvalidConfig(f"{name!r} must be a string of 1..{max_chars} characters, got {show(value)}")
    check_unicode(repr(name), value, InvalidConfig)


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidConfig(f"{name!r} must be one of {', '.join(map(repr, allowed))}, got {show(value)}")


def check_number(name: str, value: object, upper: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= upper
    ):
        raise InvalidConfig(f"{name!r} must be a finite number in (0, {upper:g}], got {show(value)}")
    return float(value)


def check_labels(
    where: str, values: object, *, sizes: tuple[int, int], max_chars: int, noun: str
) -> tuple[str, ...]:
    """A list of ``sizes[0]..sizes[1]`` unique strings of 1..``max_chars`` characters; ``where`` is the quoted
    field name used in messages (``"'categories'"``), items are named ``'categories[3]'``."""
    low, high = sizes
    if not isinstance(values, list | tuple) or not low <= len(values) <= high:
        size = f"{len(values)} of them" if isinstance(values, list | tuple) else show(values)
        raise InvalidConfig(f"{where} must be a list of {low}..{high} {noun}, got {size}")
    # the common case (every label a valid, unique string) in a few C-level passes; the loops below name
    # the first offending label when it is not
    if (
        all(type(label) is str and 0 < len(label) <= max_chars for label in values)
        and _encodes("".join(values))
        and len(set(values)) == len(values)
    ):
        return tuple(values)
    for i, label in enumerate(values):
        item = f"{where[:-1]}[{i}]'"
        if not isinstance(label, str) or not 1 <= len(label) <= max_chars:
            raise InvalidConfig(f"{item} must be a string of 1..{max_chars} characters, got {show(label)}")
        check_unicode(item, label, InvalidConfig)
    seen: set[str] = set()
    for label in values:
        if label in seen:
            raise InvalidConfig(f"{where} must be unique, {label!r} appears twice")
        seen.add(label)
    return tuple(values)


def _encodes(text: str) -> bool:
    """True when ``text`` is valid UTF-8-encodable Unicode (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_trimmed_labels(where: str, labels: tuple[str, ...]) -> None:
    """Refuse labels with surrounding whitespace (``" yes"``, ``"yes\n"``), at campaign creation.

    They are refused rather than normalized: a label is what devices must send back byte for byte, and
    ``"yes"`` next to ``"yes "`` would be two categories that look like one on every screen. Refusing keeps
    the descriptor exactly as the admin wrote it, with the fix in the message. (Descriptors already stored
    are not re-checked, so that existing campaigns stay readable by their devices.)
    """
    for i, label in enumerate(labels):
        if label != label.strip():
            fix = f"write {label.strip()!r}" if label.strip() else "a label needs a visible character"
            raise InvalidConfig(f"{where[:-1]}[{i}]' must not begin or end with whitespace, got {label!r}; {fix}")


def check_categories(categories: object) -> tuple[str, ...]:
    return check_labels(
        "'categories'", categories, sizes=(MIN_CATEGORIES, MAX_CATEGORIES), max_chars=MAX_CATEGORY_CHARS, noun="labels"
    )


def check_group_fields(group_fields: object) -> tuple[str, ...]:
    if not isinstance(group_fields, list | tuple) or len(group_fields) > MAX_GROUP_FIELDS:
        raise InvalidConfig(
            f"'group_fields' must be a list of at most {MAX_GROUP_FIELDS} slugs, got {show(group_fields)}"
            + (f" of {len(group_fields)}" if isinstance(group_fields, list | tuple) else "")
        )
    for i, name in enumerate(group_fields):
        check_slug(f"group_fields[{i}]", name)
    if len(set(group_fields)) != len(group_fields):
        raise InvalidConfig("'group_fields' must be unique")
    return tuple(group_fields)


def check_group_values(group_values: object, group_fields: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The declared values of each group field: keys among ``group_fields``, values unique 1..64-char strings."""
    if not isinstance(group_values, Mapping):
        raise InvalidConfig(
            f"'group_values' must be an object mapping group fields to lists of values, got {show(group_values)}"
        )
    checked: dict[str, tuple[str, ...]] = {}
    for name, values in group_values.items():
        if name not in group_fields:
            fields = ", ".join(map(repr, group_fields)) or "none"
            raise InvalidConfig(f"'group_values' keys must be group fields ({fields}), got {show(name)}")
        checked[name] = check_labels(
            f"'group_values.{name}'",
            values,
            sizes=(1, MAX_GROUP_VALUES),
            max_chars=MAX_GROUP_VALUE_CHARS,
            noun="values",
        )
    return {name: checked[name] for name in group_fields if name in checked}


def check_recurring(value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidConfig(f"'recurring' must be true or false, got {show(value)}")
    return value


def check_round(value: object, error: type[ValueError]) -> str:
    """A round label: 1..32 characters, letters, digits, '.', '_', '-', starting with a letter or digit."""
    if not isinstance(value, str) or ROUND_RE.fullmatch(value) is None:
        raise error(
            f"'round' must be a label matching {ROUND_PATTERN} (e.g. '2026-11-29' or 'w48'), got {show(value)}"
        )
    return value


def check_public_key(public_key: object) -> None:
    if not isinstance(public_key, str):
        raise InvalidConfig(f"'public_key' must be a base64url string, got {show(public_key)}")
    try:
        check_key_bytes(decode_key(public_key, name="public_key"))
    except InvalidParameter as exc:
        raise InvalidConfig(str(exc)) from exc


def check_params(params: object, expected: dict[str, int], rules: Mapping[str, str]) -> dict[str, int]:
    """``params`` equal to ``expected`` (``k`` and the mechanism's public parameters, each with its ``rules``)."""
    if not isinstance(params, Mapping):
        raise InvalidConfig(f"'params' must be an object, got {show(params)}")
    if set(params) != set(expected):
        raise InvalidConfig(
            f"'params' must have exactly the keys {', '.join(map(repr, sorted(expected)))}, "
            f"got {', '.join(show(k) for k in sorted(map(str, params))) or 'none'}"
        )
    for name, value in expected.items():
        got = params[name]
        if isinstance(got, bool) or not isinstance(got, int) or got != value:
            why = "the number of categories" if name == "k" else rules.get(name, "fixed by epsilon and k")
            raise InvalidConfig(f"'params.{name}' must be {value} ({why}), got {show(got)}")
    return dict(params)
