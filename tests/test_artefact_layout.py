"""Each artefact that crosses a stage boundary is spelled by one module of the artefact floor,
hearsay.contracts (docs/INTERFACES.md): the run directory (run_dir), the score files (score_file),
the exported model folder (model_dir), the bundle (bundle), the pin files (pin), the STATUS file
(status), the ledger (ledger); a sums file's name by hearsay.util.hashing. No other module under
src/hearsay may write their file or folder names as string literals: it says run_dir.META,
score_file.SIDECAR, pin.FINAL, ...

A literal counts when it is code, not prose: docstrings and strings with whitespace in them (help
texts, messages) are left alone; a name matches a whole path segment ("final" in "final/x", not in
"finalise") or, for a suffix such as ".meta.json", the literal's end."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hearsay.contracts import bundle, ledger, model_dir, pin, run_dir, score_file, status
from hearsay.util import hashing

SRC = Path(__file__).resolve().parents[1] / "src" / "hearsay"

# owner (relative to src/hearsay; a folder owns every module in it) -> the names only it spells
OWNED = {
    "contracts/run_dir.py": [run_dir.CONFIG, run_dir.META, run_dir.STATE, run_dir.READOUT,
                             run_dir.CHECKPOINTS, run_dir.FINAL, run_dir.WEIGHTS,
                             run_dir.OPTIMIZER, run_dir.TRAIN_LOG, run_dir.PROGRESS],
    "contracts/score_file.py": [score_file.SIDECAR, score_file.DETECTOR_SCORES],
    "contracts/model_dir.py": [model_dir.ONNX, model_dir.INT8, model_dir.FRONT_END,
                               model_dir.PARITY, model_dir.PORTABLE, model_dir.THRESHOLDS,
                               model_dir.CONFIG],
    "contracts/bundle.py": [bundle.META, bundle.DIAG, bundle.IDENTITY, bundle.STAMPS],
    "contracts/pin.py": [pin.FINAL, pin.ABLATION],
    "contracts/status.py": [status.FILE, status.REASON],
    "contracts/ledger.py": [ledger.FILE],
    # SHA256SUMS names three artefacts (the model folder, the fold files, a published
    # checkpoint); the name is one, spelled where the sums format is read and written
    "util/hashing.py": [hashing.SUMS],
}


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
    if rel.parts[0] in ("contracts", "util"):  # floors whose modules each own their own names
        return rel.as_posix()
    return rel.parts[0] if len(rel.parts) > 1 else rel.name


def strays(root: Path = SRC) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        mine = owner_of(root / rel) if root == SRC else rel.parts[0]
        names = [n for owner, ns in OWNED.items() if owner != mine for n in ns]
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


def test_the_scan_finds_each_floor_modules_names_in_a_stage(tmp_path):
    (tmp_path / "evaluate").mkdir()
    (tmp_path / "evaluate" / "leaky.py").write_text(
        'A = "final_runs.json"\nB = "ablation_runs.json"\nC = "bundle_meta.json"\n'
        'D = "selection.json"\nE = "STATUS"\nF = "ledger.csv"\nG = "REASON"\n'
        'H = "models/x/final_runs.json"\nI = "train_log.csv"\n')
    found = sorted(f.split(": ")[1].split(" ")[0] for f in strays(tmp_path))
    assert found == sorted(["'final_runs.json'", "'ablation_runs.json'", "'bundle_meta.json'",
                            "'selection.json'", "'STATUS'", "'ledger.csv'", "'REASON'",
                            "'models/x/final_runs.json'", "'train_log.csv'"])


def test_every_artefact_name_is_owned_by_the_floor():
    # the names of what crosses a stage boundary live in hearsay.contracts (the sums file's in
    # hearsay.util.hashing, whose format it is): no stage package owns an artefact's name
    assert {o for o in OWNED if not o.startswith("contracts/")} == {"util/hashing.py"}
    names = [n for ns in OWNED.values() for n in ns]
    assert len(names) == len(set(names)), "a name owned twice"
