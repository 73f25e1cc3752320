"""The two layout measures docs/BENCHMARKS.md quotes: scripts/stage_imports.py (stage-to-stage
imports from the ast graph) and scripts/clip_legs.py's call counting, each on a toy made here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "hearsay" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


FAKE = {
    "__init__.py": "",
    "cli.py": "def main():\n    from hearsay.train import loop\n",  # cli may import stages
    "metrics.py": "",
    "sound/__init__.py": "",
    "sound/audio.py": "from hearsay.bundle import load\n",  # a floor reaching up: counted
    "bundle/__init__.py": "from hearsay.sound import audio\nload = 1\n",
    "train/__init__.py": "",
    "train/loop.py": "from hearsay import metrics\nfrom hearsay.bundle import load\n",
    "evaluate/__init__.py": "",
    "evaluate/score.py": "def f():\n    import hearsay.train.loop\n",  # lazy: still an edge
    "demo/__init__.py": "from hearsay.train import loop\nfrom hearsay.evaluate import score\n",
}


def test_stage_imports_counts_cross_stage_edges_and_excuses_cli_and_demo(tmp_path):
    src = _tree(tmp_path / "src", FAKE)
    r = subprocess.run([sys.executable, str(SCRIPTS / "stage_imports.py"), "--src", str(src),
                        "--excused"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    stage = lines[1:lines.index("floor-to-stage:")]
    assert stage == ["    hearsay.evaluate.score -> hearsay.train.loop",
                     "    hearsay.train.loop -> hearsay.bundle"]
    assert "    hearsay.sound.audio -> hearsay.bundle" in lines
    assert "    hearsay.demo -> hearsay.evaluate.score" in lines
    assert "    hearsay.cli -> hearsay.train.loop" in lines
    assert lines[-2:] == ["stage-to-stage imports 2", "floor-to-stage imports 1"]


def test_stage_imports_sees_no_stage_edge_in_a_tree_of_floors_only(tmp_path):
    src = _tree(tmp_path / "src", {"__init__.py": "", "a.py": "import hearsay.b\n", "b.py": ""})
    m = _script("stage_imports")
    edges = m.classify(m.import_graph(m.modules(src)))
    assert edges == {"stage": [], "floor": [], "excused": []}


def test_stage_imports_refuses_a_folder_without_the_package(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPTS / "stage_imports.py"), "--src",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "holds no hearsay/ package" in r.stderr


def test_clip_legs_counts_files_entered_and_arrivals_from_another_file(tmp_path):
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "from toy import b\n"
        "def helper():\n    return 1\n"
        "def run():\n    helper(); helper()\n    return b.f() + b.f() + sum(b.gen())\n")
    (pkg / "b.py").write_text(
        "def f():\n    return g()\n"
        "def g():\n    return 2\n"
        "def gen():\n    yield 1\n    yield 2\n")
    (tmp_path / "outside.py").write_text("def call(fn):\n    return fn()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import outside
        from toy import a
        out, trace = _script("clip_legs").traced(outside.call, pkg, a.run)
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("toy", "toy.a", "toy.b", "outside"):
            sys.modules.pop(name, None)
    assert out == 7
    assert trace.files == ["a.py", "b.py"]
    # a.run from outside.py: 1; helper is a's own call: 0; b.f twice: 2 (b.g inside b: 0);
    # the generator is entered three times (start, after yield 1, after yield 2): 3
    assert trace.arrivals == {"a.py": 1, "b.py": 5}
    assert trace.total == 6
