"""``deniable ARGS`` in a subprocess (``python -m deniable.aggregator.cli``), as the system tests run it."""

from __future__ import annotations

import subprocess
import sys

__all__ = ["deniable"]


def deniable(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the command with this interpreter, its output captured as text (``env``: the whole environment, as
    for :func:`subprocess.run`; None inherits this process's)."""
    return subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", *args], capture_output=True, text=True, timeout=timeout,
        env=env,
    )  # fmt: skip
