"""The detector: XLS-R 300M (first `keep_layers` layers) -> layer mix -> pooling -> logit.

    from hearsay.detector.model import ModelConfig, Detector, load_detector
    det = Detector(ModelConfig.tiny())                  # random init, CPU tests
    logits = det(input_values, attention_mask)          # (B,) float32, high = synthetic
    logits = det(x, m, packed=plan)                     # the same, layers packed
                                                        # (hearsay.detector.packing)
    det, cfg = load_detector("runs/fold3")              # rebuilt from the run's saved config

Shape of one forward (B clips, T samples @ 16 kHz, T' = frames @ 50 Hz, D = hidden size):

    input_values (B, T) --CNN (frozen)--> (B, T', 512) --projection--> (B, T', D)
      --[SpecAugment, training only]--> + positional conv --> h_0
      --layer 1..keep_layers--> h_1 … h_L          (stable layer norm: pre-LN residual stream)
    mix = sum_l softmax(w)_l * layer_norm(h_l)      (B, T', D)   parameter-free LN per state
    attentive statistics over valid frames -> [mean, std] (B, 2D) -> linear -> logit (B,)
      (pooling "mean": the masked mean over valid frames (B, D) -> linear -> logit)

Architecture is written here, never downloaded. Pretrained weights come only from a local folder
($HEARSAY_WEIGHTS_DIR, default /opt/hearsay/weights/xls-r-300m) whose `pytorch_model.bin` has the
sha256 pinned in docs/DESIGN.md; anything else is refused with what was found.

The forward is kept ONNX-traceable (TorchScript exporter, dynamic batch and time): frame lengths
are tensor arithmetic, masks are built with comparisons and `torch.where`, no python ints come
from tensors and nothing branches on data. SpecAugment runs only in training mode.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from hearsay.contracts import run_dir
from hearsay.detector import packing
from hearsay.detector.pooling import AttentiveStatsPool, MaskedMeanPool
from hearsay.util import config
from hearsay.util.hashing import sha256_file

WEIGHTS_ENV = "HEARSAY_WEIGHTS_DIR"
DEFAULT_WEIGHTS_DIR = "/opt/hearsay/weights/xls-r-300m"
# facebook/wav2vec2-xls-r-300m @ 1a640f32ac3e39899438a2931f9924c02f080a54 (docs/DESIGN.md)
XLSR_300M_SHA256 = "d5e490574712ad0a6736923b9ed11d4cd51c78609c36205f704fc4e87b11d2e0"
WEIGHTS_FILE = "pytorch_model.bin"
POOLINGS = ("attentive", "mean")  # ModelConfig.pooling


@dataclass(frozen=True)
class ModelConfig:
    """Backbone shape + detector head. Defaults = XLS-R 300M with 12 kept layers."""

    hidden_size: int = 1024  # D: transformer width
    num_layers: int = 24  # transformer layers of the pretrained backbone
    num_heads: int = 16  # attention heads
    ffn_size: int = 4096  # feed-forward inner width
    conv_dim: tuple[int, ...] = (512,) * 7  # CNN feature-encoder channels per layer
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)  # samples; total stride 320 = 20 ms
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)  # CNN strides per layer, samples
    conv_bias: bool = True  # XLS-R CNN convs carry biases (the strict loader checks this)
    pos_conv_kernel: int = 128  # positional convolution width (frames)
    pos_conv_groups: int = 16  # groups of the positional convolution
    layer_norm_eps: float = 1e-5  # epsilon of the transformer's LayerNorms
    keep_layers: int = 12  # keep the first N transformer layers; the rest are never built
    train_top: int = 12  # trainable top layers of the kept ones; 0 = whole backbone frozen
    layerdrop: float = 0.0  # must stay 0: a skipped layer would leave a hidden state undefined
    hidden_dropout: float = 0.1  # residual / projection dropout inside the transformer
    attention_dropout: float = 0.1  # dropout on attention weights
    mask_time_prob: float = 0.05  # SpecAugment: ≈ fraction of valid frames masked (train only)
    mask_time_length: int = 10  # SpecAugment span length in frames (20 ms each)
    mask_feature_prob: float = 0.0  # SpecAugment along channels (0 = off)
    mask_feature_length: int = 64  # channel span length
    attn_implementation: str = "sdpa"  # "sdpa" (fused) or "eager"
    layer_norm_states: bool = True  # parameter-free LayerNorm on each h_l before the weighted sum
    pool_hidden: int = 128  # attentive-statistics attention bottleneck width
    pooling: str = "attentive"  # "attentive": masked attentive mean + std (B, 2D); "mean":
    #                             masked mean over valid frames (B, D), no parameters
    init: str = "xls-r-300m"  # "xls-r-300m" = load the pinned local weights; "random" = tests

    def __post_init__(self):
        if not 0 < self.keep_layers <= self.num_layers:
            raise ValueError(f"keep_layers={self.keep_layers} must be in 1..{self.num_layers}")
        if not 0 <= self.train_top <= self.keep_layers:
            raise ValueError(f"train_top={self.train_top} must be in 0..keep_layers "
                             f"({self.keep_layers})")
        if self.layerdrop != 0.0:
            raise ValueError("layerdrop must be 0 (every kept layer's output is pooled)")
        if self.attn_implementation not in ("sdpa", "eager"):
            raise ValueError(f"attn_implementation={self.attn_implementation!r}: use sdpa or eager")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling={self.pooling!r}: use {' or '.join(POOLINGS)}")
        if self.init not in ("xls-r-300m", "random"):
            raise ValueError(f"init={self.init!r}: use 'xls-r-300m' or 'random'")
        if not len(self.conv_dim) == len(self.conv_kernel) == len(self.conv_stride):
            raise ValueError("conv_dim, conv_kernel and conv_stride need one entry per CNN layer")

    @classmethod
    def tiny(cls, **overrides) -> ModelConfig:
        """A few-layer random-init config with the same topology, fast on a CPU (tests, demo)."""
        base = dict(hidden_size=32, num_layers=2, num_heads=2, ffn_size=64, conv_dim=(16,) * 7,
                    pos_conv_kernel=16, pos_conv_groups=2, keep_layers=2, train_top=2,
                    pool_hidden=16, init="random", hidden_dropout=0.0, attention_dropout=0.0)
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Inverse of to_dict; unknown keys are an error (lists come back as tuples)."""
        return config.from_dict(cls, d, what="model config")

    def hf_config(self):
        """The transformers Wav2Vec2Config of the kept backbone (built in code, no download)."""
        from transformers import Wav2Vec2Config

        cfg = Wav2Vec2Config(
            hidden_size=self.hidden_size, num_hidden_layers=self.keep_layers,
            num_attention_heads=self.num_heads, intermediate_size=self.ffn_size,
            hidden_act="gelu", conv_dim=self.conv_dim, conv_kernel=self.conv_kernel,
            conv_stride=self.conv_stride, conv_bias=self.conv_bias, feat_extract_norm="layer",
            do_stable_layer_norm=True, num_conv_pos_embeddings=self.pos_conv_kernel,
            num_conv_pos_embedding_groups=self.pos_conv_groups, layer_norm_eps=self.layer_norm_eps,
            layerdrop=0.0, hidden_dropout=self.hidden_dropout, activation_dropout=0.0,
            attention_dropout=self.attention_dropout, feat_proj_dropout=0.0,
            # > 0 so that the model owns `masked_spec_embed`; the masking itself is ours (below)
            mask_time_prob=max(self.mask_time_prob, 1e-6), apply_spec_augment=False,
            add_adapter=False)
        cfg._attn_implementation = self.attn_implementation
        return cfg


@torch.compiler.disable
def _draw_uniform(size: tuple[int, int], gen: torch.Generator | None,
                  device: torch.device) -> torch.Tensor:
    """U[0, 1) of `size` from `gen` (SpecAugment's span starts), always run eagerly: dynamo
    cannot trace a draw from an explicit generator with symbolic sizes, so torch.compile
    breaks the graph here and the draw is the very call eager makes (same generator, same
    numbers: seeded, checkpointed and resumed exactly as without compile)."""
    return torch.rand(size, generator=gen, device=device)


class Detector(nn.Module):
    """XLS-R backbone (kept layers) + softmax layer weights + attentive stats pooling + linear."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        from transformers import Wav2Vec2Model

        self.cfg = cfg
        self.backbone = Wav2Vec2Model(cfg.hf_config())
        # the 24-layer model's final LayerNorm does not belong after layer 12: never used
        self.backbone.encoder.layer_norm = nn.Identity()
        n_states = cfg.keep_layers + 1  # h_0 (input to layer 1) … h_L
        self.layer_logits = nn.Parameter(torch.zeros(n_states))  # softmax -> layer weights
        if cfg.pooling == "mean":
            self.pool, pooled = MaskedMeanPool(), cfg.hidden_size
        else:
            self.pool, pooled = AttentiveStatsPool(cfg.hidden_size, cfg.pool_hidden), \
                2 * cfg.hidden_size
        self.head = nn.Linear(pooled, 1)
        self.generator: torch.Generator | None = None  # SpecAugment RNG (set by the trainer)
        self.apply_freeze()

    # ---------------------------------------------------------------- trainable parts

    def backbone_param_groups(self) -> list[tuple[int, list[nn.Parameter]]]:
        """[(depth, params)]: depth 0 = top kept layer … keep_layers = below layer 1 (stem)."""
        enc = self.backbone.encoder
        groups = [(self.cfg.keep_layers - i, list(layer.parameters()))
                  for i, layer in enumerate(enc.layers, start=1)]
        stem = [*self.backbone.feature_projection.parameters(), *enc.pos_conv_embed.parameters(),
                self.backbone.masked_spec_embed]
        groups.append((self.cfg.keep_layers, stem))
        return groups

    def head_params(self) -> list[nn.Parameter]:
        return [self.layer_logits, *self.pool.parameters(), *self.head.parameters()]

    def apply_freeze(self) -> None:
        """CNN always frozen; of the kept layers only the top `train_top` train. The stem
        (projection, positional conv, masked_spec_embed) trains only when every layer does.

        The CNN is frozen the way transformers intends (`freeze_feature_encoder`, which also
        clears its `_requires_grad`): otherwise, in training mode, the library marks the CNN's
        input as requiring grad and backward runs through all 7 conv layers (and, with
        train_top 0, through the whole frozen backbone), and torch.compile breaks the graph."""
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.backbone.freeze_feature_encoder()
        top = self.cfg.train_top
        for depth, params in self.backbone_param_groups():
            is_stem = depth == self.cfg.keep_layers
            trainable = (top == self.cfg.keep_layers) if is_stem else depth < top
            for p in params:
                p.requires_grad_(trainable)

    # ---------------------------------------------------------------- forward

    def frame_mask(self, attention_mask: torch.Tensor, n_frames) -> torch.Tensor:
        """(B, T) int sample mask -> (B, T') bool frame mask, via the CNN length formula."""
        lengths = packing.frame_lengths(attention_mask.sum(dim=-1), self.cfg)  # (B,) frames
        frames = torch.arange(n_frames, device=attention_mask.device)  # (T',)
        return frames.unsqueeze(0) < lengths.unsqueeze(1)

    def _spec_augment(self, h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Replace random time spans (inside valid frames) by masked_spec_embed; zero channel
        spans. Training only; randomness from self.generator (saved/restored by the trainer)."""
        cfg, (b, t, d) = self.cfg, h.shape
        gen = self.generator
        if cfg.mask_time_prob > 0:
            p_start = cfg.mask_time_prob / cfg.mask_time_length  # expected masked fraction ≈ prob
            starts = _draw_uniform((b, t), gen, h.device) < p_start
            span = torch.ones(1, 1, cfg.mask_time_length, device=h.device)
            # a frame is masked if a span started in the previous mask_time_length frames
            covered = F.conv1d(F.pad(starts.float().unsqueeze(1), (cfg.mask_time_length - 1, 0)),
                               span).squeeze(1) > 0
            covered = (covered & valid).unsqueeze(-1)  # (B, T', 1)
            h = torch.where(covered, self.backbone.masked_spec_embed.to(h.dtype), h)
        if cfg.mask_feature_prob > 0:
            p_start = cfg.mask_feature_prob / cfg.mask_feature_length
            starts = _draw_uniform((b, d), gen, h.device) < p_start
            span = torch.ones(1, 1, cfg.mask_feature_length, device=h.device)
            covered = F.conv1d(F.pad(starts.float().unsqueeze(1),
                                     (cfg.mask_feature_length - 1, 0)), span).squeeze(1) > 0
            h = h.masked_fill(covered.unsqueeze(1), 0.0)
        return h

    def _attention_bias(self, valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """(B, T') bool -> (B, 1, 1, T') mask over keys: bool for sdpa, additive for eager."""
        mask = valid[:, None, None, :]
        if self.cfg.attn_implementation == "sdpa":
            return mask
        neg = torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=valid.device)
        return torch.where(mask, torch.zeros((), dtype=dtype, device=valid.device), neg)

    def hidden_states(self, input_values: torch.Tensor, attention_mask: torch.Tensor,
                      packed: packing.Packed | None = None, mask_free: bool = False):
        """-> ([h_0 … h_L] each (B, T', D), valid (B, T') bool). packed: the kept layers run
        packed (hearsay.detector.packing); mask_free: the caller knows every clip fills T, so no key
        mask is passed and SDPA may take its flash kernel (a mask sends it elsewhere)."""
        bb = self.backbone
        feats = bb.feature_extractor(input_values).transpose(1, 2)  # (B, T', C)
        valid = self.frame_mask(attention_mask, feats.shape[1])
        h, _ = bb.feature_projection(feats)  # (B, T', D)
        if self.training:
            h = self._spec_augment(h, valid)
        h = h * valid.unsqueeze(-1).to(h.dtype)  # padded frames enter the encoder as 0
        enc = bb.encoder
        h = enc.dropout(h + enc.pos_conv_embed(h))
        states = [h]
        if packed is not None:  # (B, T', D) -> (R, C, D): no padding frame in the layers
            b, t, _ = h.shape
            h = packing.pack(h, packed)
            for layer in enc.layers:
                h = packing.packed_layer(layer, h, packed)
                states.append(packing.unpack(h, packed, b, t))
            return states, valid
        bias = None if mask_free else self._attention_bias(valid, h.dtype)
        for layer in enc.layers:
            h = layer(h, attention_mask=bias)
            states.append(h)
        return states, valid

    def forward(self, input_values: torch.Tensor, attention_mask: torch.Tensor,
                packed: packing.Packed | None = None, mask_free: bool = False) -> torch.Tensor:
        """(B, T) float32 normalised @ 16 kHz, (B, T) int64 1 = valid -> logits (B,) float32.
        packed / mask_free: the trainer's speed levers (hidden_states); the export traces the
        default, padded forward."""
        states, valid = self.hidden_states(input_values, attention_mask, packed, mask_free)
        w = torch.softmax(self.layer_logits.float(), dim=0)  # (L+1,)
        mix = None
        for i, h in enumerate(states):
            h = h.float()  # pooling in fp32 even under bf16 autocast
            if self.cfg.layer_norm_states:
                h = F.layer_norm(h, (self.cfg.hidden_size,))
            mix = w[i] * h if mix is None else mix + w[i] * h
        with torch.autocast(device_type=input_values.device.type, enabled=False):
            pooled = self.pool(mix, valid)  # (B, 2D)
            return self.head(pooled).squeeze(-1).float()  # (B,)


# --------------------------------------------------------------------------- weights


def weights_dir() -> Path:
    return Path(os.environ.get(WEIGHTS_ENV, DEFAULT_WEIGHTS_DIR))


class WeightsError(RuntimeError):
    """The pretrained weights are missing, unpinned, or do not fit the architecture."""


def _map_key(key: str) -> str:
    """HF checkpoint key -> our backbone key (prefix and old weight-norm names)."""
    key = key.removeprefix("wav2vec2.")
    new = "pos_conv_embed.conv.parametrizations.weight.original"
    key = key.replace("pos_conv_embed.conv.weight_g", new + "0")
    return key.replace("pos_conv_embed.conv.weight_v", new + "1")


def load_pretrained(det: Detector, directory: str | os.PathLike | None = None,
                    expected_sha: str = XLSR_300M_SHA256) -> str:
    """Load the pinned XLS-R weights into `det.backbone` (strict on every kept key).

    Returns the verified sha256. Raises WeightsError when the file is missing, its sha differs
    from the pin (naming both), or keys/shapes do not fit. Layers past keep_layers, the
    quantizer and the pre-training heads in the file are skipped on purpose.
    """
    directory = Path(directory) if directory is not None else weights_dir()
    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise WeightsError(f"{path} not found: put the pinned XLS-R 300M {WEIGHTS_FILE} there or "
                           f"set ${WEIGHTS_ENV} to its folder")
    found = sha256_file(path)
    if found != expected_sha:
        raise WeightsError(f"{path} has sha256 {found}, expected the pin {expected_sha} "
                           "(facebook/wav2vec2-xls-r-300m @ 1a640f32…): refusing to load it")
    # weights_only: the restricted unpickler (tensors and containers only), and the sha is pinned
    raw = torch.load(path, map_location="cpu", weights_only=True)
    ours = det.backbone.state_dict()
    mapped = {_map_key(k): v for k, v in raw.items()}
    wanted = {k: v for k, v in mapped.items() if k in ours}
    missing = sorted(set(ours) - set(wanted))
    bad = sorted(k for k, v in wanted.items() if tuple(v.shape) != tuple(ours[k].shape))
    if missing or bad:
        raise WeightsError(f"{path} does not fit ModelConfig: missing {missing[:8]} "
                           f"({len(missing)}), shape mismatch {bad[:8]} ({len(bad)})")
    det.backbone.load_state_dict(wanted, strict=True)
    return found


# --------------------------------------------------------------------------- save / load


def save_detector(det: Detector, directory: str | os.PathLike, extra_config: dict | None = None,
                  ) -> Path:
    """Write directory/model.safetensors and directory/config.json ({"model": …, **extra})."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(state_dict_for_save(det), str(directory / run_dir.WEIGHTS))
    config = {"model": det.cfg.to_dict(), **(extra_config or {})}
    (directory / run_dir.CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return directory


def state_dict_for_save(det: Detector) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").contiguous() for k, v in det.state_dict().items()}


def _find_config(directory: Path) -> dict:
    for name in (run_dir.CONFIG, run_dir.STATE):
        for where in (directory, directory.parent, directory.parent.parent):
            p = where / name
            if p.is_file():
                data = json.loads(p.read_text())
                model = data.get("model") or data.get("config", {}).get("model")
                if model is not None:
                    return model
    raise FileNotFoundError(f"no config.json / state.json with a 'model' section at or above "
                            f"{directory}: was this written by hearsay train?")


def checkpoint_weights(directory: str | os.PathLike) -> Path:
    """The weights file of a checkpoint dir (DIR/model.safetensors) or of a run dir
    (DIR/final/model.safetensors): what load_detector reads and parity.json hashes."""
    return run_dir.weights_of(Path(directory))


def load_detector(directory: str | os.PathLike, device: str = "cpu"):
    """Run dir (uses final/) or checkpoint dir -> (Detector in eval mode, ModelConfig)."""
    from safetensors.torch import load_file

    weights = checkpoint_weights(directory)
    directory = weights.parent
    cfg = ModelConfig.from_dict(_find_config(directory))
    det = Detector(cfg)
    det.load_state_dict(load_file(str(weights), device="cpu"), strict=True)
    return det.to(device).eval(), cfg


__all__ = ["ModelConfig", "Detector", "load_detector", "save_detector", "load_pretrained",
           "WeightsError", "XLSR_300M_SHA256"]
