"""The ``deniable`` command line as a newcomer meets it: the installed entry point, run as a subprocess.

A device-only install (``pip install deniable``: no flask, numpy, matplotlib, ...) is simulated with a
``sitecustomize`` on ``PYTHONPATH`` that installs a meta-path finder refusing those modules, exactly the
``ModuleNotFoundError`` a missing extra raises.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.server import RunningServer

DENIABLE = str(Path(sys.executable).with_name("deniable"))
#: Third-party modules of the aggregator extra (pyproject.toml), blocked on a simulated device install.
AGGREGATOR_MODULES = ("flask", "werkzeug", "gunicorn", "numpy", "matplotlib", "scipy", "tqdm")
NEEDS_AGGREGATOR = ("serve", "verify", "admin")
#: The analyst's tools (deniable.aggregator.tools): their own extra, so a server install has no matplotlib.
NEEDS_TOOLS = ("compare", "audit", "demo")
#: What only the tools extra adds (blocked on a simulated server install).
TOOLS_MODULES = ("matplotlib", "scipy", "tqdm")
#: Commands of a device-only install; campaigns, estimate and timeline are the analyst's, over HTTP.
DEVICE_COMMANDS = ("submit", "ledger", "tokens", "campaigns", "estimate", "timeline")


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DENIABLE, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def device_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of a device-only install: the aggregator extra's modules cannot be imported."""
    folder = tmp_path_factory.mktemp("device-only")
    (folder / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import sys

            class _Blocker:
                blocked = {AGGREGATOR_MODULES!r}

                def find_spec(self, name, path=None, target=None):
                    if name.split(".")[0] in self.blocked:
                        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                    return None

            sys.meta_path.insert(0, _Blocker())
            """
        )
    )
    return {"PYTHONPATH": str(folder)}


def test_the_blocker_really_hides_the_extra(device_only: dict[str, str]) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import flask"], capture_output=True, text=True, env={**os.environ, **device_only}
    )
    assert probe.returncode == 1 and "No module named 'flask'" in probe.stderr


def test_device_only_help_lists_every_command_and_marks_the_extra(device_only: dict[str, str]) -> None:
    done = run("--help", env=device_only)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("    ")}
    text = " ".join(done.stdout.split())
    for command in NEEDS_AGGREGATOR:
        assert command in text
        assert f"{command} [aggregator]" in text, f"{command} is not marked as needing the aggregator extra"
    for command in NEEDS_TOOLS:
        assert f"{command} [tools]" in text, f"{command} is not marked as needing the tools extra"
    for command in DEVICE_COMMANDS:
        assert command in lines and "[aggregator]" not in lines[command]
    assert "pip install 'deniable[aggregator]'" in text


@pytest.mark.parametrize(
    "args",
    [
        ("serve",),
        ("verify",),
        ("admin", "campaigns"),
        ("compare", "--n", "100"),
        ("audit", "--trials", "200"),
        ("demo", "--no-plot"),
    ],
)
def test_device_only_commands_needing_the_extra_say_which_in_one_line(
    device_only: dict[str, str], args: tuple[str, ...], tmp_path: Path
) -> None:
    data = ("--data-dir", str(tmp_path / "data")) if args[0] in ("serve", "verify", "admin") else ()
    done = run(*args, *data, env=device_only, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    extra = "tools" if args[0] in NEEDS_TOOLS else "aggregator"
    assert f"deniable {args[0]} needs the {extra} extra" in message
    assert f"pip install 'deniable[{extra}]'" in message
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_server_install_runs_without_the_tools_extra(tmp_path: Path) -> None:
    """The service's modules import neither matplotlib, scipy nor tqdm; the tools say which extra they need."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {TOOLS_MODULES!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Blocker())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    probe = subprocess.run(
        [sys.executable, "-c", "import deniable.aggregator.api.app, deniable.aggregator.commands, "
         "deniable.aggregator.server, deniable.aggregator.central, deniable.aggregator.estimation"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    done = run("compare", "--n", "100", env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert done.returncode == 2 and "pip install 'deniable[tools]'" in done.stderr, done.stderr


def test_device_only_device_commands_work(device_only: dict[str, str], tmp_path: Path) -> None:
    ledger = run("ledger", "--state-dir", str(tmp_path / "state"), env=device_only)
    assert ledger.returncode == 0, ledger.stderr
    assert "0 reports waiting" in ledger.stdout
    tokens = run("tokens", "--data-dir", str(tmp_path / "data"), env=device_only)
    assert tokens.returncode == 0, tokens.stderr


def test_a_bad_setting_of_one_command_breaks_only_that_command(tmp_path: Path) -> None:
    bad = {"DENIABLE_PORT": "abc", "DENIABLE_WORKERS": "many"}
    assert run("--help", env=bad).returncode == 0
    assert run("serve", "--help", env=bad).returncode == 0
    ledger = run("ledger", "--state-dir", str(tmp_path / "state"), env=bad)
    assert ledger.returncode == 0, ledger.stderr
    serve = run("serve", "--data-dir", str(tmp_path / "data"), env=bad)
    assert serve.returncode != 0 and "DENIABLE_PORT must be an integer, got 'abc'" in serve.stderr
    assert "Traceback" not in serve.stderr


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"deniable {importlib.metadata.version('deniable')}"


def _commands() -> list[str]:
    from deniable.aggregator.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return list(sub.choices)  # type: ignore[arg-type]


#: Prints {command: [exit code, help text]} of the ``deniable`` script's entry point for each command named:
#: one process for all of them (21 Python start-ups cost 10-30 s on 2 cores); stdout is a pipe, as for one.
HELP_OF_EACH = """
import contextlib, io, json, sys
from deniable.aggregator.cli import main
helps = {}
for command in sys.argv[1:]:
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        try:
            code = main([command, "--help"])
        except SystemExit as exc:
            code = exc.code
    helps[command] = [code, text.getvalue()]
print(json.dumps(helps))
"""


def test_every_command_has_a_description_and_shows_its_defaults() -> None:
    done = subprocess.run([sys.executable, "-c", HELP_OF_EACH, *_commands()], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    helps = json.loads(done.stdout)
    assert list(helps) == _commands()
    for command, (code, text) in helps.items():
        assert code == 0, (command, done.stderr)
        paragraphs = text.split("\n\n")
        assert len(paragraphs) >= 3 and not paragraphs[1].startswith("options:"), f"{command} has no description"
    serve = " ".join(helps["serve"][1].split())
    for default in ("default: 127.0.0.1", "default: 8000", "DENIABLE_WORKERS; default: 2",
                    "DENIABLE_THREADS; default: 2", "default: ./deniable-data"):  # fmt: skip
        assert default in serve, default
    assert "(default: grr)" in " ".join(helps["audit"][1].split())
    assert run("serve", "--help").stdout == helps["serve"][1]  # the installed script prints the same


def test_ledger_table_has_headers_and_plurals(tmp_path: Path) -> None:
    table = run("ledger", "--state-dir", str(tmp_path / "none")).stdout.splitlines()
    assert table[0].split()[:3] == ["campaign", "ε", "spent"]
    assert "0 reports waiting" in table[-1] and "report(s)" not in table[-1]


def test_tokens_table_has_headers(tmp_path: Path) -> None:
    lines = run("tokens", "--data-dir", str(tmp_path)).stdout.splitlines()
    assert lines[0].split() == ["role", "file", "state"] and lines[1].startswith("admin")


def test_reading_output_cut_short_ends_quietly(tmp_path: Path) -> None:
    with open(tmp_path / "stderr", "w+") as stderr:
        process = subprocess.Popen(
            [DENIABLE, "ledger", "--state-dir", str(tmp_path / "state")], stdout=subprocess.PIPE, stderr=stderr
        )
        assert process.stdout is not None
        process.stdout.close()  # the reader is gone before the first line is written
        assert process.wait(60) == 141
        stderr.seek(0)
        err = stderr.read()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# ------------------------------------------------------------------------------------ against the real server


def test_submit_and_ledger_print_text_or_json(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="cli-json", question="q?", categories=["a", "b"], epsilon=0.5)
    state = ("--state-dir", str(tmp_path / "state"))
    base = ("submit", "--aggregator", aggregator.url, "--campaign", "cli-json", "--value", "a", *state)
    text = run(*base)
    assert text.returncode == 0, text.stderr
    assert "answered campaign cli-json" in text.stdout and "1 accepted" in text.stdout
    assert "0 reports still queued" in text.stdout
    again = run(*base, "--json")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["receipt"]["memoized"] and out["delivery"]["duplicate"] == 1
    ledger = json.loads(run("ledger", *state, "--json").stdout)
    assert ledger["spent"] == 0.5 and ledger["campaigns"][0]["reports"] == 1
    table = run("ledger", *state).stdout
    assert "cli-json" in table and "0 reports waiting" in table


def test_submit_piped_into_head_has_no_traceback(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="cli-pipe", question="q?", categories=["a", "b"], epsilon=0.5)
    done = subprocess.run(
        f"{DENIABLE} submit --aggregator {aggregator.url} --campaign cli-pipe --value a --json "
        f"--state-dir {tmp_path / 'state'} | head -c 1 > /dev/null",
        shell=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_verify_speaks_in_correct_plurals(aggregator: RunningServer) -> None:
    import numpy as np

    from tests.support.reports import simulate_envelopes, upload

    config = aggregator.create_campaign(id="cli-one", question="q?", categories=["a", "b"], epsilon=1.0)
    upload(aggregator, "cli-one", simulate_envelopes(config, [0], rng=np.random.default_rng(1)))
    done = run("verify", "--data-dir", str(aggregator.data_dir))
    assert done.returncode == 0, done.stderr
    assert "cli-one: 1 report," in done.stdout
    assert "1 reports" not in done.stdout and "1 campaigns" not in done.stdout
    campaigns = run("campaigns", "--data-dir", str(aggregator.data_dir)).stdout.splitlines()
    assert campaigns[0].split() == ["campaign", "trust", "status", "reports"]


def test_the_development_loop_forget_a_recreated_campaign(
    server_factory: Callable[..., RunningServer], tmp_path: Path
) -> None:
    """A campaign recreated under the same id (new key) is refused; `forget` lets the device answer it again,
    warning that it spends ε again, and the ledger keeps both spends."""
    state = ("--state-dir", str(tmp_path / "state"))
    first = server_factory("first")
    first.create_campaign(id="dev-loop", question="q?", categories=["a", "b"], epsilon=0.5)
    submit = ("submit", "--campaign", "dev-loop", "--value", "a", *state)
    assert run(*submit, "--aggregator", first.url).returncode == 0
    first.stop()
    second = server_factory("second")  # a fresh data dir: same id, new key pair
    second.create_campaign(id="dev-loop", question="q?", categories=["a", "b"], epsilon=0.5)
    refused = run(*submit, "--aggregator", second.url)
    assert refused.returncode == 1 and "changed since this device pinned it" in refused.stderr
    assert "deniable forget dev-loop" in refused.stderr
    forget = run("forget", "dev-loop", *state, "--json")
    assert forget.returncode == 0, forget.stderr
    assert "warning: forgot campaign 'dev-loop'" in forget.stderr and "spends its ε again" in forget.stderr
    assert json.loads(forget.stdout) == {"campaign_id": "dev-loop", "pinned": True, "dropped": 0, "spent": 0.5}
    again = run(*submit, "--aggregator", second.url, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["receipt"]["epsilon_spent"] == 0.5
    assert second.estimate("dev-loop")["n"] == 1
    ledger = json.loads(run("ledger", *state, "--json").stdout)
    assert ledger["spent"] == 1.0 and ledger["campaigns"][0]["reports"] == 2  # both spends stay counted
    nothing = run("forget", "never-seen", *state)
    assert nothing.returncode == 0 and "holds nothing about campaign 'never-seen'" in nothing.stderr


def test_client_forget_warns_and_drops_queued_reports(aggregator: RunningServer, tmp_path: Path) -> None:
    from deniable.client import Client, ForgetWarning

    aggregator.create_campaign(id="forget-api", question="q?", categories=["a", "b"], epsilon=1.0)
    with Client(aggregator.url, tmp_path / "s") as client:
        client.submit("forget-api", "b")  # queued, not flushed
        with pytest.warns(ForgetWarning, match=r"1 queued report dropped undelivered\). Answering it again spends"):
            result = client.forget("forget-api")
        assert (result.pinned, result.dropped, result.spent) == (True, 1, 1.0)
        assert client.pending() == [] and client.ledger().spent == 1.0
        receipt = client.submit("forget-api", "b")
        assert receipt.epsilon_spent == 1.0 and not receipt.memoized
        assert client.ledger().spent == 2.0


def test_serve_on_a_port_in_use_says_so_in_one_line_and_announces_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == f"port {port} is in use; choose another with --port"
    assert "deniable aggregator on" not in done.stdout and "Connection in use" not in done.stderr + done.stdout
    assert not (tmp_path / "data").exists()  # refused before preparing anything


def test_serve_announces_its_address_once_it_is_bound(tmp_path: Path) -> None:
    from deniable.aggregator.harness import free_port

    port = free_port()
    env = {**os.environ, "DENIABLE_ADMIN_TOKEN": secrets.token_urlsafe(32),
           "DENIABLE_ANALYST_TOKEN": secrets.token_urlsafe(32)}  # fmt: skip
    process = subprocess.Popen(
        [DENIABLE, "serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("deniable aggregator on"):
                break
        assert lines and lines[-1].startswith(f"deniable aggregator on http://127.0.0.1:{port} "), lines
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # bound when announced
            pass
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
        process.stdout.close()  # type: ignore[union-attr]
