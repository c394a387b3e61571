"""The device known-answer vectors ``tests/vectors/device-v1.json`` still say what today's Python code does.

The same file is what ``js/test/`` checks the JavaScript client against (``node --test``, run by
``make test``), so this test is the Python half of the byte-compatibility contract: if a Python sampler,
the HMAC_DRBG, ``exp_lower`` or the canonical JSON changes its output, this fails before the JS tests
silently check against stale answers. Regenerate with ``tests/vectors/make_device_vectors.py`` only when
such a change is intended (and then the JS client must change with it).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).parents[1] / "vectors"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_device_vectors", VECTORS / "make_device_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDED: dict[str, Any] = json.loads((VECTORS / "device-v1.json").read_text(encoding="utf-8"))
TODAY: dict[str, Any] = json.loads(json.dumps(_generator().build(), ensure_ascii=False))


@pytest.mark.parametrize("section", sorted(RECORDED))
def test_recorded_section_is_what_python_computes_today(section: str) -> None:
    assert TODAY[section] == RECORDED[section]


def test_every_section_is_recorded() -> None:
    assert set(TODAY) == set(RECORDED)
    assert len(RECORDED["exp_lower"]) >= 20
    assert {case["sampler"] for case in RECORDED["samplers"]} >= {
        "randomized_response",
        "unary_bits",
        "discrete_gaussian",
    }
