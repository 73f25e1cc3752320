"""Fingerprint a `hearsay demo` output folder: one sha256 per artefact, timings left out, so two
trees (before and after a refactoring) can be compared byte for byte.

    HEARSAY_GIT_SHA=fixed hearsay demo --out /tmp/fp/run && mv /tmp/fp/run /tmp/fp/before
    python scripts/fingerprint.py /tmp/fp/before > before.txt   # ... same for the other tree
    diff before.txt after.txt                                  # empty: behaviour unchanged

Run both demos in the same folder (paths are recorded in run_meta and the CSVs) with the same
HEARSAY_GIT_SHA (the git sha is part of every checkpoint). What is hashed, per line "name sha256":

* the bundle's tree-sha and its diagnostics.json;
* per run (folds 0-4 and full): config.json (its config hash), run_meta.json minus timings
  (step_t, throughput, wall_s), every checkpoint's three files, the final model, and the CPU-smoke
  losses of run_meta's history on their own line;
* every score CSV under models/ and outputs/, the deploy scorer's CSV;
* the exported model.onnx and model.int8.onnx, parity.json, and the exported model's logits on
  fixed inputs made here (onnxruntime, fp32; the inputs depend on nothing in the tree).

Exit codes: 0 printed, 2 usage (not a demo output folder).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

TIMINGS = {"step_t", "throughput", "wall_s"}  # run_meta keys that measure time, not behaviour


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_sha(path: Path, drop: set[str] = frozenset()) -> str:
    doc = {k: v for k, v in json.loads(path.read_text()).items() if k not in drop}
    return sha(json.dumps(doc, sort_keys=True).encode())


def onnx_logits(model: Path) -> str:
    """sha256 of the float32 logits of `model` on 4 fixed clips of 1-2.5 s (one padded batch)."""
    import onnxruntime as ort

    rng = np.random.default_rng(20261201)
    lengths = [16_000, 24_000, 32_000, 40_000]  # samples @ 16 kHz
    values = np.zeros((len(lengths), max(lengths)), np.float32)
    mask = np.zeros_like(values, dtype=np.int64)
    for i, n in enumerate(lengths):
        values[i, :n] = rng.standard_normal(n).astype(np.float32)
        mask[i, :n] = 1
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # one thread: the same summation order on every run
    session = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input_values": values, "attention_mask": mask})[0]
    return sha(np.ascontiguousarray(logits, np.float32).tobytes())


def fingerprint(out: Path) -> list[str]:
    tree = json.loads((out / "bundle/bundle_meta.json").read_text())["tree_sha"]
    lines = [f"bundle.tree_sha {tree}",
             f"bundle/diagnostics.json {json_sha(out / 'bundle/diagnostics.json')}"]
    for run in sorted((out / "runs").iterdir()):
        name = f"runs/{run.name}"
        meta = json.loads((run / "run_meta.json").read_text())
        lines.append(f"{name}/config.json {sha((run / 'config.json').read_bytes())}")
        lines.append(f"{name}/run_meta.json-timings {json_sha(run / 'run_meta.json', TIMINGS)}")
        lines.append(f"{name}/losses {sha(json.dumps(meta['history']['loss']).encode())}")
        for f in sorted((run / "checkpoints").rglob("*")) + sorted((run / "final").iterdir()):
            if f.is_file():
                lines.append(f"{f.relative_to(out)} {sha(f.read_bytes())}")
    for f in sorted((out / "models").rglob("*.csv")) + sorted((out / "outputs").rglob("*.csv")):
        lines.append(f"{f.relative_to(out)} {sha(f.read_bytes())}")
    lines.append(f"deploy_scores.csv {sha((out / 'deploy_scores.csv').read_bytes())}")
    for f in ("model.onnx", "model.int8.onnx", "parity.json"):
        if (out / "export" / f).is_file():
            lines.append(f"export/{f} {sha((out / 'export' / f).read_bytes())}")
    lines.append(f"export/model.onnx-logits {onnx_logits(out / 'export/model.onnx')}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "runs").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(fingerprint(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
