"""Tokens (issue 12 item 5): a weak or shared token stops ``deniable serve`` at start with one line.

Before, ``DENIABLE_ADMIN_TOKEN=qzx`` was accepted (and guessed in 7.4 s at 1,562 tries/s) and equal admin and
analyst tokens ended in a traceback.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from support.server import free_port

from deniable.aggregator.secret_files import ensure_tokens, token_bits, weak_token_reason

CLI = [sys.executable, "-m", "deniable.aggregator.cli", "serve", "--host", "127.0.0.1"]


def _serve(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``deniable serve`` that must refuse to start (30 s: an old build that starts is a failure, not a hang)."""
    return subprocess.run(
        [*CLI, "--data-dir", str(data_dir), "--port", str(free_port())],
        capture_output=True, text=True, timeout=30, env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.parametrize(
    "token", ["qzx", "a" * 64, "password-password-2024", "0123456789", "tok en with spaces and more than enough"]
)
def test_weak_tokens_are_rated_weak(token: str) -> None:
    assert weak_token_reason(token) is not None


@pytest.mark.parametrize("make", [lambda: secrets.token_urlsafe(32), lambda: secrets.token_hex(16),
                                  lambda: secrets.token_hex(32)])  # fmt: skip
def test_random_tokens_of_128_bits_or_more_pass(make) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        assert weak_token_reason(make()) is None


def test_a_weak_token_stops_serve_with_one_line_naming_the_variable(tmp_path: Path) -> None:
    strong = secrets.token_urlsafe(32)
    result = _serve(tmp_path / "d", DENIABLE_ADMIN_TOKEN="qzx", DENIABLE_ANALYST_TOKEN=strong)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "DENIABLE_ADMIN_TOKEN" in lines[0] and "14 bits" in lines[0] and "128" in lines[0]
    assert "secrets.token_urlsafe(32)" in lines[0] and "qzx" not in lines[0]
    result = _serve(tmp_path / "d", DENIABLE_ADMIN_TOKEN=strong, DENIABLE_ANALYST_TOKEN="b" * 50)
    assert result.returncode != 0 and "DENIABLE_ANALYST_TOKEN" in result.stderr and "Traceback" not in result.stderr


def test_equal_tokens_are_one_line_not_a_traceback(tmp_path: Path) -> None:
    same = secrets.token_urlsafe(32)
    result = _serve(tmp_path / "d", DENIABLE_ADMIN_TOKEN=same, DENIABLE_ANALYST_TOKEN=same)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "differ" in lines[0], result.stderr
    assert same not in result.stderr


def test_a_weak_token_in_the_token_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    data = tmp_path / "d"
    ensure_tokens(data)
    (data / "tokens" / "analyst.token").write_text("short\n")
    result = _serve(data, DENIABLE_ADMIN_TOKEN="", DENIABLE_ANALYST_TOKEN="")
    assert result.returncode != 0 and "analyst.token" in result.stderr and "Traceback" not in result.stderr


def test_generated_tokens_hold_256_bits(tmp_path: Path) -> None:
    tokens = ensure_tokens(tmp_path / "d")
    for token in (tokens.admin, tokens.analyst):
        assert len(token) == 43 and token_bits(token)[0] >= 256 and weak_token_reason(token) is None
