"""The fp8 speed lever (train.fp8): float8 matmuls for the kept transformer layers' Linear layers,
with torchao's float8 training (requirements.lock pins torchao).

    from hearsay.train import fp8
    why = fp8.fp8_problem(device)          # None, or why fp8 cannot train here (names the fix)
    meta = fp8.convert(det, device)        # in place, after the Detector is built and moved,
                                           # before torch.compile and the optimiser

What is converted: in every kept layer (backbone.encoder.layers.*) the attention's q/k/v/out
projections and the feed-forward's two Linear layers, 6 per layer (72 of the 12-layer XLS-R
shape): the bulk of the model's FLOPs. Not converted: the frozen CNN, the feature projection,
the positional conv, the pooling and the head (small, or precision the logit needs).

The recipe: torchao's "tensorwise" (its default): dynamic scales, one per tensor, computed from
each tensor's absolute maximum at every call; inputs and weights in float8 e4m3, the incoming
gradients in e5m2; the master weights, the optimiser and the state_dict stay as they were (a
Float8Linear keeps its nn.Linear's weight and bias Parameters, under the same names), so
checkpoints, resume and the export read a converted model's weights like any other.

Where it runs: CUDA devices of compute capability 8.9 or more (float8 tensor cores: Ada, Hopper
H100/H200 = 9.0, Blackwell), and the CPU, where torch computes the float8 matmuls without speed
(what the tests use). Anything else is refused before any work (fp8_problem).
"""

from __future__ import annotations

import torch

# the kept layers' prefix in Detector.named_modules() (hearsay.detector.model)
LAYERS_PREFIX = "backbone.encoder.layers."
RECIPE = "tensorwise"  # torchao.float8.Float8LinearRecipeName: dynamic per-tensor scales
MIN_CAPABILITY = (8, 9)  # CUDA compute capability with float8 tensor cores


def fp8_problem(device: torch.device | str) -> str | None:
    """Why train.fp8 cannot train on `device`, or None. The one judge of that rule: the trainer
    asks it before any work (exit 2), convert() before converting, the GPU bench to skip."""
    device = torch.device(device)
    try:
        import torchao.float8  # noqa: F401
    except ImportError as err:
        return (f"train.fp8 needs torchao (float8 training; requirements.lock pins it), which "
                f"does not import here ({err}): install the lock (make install), or set "
                "train.fp8 false")
    if device.type == "cpu":
        return None
    if device.type != "cuda":
        return (f"train.fp8 runs on CUDA (compute capability >= 8.9) or the CPU, not on "
                f"{device.type}: set train.fp8 false")
    cap = torch.cuda.get_device_capability(device)
    if tuple(cap) < MIN_CAPABILITY:
        name = torch.cuda.get_device_name(device)
        return (f"train.fp8 needs float8 tensor cores, compute capability >= 8.9 (L4, L40, "
                f"RTX 4090, H100, H200 ...); this {name} is {cap[0]}.{cap[1]}: set train.fp8 "
                "false, or train on such a GPU")
    return None


def is_converted(fqn: str, module: torch.nn.Module) -> bool:
    """The lever's filter: a Linear layer inside a kept transformer layer."""
    return fqn.startswith(LAYERS_PREFIX) and isinstance(module, torch.nn.Linear)


def float8_layers(model: torch.nn.Module) -> list[str]:
    """Names of the model's Float8Linear modules (what convert made), in module order."""
    from torchao.float8.float8_linear import Float8Linear

    return [name for name, m in model.named_modules() if isinstance(m, Float8Linear)]


def convert(det: torch.nn.Module, device: torch.device | str) -> str:
    """Swap the kept layers' Linear layers of `det` for torchao's Float8Linear (in place, the
    same Parameters); returns run_meta's "fp8" line. ValueError (fp8_problem) where it cannot
    train. Call it after det is on `device` and before torch.compile and the optimiser."""
    if (why := fp8_problem(device)) is not None:
        raise ValueError(why)
    import torchao
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = Float8LinearConfig.from_recipe_name(RECIPE)
    convert_to_float8_training(det, config=config,
                               module_filter_fn=lambda m, fqn: is_converted(fqn, m))
    n = len(float8_layers(det))
    return (f"on: torchao {torchao.__version__} float8 training, recipe {RECIPE} (dynamic "
            f"per-tensor scales; e4m3 inputs and weights, e5m2 gradients), {n} Linear layers of "
            "the kept transformer layers")
