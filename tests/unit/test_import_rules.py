"""The dependency rules of docs/architecture.md, checked on the source: each import statement of each module.

* ``deniable.shared`` imports neither ``deniable.client`` nor ``deniable.aggregator`` nor ``deniable.analyst``,
  nor Flask, werkzeug, sqlite3 or numpy at module level;
* ``deniable.client`` imports only the standard library, cryptography and ``deniable.shared``;
* in ``deniable.aggregator`` only the HTTP layer imports Flask or werkzeug: the ``api/`` subpackage (and the
  shuffler's own HTTP layer, ``shuffler/app.py``); the service, the store and everything else below it are
  plain Python;
* the analyst's tools (``aggregator/tools/``) are imported by nothing of the service.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTTP_PACKAGES = ("flask", "werkzeug", "markupsafe", "jinja2")
HTTP_LAYER = ("aggregator/api/", "aggregator/shuffler/app.py")


def imports(path: Path, *, module_level_only: bool = False) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import of a source file (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((name, node.lineno))
            found += [(f"{name}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[:2] == ["aggregator", "analyst"]:
        parts = ["analyst", *parts[2:]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "deniable." + ".".join(parts)


def sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


def offenders(folder: str, forbidden: tuple[str, ...], *, module_level_only: bool = False,
              allowed: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    bad = []
    for path in sources(folder):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(prefix) for prefix in allowed):
            continue
        for name, line in imports(path, module_level_only=module_level_only):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{rel}:{line} imports {name}")
    return bad


def test_shared_imports_neither_side_nor_io_frameworks() -> None:
    assert offenders("shared", ("deniable.client", "deniable.aggregator", "deniable.analyst", *HTTP_PACKAGES,
                                "sqlite3")) == []  # fmt: skip
    assert offenders("shared", ("numpy",), module_level_only=True) == []


def test_the_client_imports_the_standard_library_cryptography_and_shared_only() -> None:
    allowed_roots = {"deniable", "cryptography", *sys.stdlib_module_names}
    bad = []
    for path in sources("client"):
        for name, line in imports(path):
            root = name.split(".")[0]
            if root not in allowed_roots or name.startswith(("deniable.aggregator", "deniable.analyst")):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert bad == []


def test_only_the_http_layer_of_the_aggregator_imports_flask_or_werkzeug() -> None:
    assert offenders("aggregator", HTTP_PACKAGES, allowed=HTTP_LAYER) == []


@pytest.mark.parametrize("folder", ["aggregator"])
def test_nothing_of_the_service_imports_the_analyst_tools(folder: str) -> None:
    bad = [line for line in offenders(folder, ("deniable.aggregator.tools",), allowed=("aggregator/tools/",))
           if not line.startswith("aggregator/cli.py")]  # fmt: skip
    assert bad == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The scan is not vacuous: a module importing Flask is found."""
    probe = ROOT / "aggregator" / "api" / "app.py"
    assert any(name.startswith("flask") for name, _ in imports(probe))
