"""Commands and imports in a fresh interpreter (subprocesses, no server): what the unit tests of
tests/unit/test_client_sdk.py, test_client_ledger.py, test_compare.py and test_planner.py check in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_client_imports_neither_numpy_nor_flask() -> None:
    code = (
        "import sys, deniable.client, deniable.client.cli\n"
        "bad = [m for m in ('numpy', 'flask', 'requests', 'deniable.aggregator') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_ledger_of_a_device_that_never_answered_creates_nothing(tmp_path: Path) -> None:
    state = tmp_path / "never"
    out = subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", "ledger", "--state-dir", str(state), "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(out.stdout) == {
        "campaigns": [], "spent": 0.0, "lifetime_budget": 10.0, "remaining": 10.0,
        "max_epsilon_per_campaign": 4.0, "pending": 0,
    }
    assert not state.exists()


def test_plot_path_gets_png_and_the_message_names_the_file_written(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("deniable")), "compare", "--n", "1000", "--trials", "20", "--plot", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "plot written to out.png" in done.stdout
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "out").exists()


def test_plot_into_a_missing_folder_is_refused_before_simulating(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "deeper"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("deniable")), "compare", "--plot", str(missing / "x.png")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"the folder {missing} does not exist" in done.stderr
    assert not (tmp_path / "nope").exists() and "population" not in done.stdout


def test_deniable_plan_prints_a_table_and_json() -> None:
    args = [sys.executable, "-m", "deniable.aggregator.cli", "plan", "--epsilon", "2", "--n", "10000",
            "--question", "choice:smoke:k=2", "--question", "multi:apps:k=8,m=3",
            "--question", "number:age:lo=18,hi=99,steps=81"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:3] == ["question", "kind", "split"]
    assert "recommended: sample" in done.stdout
    as_json = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120).stdout)
    assert {r["mechanism"] for r in as_json["rows"]} == {"binary-rr", "padding", "hybrid"}
    bad = subprocess.run([*args[:4], "--n", "10", "--question", "choice:x"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "KIND:ID" in bad.stderr and "Traceback" not in bad.stderr
