"""The package's shape: no import cycle between hearsay's modules, nothing but `hearsay` installed
at the top level, every module short enough to read in one sitting.

The import graph is read from the source (ast, nothing imported): an edge A -> B for every
`import hearsay.B` / `from hearsay.B import x` anywhere in A, function-level imports included
(a lazy import still ties the two modules together). `from hearsay.P import M` where M is a
submodule is an edge to that submodule. The implicit import of a package's `__init__` when one of
its submodules is imported is not an edge: a package that imports its own submodules is not a
cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 400  # STYLE: one module per stage, each under ~400 lines


def modules(src: Path = SRC) -> dict[str, Path]:
    """{dotted name: file} for every module of the hearsay package under src."""
    found = {}
    for path in sorted((src / "hearsay").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods
                           else node.module for a in node.names]
            for t in targets:
                while t and t not in mods:  # hearsay.x.y (a name in x) -> hearsay.x
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, colours white/grey/black)."""
    colour = dict.fromkeys(graph, 0)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour[nxt] == 1:
                return stack[stack.index(nxt):] + [nxt]
            if colour[nxt] == 0 and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if colour[node] == 0 and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_hearsay_modules():
    cycle = find_cycle(import_graph(modules()))
    assert cycle is None, ("import cycle: " + " -> ".join(cycle) + " (move what both sides "
                           "need into a leaf module that imports neither)")


def test_the_cycle_finder_sees_a_lazy_import_cycle():
    graph = {"hearsay.a": {"hearsay.b"}, "hearsay.b": {"hearsay.c"}, "hearsay.c": {"hearsay.a"},
             "hearsay.d": set()}
    assert find_cycle(graph) == ["hearsay.a", "hearsay.b", "hearsay.c", "hearsay.a"]
    assert find_cycle({"hearsay.a": {"hearsay.b"}, "hearsay.b": set()}) is None


def test_the_graph_counts_function_level_and_submodule_imports(tmp_path):
    pkg = tmp_path / "hearsay"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from hearsay.sub import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("def f():\n    from hearsay import top\n")
    (pkg / "top.py").write_text("from hearsay.sub.leaf import f\n")
    mods = {"hearsay": pkg / "__init__.py", "hearsay.sub": pkg / "sub" / "__init__.py",
            "hearsay.sub.leaf": pkg / "sub" / "leaf.py", "hearsay.top": pkg / "top.py"}
    graph = import_graph(mods)
    assert graph["hearsay.sub"] == {"hearsay.sub.leaf"}
    assert graph["hearsay.sub.leaf"] == {"hearsay.top"} and graph["hearsay.top"] == {
        "hearsay.sub.leaf"}
    assert find_cycle(graph) is not None


@pytest.mark.parametrize("name", ["export", "bundle", "train", "runner"])
def test_nothing_but_hearsay_is_importable_at_the_top_level(name, tmp_path):
    """Run from an empty folder (python puts the working directory on sys.path)."""
    r = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, r.stderr


def test_hearsay_export_is_inside_the_package():
    code = "import hearsay.export.probe as p; print(p.__file__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(SRC / "hearsay" / "export")


def test_every_module_is_short_enough_to_read():
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_the_deploy_scorer_is_a_leaf():
    """No other module imports hearsay.deploy: what the export, the demo and the benchmarks share
    with the scorer (the CPU engine, the model folder, the windows) lives in modules of its own."""
    graph = import_graph(modules())
    def in_deploy(name: str) -> bool:
        return name == "hearsay.deploy" or name.startswith("hearsay.deploy.")

    importers = sorted(name for name, deps in graph.items()
                       if not in_deploy(name) and any(in_deploy(d) for d in deps))
    assert not importers, f"modules importing the scorer (import what it shares): {importers}"


MAX_TOP = 8  # modules loose at the top of src/hearsay (its __init__ included)


def top_level(mods: dict[str, Path]) -> list[str]:
    """The modules whose file lies directly in src/hearsay/ (its __init__ included)."""
    top = mods["hearsay"].parent
    return sorted(name for name, path in mods.items() if path.parent == top)


def test_few_modules_are_loose_at_the_top():
    """What a module holds shows in the floor it lives on (detector/, engines/, metrics/, util/,
    contracts/, sound/) or the stage it serves: only the command and a few others stay loose."""
    loose = top_level(modules())
    assert len(loose) <= MAX_TOP, (f"{len(loose)} modules loose at the top of src/hearsay (at most "
                                   f"{MAX_TOP}; move each to the floor named by what it holds): "
                                   f"{loose}")


def test_the_top_level_count_sees_files_not_packages(tmp_path):
    pkg = tmp_path / "hearsay"
    (pkg / "util").mkdir(parents=True)
    for rel in ("__init__.py", "cli.py", "loose.py", "util/__init__.py", "util/files.py"):
        (pkg / rel).write_text("")
    assert top_level(modules(tmp_path)) == ["hearsay", "hearsay.cli", "hearsay.loose"]


STAGES = ("bundle", "train", "evaluate", "export", "deploy", "publish", "demo")


def stage_edges(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b' for every import from one stage package into another, or from a floor (any
    module outside the stages, `hearsay.cli` excepted: it dispatches to them) into a stage;
    the demo runs every stage, so it may import them."""
    def stage(name: str) -> str | None:
        parts = name.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in STAGES else None

    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps
                  if stage(b) and stage(a) != stage(b) and a != "hearsay.cli"
                  and stage(a) != "demo")


def test_no_stage_imports_another_and_no_floor_imports_a_stage():
    """Stages (bundle, train, evaluate, export, deploy, publish) import only the floors
    (hearsay.contracts, hearsay.sound and the shared top-level modules): what two stages share
    is an artefact or a sound rule, and lives there."""
    edges = stage_edges(import_graph(modules()))
    assert not edges, ("imports across stages (move what both need into a floor module):\n"
                       + "\n".join(edges))


def test_the_stage_rule_sees_a_stage_and_a_floor_reaching_into_another_stage():
    graph = {"hearsay.train.loop": {"hearsay.evaluate.score", "hearsay.sound.audio"},
             "hearsay.sound.audio": {"hearsay.bundle.build"},
             "hearsay.cli": {"hearsay.train"}, "hearsay.demo": {"hearsay.export.parity"},
             "hearsay.evaluate.score": {"hearsay.evaluate.inputs", "hearsay.contracts.bundle"}}
    assert stage_edges(graph) == ["hearsay.sound.audio -> hearsay.bundle.build",
                                  "hearsay.train.loop -> hearsay.evaluate.score"]
