"""Parity B in two places: the box records its logits after training, the laptop compares.

    parity_box.record(bundle, RUN_DIR, OUT.json, 50, cfg)     # hearsay score-run --parity-clips
    report = parity_box.compare(MODEL_DIR, OUT.json, bundle)   # hearsay parity --box-logits

The clips (`parity_rows`): test core rows of the bundle in manifest order, those of at least
MIN_S (3 s) first, topped up with the shorter ones when the test split has fewer than N long
ones; each is the model input hearsay score builds at max_s = MAX_S (8 s): the clip capped at
8 s, band-limited and normalised (audio.prepare). So the box and the laptop rebuild the same
input from the same bundle file; each input's length and sha256 are in the file, and the laptop
says whether its own inputs are bit-identical.

The file (JSON): checkpoint_sha256 (the run's final/model.safetensors), bundle_tree_sha, device
("cpu" or "cuda"), device_name, precision (the trainer's: bf16 on CUDA, fp32 on CPU), clips
[{id, path, n_samples, input_sha256}], logits (in that precision), logits_fp32 (TF32 off),
versions. Logits: one clip per forward call (probe.torch_logits), as hearsay parity does.

The laptop side: onnxruntime fp32 on the CPU on the same inputs; gate Spearman > 0.99 and
max |dlogit| < 0.05 of the box's logits (those of its precision); the fp32 logits are measured
too, to tell precision from export bugs. Refused (ValueError) when the file's checkpoint is not
the one the folder was exported from, or its bundle is not the one given.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

MIN_S, MAX_S = 3.0, 8.0  # parity clip lengths, seconds (hearsay parity's 3-8 s)
SPEARMAN_MIN, DLOGIT_MAX = 0.99, 0.05  # the parity B gate
KIND = "hearsay parity-b box logits"


def parity_rows(manifest, n: int):
    """The first `n` test core rows of at least MIN_S s in manifest order, then shorter ones."""
    from hearsay.contracts import protocol

    rows = protocol.split_rows(manifest, "test")
    long = rows["duration"].astype(float) >= MIN_S if "duration" in rows.columns else True
    picked = list(rows[long].index[:n])
    picked += list(rows.index.difference(picked, sort=False)[: n - len(picked)])
    if len(picked) < 2:
        from hearsay.evaluate.score import ScoreError

        raise ScoreError(f"{len(picked)} test clip(s): parity B needs at least 2 (a rank "
                         "correlation)")
    return rows.loc[picked]


def inputs(bundle, rows) -> list[np.ndarray]:
    from hearsay.evaluate import inputs
    from hearsay.evaluate import score as scoring

    cfg = scoring.ScoreConfig(max_s=MAX_S)
    return [inputs.model_input(Path(bundle.root), rec, "none", cfg)
            for rec in rows.to_dict("records")]


def device_name(device: str) -> str:
    """The GPU's name on CUDA ("NVIDIA H200"), else the device string."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(device)
    return device


def wave_sha(w: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(w, dtype=np.float32).tobytes()).hexdigest()


def record(bundle, run: Path, out: Path, n: int, cfg) -> dict:
    """Write the box's parity file for `run` (kept when it already names these weights, this
    bundle, the same clip count and this precision)."""
    import torch

    from hearsay.contracts import run_dir
    from hearsay.export.probe import torch_logits
    from hearsay.hashing import sha256_file
    from hearsay.model import load_detector

    wfile = run_dir.weights_of(Path(run))
    sha = sha256_file(wfile)
    if out.is_file():
        have = json.loads(out.read_text())
        if have.get("checkpoint_sha256") == sha and len(have.get("clips", [])) == \
                len(parity_rows(bundle.manifest, n)) and have.get("precision") == cfg.precision \
                and have.get("bundle_tree_sha") == bundle.tree_sha:
            return have
    rows = parity_rows(bundle.manifest, n)
    waves = inputs(bundle, rows)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    det, _ = load_detector(wfile.parent, device=cfg.device)
    det.eval()
    z = torch_logits(det, waves, batched=False, device=cfg.device, bf16=cfg.precision == "bf16")
    z32 = torch_logits(det, waves, batched=False, device=cfg.device, bf16=False)
    data = {"kind": KIND, "checkpoint_sha256": sha, "bundle_tree_sha": bundle.tree_sha,
            "device": cfg.device, "device_name": device_name(cfg.device),
            "precision": cfg.precision, "max_s": MAX_S, "min_s": MIN_S,
            "clips": [{"id": str(r["id"]), "path": str(r["path"]), "n_samples": len(w),
                       "input_sha256": wave_sha(w)}
                      for r, w in zip(rows.to_dict("records"), waves, strict=True)],
            "logits": [float(v) for v in z], "logits_fp32": [float(v) for v in z32],
            "versions": {"torch": torch.__version__}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    return data


def gate(a: np.ndarray, ort: np.ndarray) -> dict:
    from scipy.stats import spearmanr

    rho = float(spearmanr(a, ort).statistic)
    return {"spearman": rho, "max_abs_dlogit": float(np.max(np.abs(a - ort)))}


def compare(model_dir: Path, box_file: Path, bundle) -> dict:
    """parity.json's "parity_b": ONNX fp32 on this CPU vs the box's logits on the same clips."""
    from hearsay.contracts.model_dir import read_parity, verify
    from hearsay.export.probe import ort_logits

    box = json.loads(Path(box_file).read_text())
    if box.get("kind") != KIND:
        raise ValueError(f"{box_file} is not a box parity file (hearsay score-run --parity-clips "
                         "writes full_parity_logits.json)")
    onnx_path, _, _ = verify(model_dir)
    want = read_parity(model_dir).get("checkpoint_sha256")
    if box.get("checkpoint_sha256") != want:
        raise ValueError(f"{box_file} holds logits of checkpoint {box.get('checkpoint_sha256')}, "
                         f"{model_dir} was exported from {want}: export the run the box scored")
    if box.get("bundle_tree_sha") != bundle.tree_sha:
        raise ValueError(f"{box_file} was scored on bundle {box.get('bundle_tree_sha')}, this "
                         f"bundle is {bundle.tree_sha}: pass the bundle the runs trained on")
    rows = bundle.manifest.set_index(bundle.manifest["id"].astype(str), drop=False)
    ids = [c["id"] for c in box["clips"]]
    missing = [i for i in ids if i not in rows.index]
    if missing:
        raise ValueError(f"{len(missing)} parity clip(s) not in the bundle, e.g. {missing[0]}")
    waves = inputs(bundle, rows.loc[ids])
    for c, w in zip(box["clips"], waves, strict=True):
        if len(w) != c["n_samples"]:
            raise ValueError(f"clip {c['id']}: {len(w)} input samples here, {c['n_samples']} on "
                             "the box (another front end or bundle)")
    ort = ort_logits(onnx_path, waves, batched=False).astype(np.float64)
    b = gate(np.asarray(box["logits"], np.float64), ort)
    f = gate(np.asarray(box["logits_fp32"], np.float64), ort)
    same = sum(wave_sha(w) == c["input_sha256"] for c, w in zip(box["clips"], waves, strict=True))
    passed = bool(b["spearman"] > SPEARMAN_MIN and b["max_abs_dlogit"] < DLOGIT_MAX)
    return {"clips": len(waves), "source": "box logits", "box_logits": str(box_file),
            "device": box.get("device_name"), "box_device": box.get("device"),
            "box_precision": box.get("precision"), "inputs_identical": same,
            "box_vs_ort": b, "box_fp32_vs_ort": f, "checkpoint_sha256": want,
            "gate": f"spearman > {SPEARMAN_MIN}, max|dlogit| < {DLOGIT_MAX}", "passed": passed}
