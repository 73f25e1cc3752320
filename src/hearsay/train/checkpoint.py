"""The checkpoint format: safetensors + JSON, written and read by the trainer.

    from hearsay.train.checkpoint import read_checkpoint, write_checkpoint
    write_checkpoint(run_dir / "checkpoints" / "epoch_0003", model_sd, optimizer_sd, rng, state)
    ck = read_checkpoint(run_dir / "checkpoints" / "epoch_0003")   # sha256 of both files checked

A checkpoint is a folder ``checkpoints/epoch_NNNN/`` holding

    model.safetensors      the Detector's state_dict
    optimizer.safetensors  every optimiser tensor ("optim.<param>.<key>"), RNG states ("rng.<name>")
    state.json             optimiser hyper-parameters and scalars, step, epoch, sampler state,
                           config hash, bundle tree-sha, base-weights sha, git sha, and the
                           sha256 of both safetensors files (checked on read)

No pickle anywhere: a checkpoint that crossed a network is read with safetensors and json only.
Moving it to and from a store (and its ``.complete`` marker) is hearsay.store's job.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from hearsay.contracts import run_dir
from hearsay.store import StoreError
from hearsay.util.hashing import sha256_file


def flatten_optimizer(sd: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """optimizer.state_dict() -> (tensors "optim.<idx>.<key>", JSON-able rest)."""
    tensors, scalars = {}, {}
    for idx, per_param in sd["state"].items():
        for key, value in per_param.items():
            if torch.is_tensor(value):
                tensors[f"optim.{idx}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars[f"{idx}.{key}"] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value
    for name, value in meta["scalars"].items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = value
    return {"state": state, "param_groups": meta["param_groups"]}


@dataclass
class Checkpoint:
    model: dict[str, torch.Tensor]
    optimizer: dict  # a state_dict for optimizer.load_state_dict
    rng: dict[str, torch.Tensor]  # name -> uint8 state tensor
    state: dict  # state.json minus the optimiser part


def write_checkpoint(directory: Path, model: dict[str, torch.Tensor], optimizer_sd: dict,
                     rng: dict[str, torch.Tensor], state: dict) -> Path:
    """Write the three files into `directory` (made fresh); returns it."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({k: v.detach().to("cpu").contiguous() for k, v in model.items()},
              str(tmp / run_dir.WEIGHTS))
    tensors, optim_meta = flatten_optimizer(optimizer_sd)
    tensors.update({f"rng.{k}": v.detach().to("cpu").contiguous() for k, v in rng.items()})
    save_file(tensors, str(tmp / run_dir.OPTIMIZER))
    files = {n: sha256_file(tmp / n) for n in (run_dir.WEIGHTS, run_dir.OPTIMIZER)}
    full = {**state, "optimizer": optim_meta, "files": files}
    (tmp / run_dir.STATE).write_text(json.dumps(full, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def read_checkpoint(directory: Path) -> Checkpoint:
    """Read and verify (sha256 of both tensor files against state.json)."""
    directory = Path(directory)
    state = json.loads((directory / run_dir.STATE).read_text())
    for name, want in state["files"].items():
        got = sha256_file(directory / name)
        if got != want:
            raise StoreError(f"{directory / name} has sha256 {got}, state.json says {want}: "
                             "the checkpoint is damaged (pull it again)")
    model = load_file(str(directory / run_dir.WEIGHTS))
    tensors = load_file(str(directory / run_dir.OPTIMIZER))
    rng = {k[4:]: v for k, v in tensors.items() if k.startswith("rng.")}
    optim = unflatten_optimizer(tensors, state.pop("optimizer"))
    return Checkpoint(model=model, optimizer=optim, rng=rng, state=state)
