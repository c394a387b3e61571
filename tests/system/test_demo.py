"""`deniable demo` end to end at a small n: the table, the plot, and nothing left running."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from deniable.shared.mechanisms import BinaryRR


def _demo(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "deniable.aggregator.cli", "demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        cwd=cwd,
    )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _server_processes(data_dir: str) -> list[str]:
    # -ww: never cut the command line (ps cuts it to $COLUMNS otherwise, and the data dir with it)
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if data_dir in line and "serve" in line]


def test_demo_runs_end_to_end_and_cleans_up(tmp_path: Path) -> None:
    plot = tmp_path / "out" / "deniable-demo.png"  # --out is created; the figure goes under it
    n = 400
    process = _demo("--n", str(n), "--seed", "3", "--out", "out", cwd=tmp_path)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out + err
    truth = int(re.search(r"^truth\s+(\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert 0 < truth < n
    local = re.search(r"^local \(binary-rr\)\s+([-\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    central = re.search(r"^central \(discrete-laplace\)\s+([-\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    gaussian = re.search(r"^central \(gaussian, δ = 1e-05\)\s+([-\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert local and central and gaussian, out
    # The answers are unbiased with the stderr they print: within 5 stderr (false alarm ~6e-7 each).
    for match in (local, central, gaussian):
        count, half, stderr = (float(g) for g in match.groups())
        assert abs(count - truth) <= 5 * stderr
        if match is not local:  # central: the integer interval of the noise's exact law, within a point of z·sd
            assert half == round(half) and abs(half - 1.96 * stderr) <= 1
            continue
        # local: the score interval, which for binary RR (a variance that does not depend on the count) is
        # ĉ ± (z·stderr + ½/(p − q)), the ½ being its continuity correction
        correction = 0.5 / BinaryRR(1.0).gap
        assert abs(half - 1.96 * stderr - correction) <= 0.06  # printed to 0.1 and 0.01
    assert float(local.group(3)) > 10 * float(central.group(3))
    budget = r"central budget \(ε, δ\) = \(3, 1e-05\): spent ε = 2 at δ = 1e-05 \(1 left; by rule: sequential 2"
    assert re.search(budget, out), out
    assert "opted in to trust the curator" in out
    assert out.startswith("ε = 1 means that whatever one person answers") and "≈ 2.72 times" in out
    assert f"comparison plot written to {plot}" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "devices" in err  # the progress bars
    url = re.search(r"aggregator running at http://127\.0\.0\.1:(\d+) \(data in (\S+),", out)
    assert url is not None
    port, data_dir = int(url.group(1)), url.group(2)
    assert not _listening(port)
    assert not Path(data_dir).exists()
    assert _server_processes(data_dir) == []


def test_ctrl_c_stops_the_server(tmp_path: Path) -> None:
    process = _demo("--n", "20000", "--no-plot")
    assert process.stdout is not None
    line = process.stdout.readline() + process.stdout.readline()  # what ε means, then the server
    url = re.search(r"127\.0\.0\.1:(\d+) \(data in (\S+),", line)
    assert url is not None, line
    port, data_dir = int(url.group(1)), url.group(2)
    assert _listening(port)
    time.sleep(1.0)  # let the fleet start sending
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted; the server was stopped" in out
    assert not _listening(port)
    assert _server_processes(data_dir) == []
    assert not Path(data_dir).exists()


def test_bad_arguments_are_refused_before_starting_anything(tmp_path: Path) -> None:
    process = _demo("--n", "5")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "need --n >= 10" in out
    missing = tmp_path / "no" / "such"
    process = _demo("--out", str(missing))
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2 and f"its parent {missing.parent} does not exist" in out
    assert not (tmp_path / "no").exists()


def test_the_epsilon_range_is_the_campaigns_and_refused_before_starting_anything() -> None:
    process = _demo("--n", "20", "--epsilon", "11", "--no-plot")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out.strip() == "deniable demo: --epsilon must be a number in [0.001, 10], got 11"


def test_a_failure_midway_is_reported_and_stops_the_server() -> None:
    """The aggregator dies while the fleet is sending: the demo says so, exits 1 and leaves nothing behind."""
    process = _demo("--n", "20000", "--no-plot")
    assert process.stdout is not None
    head = process.stdout.readline() + process.stdout.readline()
    url = re.search(r"127\.0\.0\.1:(\d+) \(data in (\S+),", head)
    assert url is not None, head
    time.sleep(1.0)  # let the fleet start sending
    servers = _server_processes(url.group(2))
    assert servers, "the demo's server is not running"
    for line in servers:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    out, _ = process.communicate(timeout=120)
    out = head + out
    assert process.returncode == 1, out
    assert "deniable demo failed: " in out and "the server was stopped" in out
    url = re.search(r"127\.0\.0\.1:(\d+) \(data in (\S+),", out)
    assert url is not None
    assert not _listening(int(url.group(1)))
    assert _server_processes(url.group(2)) == []
    assert not Path(url.group(2)).exists()


def test_demo_dashboard_serves_until_ctrl_c_then_leaves_nothing(tmp_path: Path) -> None:
    import requests

    process = _demo("--n", "60", "--seed", "4", "--no-plot", "--dashboard", cwd=tmp_path)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("press Ctrl-C"):
            break
    out = "".join(lines)
    url = re.search(r"^dashboard: (http://127\.0\.0\.1:(\d+)/dashboard)$", out, re.M)
    token_file = re.search(r"^sign in with the analyst token in (\S+) ", out, re.M)
    assert url and token_file, out
    assert oct(Path(token_file.group(1)).stat().st_mode & 0o777) == "0o600"
    session = requests.Session()
    form = session.get(url.group(1), timeout=30)
    assert form.status_code == 200 and "Sign in" in form.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    token = Path(token_file.group(1)).read_text().strip()
    listed = session.post(url.group(1) + "/sign-in", data={"token": token, "csrf": csrf}, timeout=30)
    assert listed.status_code == 200 and "demo-local" in listed.text and "demo-central" in listed.text
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + rest + err
    assert "server stopped; nothing left running" in rest
    assert not _listening(int(url.group(2)))
    assert not Path(token_file.group(1)).exists()
