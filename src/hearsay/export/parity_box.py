"""Parity B's laptop side: onnxruntime fp32 on this CPU against the box's logits on the same
clips (the file, its clips and its gate: hearsay.contracts.parity_b; the box writes it with
hearsay.evaluate.parity_record).

    report = parity_box.compare(MODEL_DIR, OUT.json, bundle)   # hearsay parity --box-logits

The fp32 logits the box also recorded are compared too, to tell precision from export bugs.
Refused (ValueError) when the file's checkpoint is not the one the folder was exported from, or
its bundle is not the one given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hearsay.contracts import parity_b


def compare(model_dir: Path, box_file: Path, bundle) -> dict:
    """parity.json's "parity_b": ONNX fp32 on this CPU vs the box's logits on the same clips."""
    from hearsay.contracts.model_dir import read_parity, verify
    from hearsay.export.probe import ort_logits

    box = parity_b.read(box_file)
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
    waves = parity_b.inputs(bundle, rows.loc[ids])
    for c, w in zip(box["clips"], waves, strict=True):
        if len(w) != c["n_samples"]:
            raise ValueError(f"clip {c['id']}: {len(w)} input samples here, {c['n_samples']} on "
                             "the box (another front end or bundle)")
    ort = ort_logits(onnx_path, waves, batched=False).astype(np.float64)
    b = parity_b.gate(np.asarray(box["logits"], np.float64), ort)
    f = parity_b.gate(np.asarray(box["logits_fp32"], np.float64), ort)
    same = sum(parity_b.wave_sha(w) == c["input_sha256"]
               for c, w in zip(box["clips"], waves, strict=True))
    passed = parity_b.passed(b)
    return {"clips": len(waves), "source": "box logits", "box_logits": str(box_file),
            "device": box.get("device_name"), "box_device": box.get("device"),
            "box_precision": box.get("precision"), "inputs_identical": same,
            "box_vs_ort": b, "box_fp32_vs_ort": f, "checkpoint_sha256": want,
            "gate": f"spearman > {parity_b.SPEARMAN_MIN}, max|dlogit| < {parity_b.DLOGIT_MAX}",
            "passed": passed}
