"""The source layout keeps its naming rules (read from the source files; nothing is imported).

* No two modules of one package tree share a name (``deniable.aggregator`` had ``openapi`` and
  ``estimates`` twice, once as the service and once as its route): a name says which module it is.
* A dataclass with a boolean field is built with keywords only: ``Receipt(..., False, False, ..., True)``
  said nothing about which flag was which.
* ``ReportRow`` means one thing (it was also the device's row of an ε spend, now ``SpendRow``), and so does
  every class name.
* An internal module's ``__all__`` holds only what other modules use.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Each package tree and its source folder (pyproject's package-dir; deniable.analyst is its own package, and
#: the shuffler a separate service run by another party, whose app/service/store mirror the aggregator's).
TREES = {
    "deniable.shared": ROOT / "shared",
    "deniable.client": ROOT / "client",
    "deniable.aggregator": ROOT / "aggregator",
    "deniable.analyst": ROOT / "aggregator" / "analyst",
    "deniable.aggregator.shuffler": ROOT / "aggregator" / "shuffler",
}


def _modules(tree: str) -> list[Path]:
    folder = TREES[tree]
    others = [p for name, p in TREES.items() if name != tree and p.is_relative_to(folder)]
    return [p for p in folder.rglob("*.py") if not any(p.is_relative_to(o) for o in others)]


def test_no_two_modules_of_a_package_tree_share_a_name() -> None:
    for tree in TREES:
        seen: dict[str, list[str]] = defaultdict(list)
        for path in _modules(tree):
            if path.stem != "__init__":
                seen[path.stem].append(str(path.relative_to(ROOT)))
        twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
        assert not twice, f"{tree}: modules sharing a name: {twice}"


def _dataclasses() -> list[tuple[Path, ast.ClassDef, ast.expr]]:
    found = []
    for tree in TREES:
        for path in _modules(tree):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    for decorator in node.decorator_list:
                        target = decorator.func if isinstance(decorator, ast.Call) else decorator
                        if isinstance(target, ast.Name) and target.id == "dataclass":
                            found.append((path, node, decorator))
    return found


def test_dataclasses_with_a_boolean_field_take_keywords_only() -> None:
    offenders = []
    for path, node, decorator in _dataclasses():
        fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and "ClassVar" not in ast.unparse(s.annotation)]
        if not any("bool" in ast.unparse(s.annotation) for s in fields):
            continue
        keywords = {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}
        kw_only = keywords.get("kw_only")
        if not (isinstance(kw_only, ast.Constant) and kw_only.value is True):
            offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not offenders, f"dataclasses with a bool field but no kw_only=True: {offenders}"


def test_a_class_name_means_one_class_in_all_of_deniable() -> None:
    """``RateLimited`` was the device client's error and a werkzeug class of the service, ``Plan`` the survey
    planner's and the batch kernel's, ``Connection`` the database protocol and the analyst's HTTP client."""
    where: dict[str, list[str]] = defaultdict(list)
    for tree in TREES:
        for path in _modules(tree):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where[node.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
    assert where["ReportRow"] == ["aggregator/store.py"]  # the device's row of an ε spend is a SpendRow
    assert where["SpendRow"] == ["client/state.py"]


#: Modules whose ``__all__`` is a public surface of its own (the device SDK's top level, the analyst's client,
#: the analyst tools' Python API, and deniable.shared, the library both sides build on).
_PUBLIC_SURFACES = (ROOT / "client" / "__init__.py", ROOT / "aggregator" / "analyst", ROOT / "aggregator" / "tools",
                    ROOT / "shared")  # fmt: skip


def test_internal_modules_export_only_what_other_modules_use() -> None:
    """Each name in the ``__all__`` of an internal module (the service and the device client's parts) is
    named in another file of the repository: code, a test, a benchmark, an example or the docs."""
    import re

    texts = {
        path: path.read_text(encoding="utf-8")
        for folder in ("shared", "client", "aggregator", "tests", "benchmarks", "examples", "docs")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".md") and path.is_file()
    }
    texts[ROOT / "README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    words = {path: set(re.findall(r"\w+", text)) for path, text in texts.items()}
    unused = []
    for path in [*(ROOT / "aggregator").rglob("*.py"), *(ROOT / "client").rglob("*.py")]:
        if any(path == p or path.is_relative_to(p) for p in _PUBLIC_SURFACES):
            continue
        for node in ast.parse(texts[path]).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                for name in ast.literal_eval(node.value):
                    if not any(name in found for other, found in words.items() if other != path):
                        unused.append(f"{path.relative_to(ROOT)}: {name}")
    assert unused == [], "exported but used by no other module (drop it from __all__)"


def test_every_package_folder_is_in_pyprojects_package_list() -> None:
    """A wheel holds only the listed packages: ``deniable.aggregator.shuffler`` was missing, so `deniable
    shuffle` worked from an editable checkout and failed with ModuleNotFoundError from an installed wheel."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {name: ROOT / path for name, path in config["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            dotted = ".".join((name, *relative))
            owners = [n for n, f in folders.items() if init.parent.is_relative_to(f)]
            owner = max(owners, key=lambda n: len(folders[n].parts))
            if owner == name:
                found.add(dotted)
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
