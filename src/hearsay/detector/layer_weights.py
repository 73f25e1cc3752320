"""The learned layer weights of a run and the "concentrated at the top" rule.

    from hearsay.detector.layer_weights import LayerRule, readout
    readout(det, {"top_k": 3, "min_share": 0.5, "advise_keep": 16})   # -> run_meta "layer_weights"

The detector mixes its kept hidden states h_0 (the input to layer 1) … h_L (L = keep_layers) with
softmax weights
(hearsay.detector.model.Detector.layer_logits). After training, these say which depth the
model leans on. When most of the weight sits on the top few kept states, the layers that were
cut off above them may hold more of what it uses: the fallback is to keep more layers.

The rule (config: train.layer_rule, so it is recorded with the run and inside its config hash):

    top_share = sum of the softmax weights of the top `top_k` states h_{L-top_k+1} … h_L
    fires     when top_share >= min_share (the boundary fires); not applicable (never fires)
              when top_k covers every state (a tiny test model)
    advice    "keep <advise_keep> layers" when it fires and keep_layers < advise_keep <=
              the backbone's layers (24 for XLS-R 300M)

Defaults top_k 3, min_share 0.5, advise_keep 16: "half of the weight on the top 3 of 13 states"
(uniform weights give 3/13 = 0.23). The 0.5 is a chosen setting of the rule, not a measured
figure; change it in the config.

run_meta "layer_weights" (and the assembled meta.json "layer_weights", one entry per run key):
{"states": ["h_0", …, "h_L"], "weights": [w_0, …, w_L] (sum 1), "keep_layers", "rule": {...},
"top_share", "fires", "advice", "verdict"}. Torch is needed only by `readout`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hearsay.util import config


@dataclass(frozen=True)
class LayerRule:
    """When the layer weights count as concentrated at the top, and what is advised then."""

    top_k: int = 3  # the top kept states whose weight is summed (h_{L-top_k+1} … h_L)
    min_share: float = 0.5  # the rule fires when their share is >= this (a chosen setting)
    advise_keep: int = 16  # keep_layers advised when it fires

    def __post_init__(self):
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"layer_rule top_k={self.top_k!r}: an int >= 1")
        if not 0 < self.min_share <= 1:
            raise ValueError(f"layer_rule min_share={self.min_share!r}: a share in (0, 1]")
        if isinstance(self.advise_keep, bool) or not isinstance(self.advise_keep, int) \
                or self.advise_keep < 1:
            raise ValueError(f"layer_rule advise_keep={self.advise_keep!r}: an int >= 1")

    @classmethod
    def from_dict(cls, d: dict) -> LayerRule:
        return config.from_dict(cls, d, what="train.layer_rule")


DEFAULT_RULE = asdict(LayerRule())


def verdict(weights: list[float], keep_layers: int, num_layers: int, rule: dict) -> dict:
    """The rule applied to softmax weights [w_0 … w_L] of a model keeping `keep_layers` of the
    backbone's `num_layers`. Not applicable (fires False) when top_k covers every state."""
    r = LayerRule.from_dict(rule)
    n = len(weights)
    if n != keep_layers + 1:
        raise ValueError(f"{n} layer weights for keep_layers {keep_layers} "
                         f"(want {keep_layers + 1}: h_0 … h_{keep_layers})")
    top_share = float(sum(weights[-r.top_k:]))
    out = {"rule": asdict(r), "top_share": top_share, "fires": False, "advice": None}
    if r.top_k >= n:
        return {**out, "verdict": f"not applicable: top_k {r.top_k} covers all {n} states"}
    share = f"{top_share:.3f} of the weight on the top {r.top_k} of {n} states"
    if top_share < r.min_share:
        return {**out, "verdict": f"not concentrated at the top: {share} (< {r.min_share})"}
    words = f"concentrated at the top: {share} (>= {r.min_share})"
    if r.advise_keep <= keep_layers:
        words += f"; it already keeps {keep_layers} >= {r.advise_keep} layers"
    elif r.advise_keep > num_layers:
        words += f"; the backbone has {num_layers} layers, fewer than {r.advise_keep}"
    else:
        out["advice"] = f"keep {r.advise_keep} layers"
        words += f"; advised: {out['advice']}"
    return {**out, "fires": True, "verdict": words}


def readout(det, rule: dict) -> dict:
    """run_meta "layer_weights" of a Detector: its softmax layer weights + the rule's verdict."""
    import torch

    with torch.no_grad():
        w = torch.softmax(det.layer_logits.detach().float().cpu(), dim=0).tolist()
    keep = det.cfg.keep_layers
    return {"states": [f"h_{i}" for i in range(len(w))], "weights": w, "keep_layers": keep,
            **verdict(w, keep, det.cfg.num_layers, rule)}


def trainable_backbone_params(det) -> int:
    """Backbone parameters that train (requires_grad), counted element by element."""
    return int(sum(p.numel() for p in det.backbone.parameters() if p.requires_grad))
