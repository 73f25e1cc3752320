"""Each artefact that crosses a stage boundary is spelled by one module (docs/INTERFACES.md): the
run directory (hearsay.contracts.run_dir), the score files (hearsay.contracts.score_file), the
exported model folder
(hearsay.contracts.model_dir) and the bundle (hearsay.bundle). No other module under src/hearsay
may write
their file or folder names as string literals: it says run_dir.META, score_file.SIDECAR, ...

A literal counts when it is code, not prose: docstrings and strings with whitespace in them (help
texts, messages) are left alone; a name matches a whole path segment ("final" in "final/x", not in
"finalise") or, for a suffix such as ".meta.json", the literal's end."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hearsay import bundle
from hearsay.contracts import model_dir, run_dir, score_file

SRC = Path(__file__).resolve().parents[1] / "src" / "hearsay"

# owner (relative to src/hearsay; a folder owns every module in it) -> the names only it spells
OWNED = {
    "contracts/run_dir.py": [run_dir.CONFIG, run_dir.META, run_dir.STATE, run_dir.READOUT,
                   run_dir.CHECKPOINTS, run_dir.FINAL, run_dir.WEIGHTS, run_dir.OPTIMIZER],
    "contracts/score_file.py": [score_file.SIDECAR, score_file.DETECTOR_SCORES],
    "contracts/model_dir.py": [model_dir.ONNX, model_dir.INT8, model_dir.FRONT_END,
                               model_dir.PARITY, model_dir.PORTABLE, model_dir.THRESHOLDS,
                               model_dir.CONFIG],
    "bundle": [bundle.META, bundle.DIAG, bundle.IDENTITY],
}
# SHA256SUMS names three artefacts (the model folder, the fold files, a published checkpoint):
# inside the exporter and the scorer it can only mean the model folder's
SUMS_USERS = ("export", "deploy")


def literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every whitespace-free string constant in `path` but its docstrings
    (f-string parts too)."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and not re.search(r"\s", n.value)]


def spells(text: str, name: str) -> bool:
    if name.startswith("."):
        return text.endswith(name)
    return name in text.split("/")


def owner_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    if rel.parts[0] == "contracts":  # the artefact floor: each of its modules owns its own names
        return rel.as_posix()
    return rel.parts[0] if len(rel.parts) > 1 else rel.name


def strays(root: Path = SRC) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        mine = owner_of(root / rel) if root == SRC else rel.parts[0]
        names = [n for owner, ns in OWNED.items() if owner != mine for n in ns]
        if rel.parts[0] in SUMS_USERS:
            names.append(model_dir.SUMS)
        found += [f"{rel}:{line}: {text!r} (its owner's constant)" for line, text in literals(path)
                  for name in names if spells(text, name)]
    return found


def test_no_module_spells_another_artefacts_names():
    found = strays()
    assert not found, "spell these with the owning module's names:\n" + "\n".join(found)


def test_the_scan_finds_a_name_written_out_and_ignores_prose(tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "leaky.py").write_text(
        '"""run_meta.json in a docstring is prose."""\n'
        'HELP = "reads RUN/run_meta.json"  # a message: prose\n'
        'META = "run_meta.json"\n'
        'def f(run, key):\n'
        '    return run / "final/model.safetensors", f"{key}.csv.meta.json", "SHA256SUMS"\n'
        'WORD = "finalise"\n')
    found = strays(tmp_path)
    assert sorted(f.split(": ")[1].split(" ")[0] for f in found) == sorted([
        "'run_meta.json'", "'final/model.safetensors'", "'final/model.safetensors'",
        "'.csv.meta.json'", "'SHA256SUMS'"])
