"""Attention fusion of the exported graph (onnxruntime.transformers.optimizer): an experiment.

    .venv/bin/python scripts/bench_cpu_inference.py --fused     # times it against the plain export

`hearsay export onnx` ships the MultiHeadAttention form when the fused graph holds parity A
(onnx_export.fuse_export; `--no-fuse` keeps the plain export). The gain measured on this machine
was small against its noise (docs/BENCHMARKS.md "Attention fusion", 2026-12-01).

onnxruntime's BERT fuser recognises attention only in a few exact node patterns. The Detector's
TorchScript export matches none of them, so three export-only changes make it match, none of
which changes the math (the fused graph holds parity A against the sdpa model, padded batch
included):

  1. `fusable_copy`: the same weights in a Detector with eager attention (explicit MatMul /
     Softmax / MatMul; the sdpa export is already decomposed the same way) whose key-padding bias
     is written the way transformers 4 wrote it (`1 - expand(mask)`, then `where(bool, min, 0)`):
     the fuser's "SDPA" mask pattern. The bias values are the same (0 on valid frames, float32
     min on padded ones), and the fuser turns the frame mask back into per-clip lengths (right
     padding only, which hearsay's frame mask is).
  2. `_prepare`: TorchScript shares equal initializers through Identity nodes (random init: all
     LayerNorm weights are 1), which the fuser counts as extra inputs; they are replaced by the
     initializer itself.
  3. `_prepare`: the pooled states' parameter-free LayerNorm reads the residual stream directly;
     the fuser takes any LayerNorm child of the residual as the attention input and gives up. The
     (float -> float) Cast in front of it becomes a Mul by 1 while fusing, and is removed after.
"""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import numpy as np

HIDE = "_fuse_hide"  # suffix of the Mul-by-one nodes that exist only while fusing
ONE = "fuse_one"  # the 1.0 initializer they multiply by


def fusable_copy(model):
    """A Detector with `model`'s weights, eager attention and a bias the fuser recognises."""
    import torch

    from hearsay.detector.model import Detector

    class FusableDetector(Detector):
        def _attention_bias(self, valid, dtype):
            # (B, T') bool -> (B, 1, T', T') additive: 0 where the key frame is valid, else min
            b, t = valid.shape
            inverted = 1.0 - valid[:, None, None, :].expand(b, 1, t, t).to(dtype)
            neg = torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=valid.device)
            return torch.where(inverted.to(torch.bool), neg, inverted)

    cfg = dataclasses.replace(model.cfg, attn_implementation="eager")
    copy = FusableDetector(cfg).eval()
    copy.load_state_dict(model.state_dict())
    return copy


def _prepare(m) -> int:
    """In place on an onnx.ModelProto: steps 2 and 3 of the module docstring. -> hidden LNs."""
    import onnx

    g = m.graph
    inits = {t.name for t in g.initializer}
    alias = {n.output[0]: n.input[0] for n in g.node
             if n.op_type == "Identity" and n.input[0] in inits}
    nodes = [n for n in g.node if not (n.op_type == "Identity" and n.output[0] in alias)]
    for n in nodes:
        for i, name in enumerate(n.input):
            if name in alias:
                n.input[i] = alias[name]
    producer = {o: n for n in nodes for o in n.output}
    g.initializer.append(onnx.numpy_helper.from_array(np.array(1.0, np.float32), ONE))
    hidden = 0
    for n in nodes:
        cast = producer.get(n.input[0]) if n.op_type == "LayerNormalization" else None
        if cast is not None and cast.op_type == "Cast":
            cast.op_type, cast.name = "Mul", cast.name + HIDE
            del cast.attribute[:]
            cast.input.append(ONE)
            hidden += 1
    del g.node[:]
    g.node.extend(nodes)
    return hidden


def _unhide(m) -> None:
    """Remove the Mul-by-one nodes again (their consumers read the Mul's input)."""
    g = m.graph
    alias = {n.output[0]: n.input[0] for n in g.node if n.name.endswith(HIDE)}
    nodes = [n for n in g.node if not n.name.endswith(HIDE)]
    for n in nodes:
        for i, name in enumerate(n.input):
            if name in alias:
                n.input[i] = alias[name]
    del g.node[:]
    g.node.extend(nodes)
    keep = [t for t in g.initializer if t.name != ONE]
    del g.initializer[:]
    g.initializer.extend(keep)


def fuse_file(src: Path, dst: Path, num_heads: int, hidden_size: int,
              multi_head: bool = False) -> dict:
    """Fuse `src` (exported from `fusable_copy`) into `dst`; returns the fused op counts.

    multi_head=False: com.microsoft Attention (q, k, v weights packed into one GEMM);
    multi_head=True: MultiHeadAttention, the q, k, v MatMuls stay (the int8 recipe still finds
    them). Offline fusions only (opt_level 0); the session applies its own at load."""
    import onnx
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    m = onnx.load(str(src))
    _prepare(m)
    opts = FusionOptions("bert")
    opts.use_multi_head_attention = multi_head
    tmp = dst.with_suffix(".prep.onnx")
    onnx.save(m, str(tmp))
    try:
        opt = optimize_model(str(tmp), model_type="bert", num_heads=num_heads,
                             hidden_size=hidden_size, opt_level=0, use_gpu=False,
                             optimization_options=opts)
    finally:
        tmp.unlink(missing_ok=True)
    _unhide(opt.model)
    opt.save_model_to_file(str(dst))
    counts = collections.Counter(n.op_type for n in opt.model.graph.node)
    wanted = ("Attention", "MultiHeadAttention", "SkipLayerNormalization", "BiasGelu", "Gelu",
              "FastGelu", "LayerNormalization", "MatMul")
    return {k: counts.get(k, 0) for k in wanted}


def attention_nodes(model) -> list[str]:
    """Names of the fused Attention nodes of an onnx.ModelProto, in graph order."""
    return [n.name for n in model.graph.node if n.op_type == "Attention"]
