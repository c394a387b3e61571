"""The docs a newcomer follows say what the code does (no server needed: these read files and signatures)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from deniable.aggregator.commands import DEFAULT_DATA_DIR
from deniable.client.fleet import simulate_fleet
from deniable.shared.limits import CAMPAIGN_EPSILON, MAX_BODY_BYTES_DEFAULT, range_text

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
AGGREGATOR_DOC = (ROOT / "docs" / "aggregator.md").read_text()


def _shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_readme_urls_with_a_query_are_quoted_for_zsh() -> None:
    for block in _shell_blocks(README):
        for line in block.splitlines():
            for url in re.findall(r"(\S*localhost:\d+\S*|\S*127\.0\.0\.1:\d+\S*)", line):
                if "?" in url:
                    assert url[0] in "'\"", f"unquoted URL with '?' (a glob in zsh): {url}"


def test_readme_uses_the_cli_default_data_dir_and_it_is_ignored() -> None:
    assert DEFAULT_DATA_DIR == "deniable-data"
    assert "./data" not in README and f"./{DEFAULT_DATA_DIR}" in README
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/deniable-data/" in ignored and "/data/" in ignored


def test_readme_shows_simulate_fleet_with_its_real_signature() -> None:
    shown = re.search(r"simulate_fleet\(url, campaign_id, values, [^)]*\)", README)
    assert shown is not None
    parameters = inspect.signature(simulate_fleet).parameters
    keyword_only = {name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    text = shown.group(0)
    star = text.index("*") if "*" in text else len(text)
    for name in re.findall(r"(\w+)=", text):
        assert name in parameters, name
        assert (name in keyword_only) == (text.index(name) > star), f"{name} shown in the wrong position"


def test_aggregator_doc_lists_every_query_parameter_of_the_estimate_route() -> None:
    from deniable.aggregator.api.estimates import estimate

    route = next(line for line in AGGREGATOR_DOC.splitlines() if "/estimate[" in line)
    for name in estimate.query_params:  # type: ignore[attr-defined]
        assert f"{name}=" in route, f"docs/aggregator.md: the estimate route omits {name!r}"
    storage = AGGREGATOR_DOC.split("## Storage", 1)[1].split("\n## ", 1)[0]
    items = [item.split("\n\n", 1)[0] for item in storage.split("\n- ")[1:]]  # an item ends at a blank line
    assert all("Rounds" not in item for item in items), "the Rounds paragraph sits inside the storage list"


def test_the_campaign_epsilon_range_is_stated_the_same_way_in_the_docs() -> None:
    stated = range_text(CAMPAIGN_EPSILON)
    wire = (ROOT / "docs" / "wire-format.md").read_text()
    for name, text in (("README.md", README), ("docs/aggregator.md", AGGREGATOR_DOC), ("docs/wire-format.md", wire)):
        assert stated in text, f"{name} does not state the ε range {stated}"
        for wrong in ("(0, 10]", "0.001..10", "(0, 20]"):
            assert wrong not in text, f"{name} states another ε range: {wrong}"


def test_production_page_has_tls_tokens_backups_upgrades_and_sizing_from_the_benchmarks() -> None:
    page = (ROOT / "docs" / "production.md").read_text()
    for section in ("## TLS termination in front (nginx)", "## Tokens and key files", "## Backups",
                    "## Upgrades", "## Resource sizing"):  # fmt: skip
        assert section in page
    nginx = re.search(r"```nginx\n(.*?)```", page, re.S)
    assert nginx is not None
    config = nginx.group(1)
    assert "proxy_pass" in config and "ssl_certificate" in config
    assert re.search(rf"client_max_body_size\s+{MAX_BODY_BYTES_DEFAULT >> 20}m;", config)  # = --max-body-bytes
    assert "X-Forwarded-For $remote_addr" in config  # the client's address, not a chain the client wrote
    assert config.index("limit_conn_zone") < config.index("server {")  # an http-level directive (nginx -t)
    assert "$remote_addr" not in config.split("log_format", 1)[1].split(";", 1)[0]  # no address in the log
    for figure in re.findall(r"\*\*([\d,.]+ (?:reports/s|ms|bytes))\*\*", page):
        assert figure in README, f"production.md cites {figure!r}, which is not a README benchmark figure"
    assert "docs/production.md" in README


def test_the_architecture_layout_names_every_module_and_nothing_else() -> None:
    """docs/architecture.md's layout table names each module of shared/, client/ and aggregator/ (a path, or a
    file name after the path of its row's first module or folder), and names no module that is gone."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    named: set[str] = set()
    for row in doc[doc.index("## The layout as built") :].splitlines():
        if not row.startswith("| `"):
            continue
        base = None
        for name in re.findall(r"`([^`]+)`", row.split("|")[1]):
            if "/" in name:
                base = name.rsplit("/", 1)[0] if name.endswith(".py") else name.rstrip("/")
                if name.endswith(".py"):
                    named.add(name)
            elif name.endswith(".py") and base is not None:
                named.add(f"{base}/{name}")
    modules = {
        str(path.relative_to(ROOT))
        for folder in ("shared", "client", "aggregator")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert sorted(modules - named) == [], "add a line for each to docs/architecture.md"
    assert sorted(named - modules) == [], "these modules are gone: update docs/architecture.md"
