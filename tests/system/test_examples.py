"""The scripts in examples/ run as documented (small sizes) and print sound numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_sensitive_survey() -> None:
    out = _run("sensitive_survey.py", "--n", "600", "--seed", "4")
    assert "mechanism binary-rr, ε = 1" in out
    assert "ε spent 1" in out and "600 reports accepted" in out
    truth = int(re.search(r"true number of yes:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    match = re.search(r"estimated:\s+([-\d.]+) ± ([\d.]+) \(95% CI ([-\d.]+) to ([-\d.]+)\)", out)
    assert match is not None, out
    count, stderr, low, high = (float(g) for g in match.groups())
    assert abs(count - truth) <= 5 * stderr  # unbiased with the stderr it prints (false alarm < 1e-6)
    assert low < count < high


def test_app_telemetry_with_groups() -> None:
    out = _run("app_telemetry.py", "--n", "900", "--k", "4", "--epsilon", "2", "--seed", "5")
    assert "the campaign chose grr" in out
    assert "900 devices reported" in out
    sections = re.findall(r"^(all platforms|platform = \w+) \(n = (\d+), mechanism grr\)$", out, re.M)
    assert [s[0] for s in sections] == ["all platforms", "platform = android", "platform = ios", "platform = web"]
    assert int(sections[0][1]) == 900 == sum(int(s[1]) for s in sections[1:])
    rows = re.findall(r"^(feature-\d+)\s+(\d+)\s+([-\d.]+)\s+([\d.]+)", out, re.M)
    assert len(rows) == 4 * 4
    for _, truth, count, stderr in rows:
        assert abs(float(count) - int(truth)) <= 5 * float(stderr)


def test_local_vs_central(tmp_path: Path) -> None:
    plot = tmp_path / "lvc.png"
    out = _run("local_vs_central.py", "--trials", "30", "--plot", str(plot))
    assert "local sd 303, central 1.41, a factor of 215" in out
    assert f"plot written to {plot}" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_analyst_notebook(tmp_path: Path) -> None:
    plot = tmp_path / "nb.png"
    out = _run("analyst_notebook.py", "--n", "400", "--seed", "6", "--plot", str(plot))
    assert "commute-2026: How do you usually get to work? (400 reports, ε = 2)" in out
    row = r"^(?:(amsterdam|lyon)\s+)?\s*(car|transit|bike|foot)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+(\d+)$"
    rows = re.findall(row, out, re.M)
    assert len(rows) == 8, out
    for _, _, estimate, low, high, _ in rows:
        assert float(low) < float(estimate) < float(high)
    assert f"400 reports; plot written to {plot}" in out
    assert plot.read_bytes()[:4] == b"\x89PNG" and plot.with_suffix(".csv").read_text().startswith("campaign_id,")


def test_health_survey_with_all_three_kinds() -> None:
    out = _run("health_survey.py", "--n", "1500", "--epsilon", "2", "--split", "sampling", "--seed", "3")
    assert "split sampling (requested)" in out
    assert "device 0: one envelope for the whole survey, ε spent 2, ledger total 2" in out
    assert "device 0: refused on the device: question 'age': the answer must lie in [18, 99], got 120" in out
    assert "1500 devices answered (0 rejected)" in out
    rows = re.findall(r"^  (\w+)\s+true\s+(\d+)\s+estimate\s+([-\d.]+) ±\s+([\d.]+)", out, re.M)
    assert {r[0] for r in rows} == {"no", "yes", "mail", "maps", "news", "chat", "music"}, out
    for _, truth, count, stderr in rows:
        assert abs(float(count) - int(truth)) <= 5 * float(stderr)
    mean = re.search(r"mean: true ([\d.]+), estimate ([-\d.]+) ± ([\d.]+)", out)
    assert mean is not None, out
    truth, estimate, stderr = (float(g) for g in mean.groups())
    assert abs(estimate - truth) <= 5 * stderr
