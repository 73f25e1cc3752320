"""One rank of the two-rank CPU test (tests/test_train.py), started by torchrun:

    torchrun --standalone --nproc-per-node 2 tests/ddp_worker.py BUNDLE OUT

Under tests/device_audit.py's DeviceAudit (a collective handed a tensor that a GPU run would
hold on the host raises), in one gloo process group: an uninterrupted 2-epoch run (OUT/whole),
the same run stopped after its epoch-1 checkpoint (OUT/part) and its resume (OUT/part again).
Each rank writes OUT/rank<r>.json: its optimiser steps and loss history of each run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))

from device_audit import DeviceAudit  # noqa: E402

from hearsay import train  # noqa: E402
from hearsay.train import config as train_config  # noqa: E402


def main(bundle: str, out: str) -> None:
    out_dir = Path(out)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cfg = train_config.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"epochs": 2, "batches_per_epoch": 4}})
    got = {}
    with DeviceAudit():
        whole = train.run(cfg, bundle, out_dir / "whole")
        part = train.run(cfg, bundle, out_dir / "part", stop_after_epoch=1)
        resumed = train.run(cfg, bundle, out_dir / "part", resume=True)
    for name, meta in (("whole", whole), ("part", part), ("resumed", resumed)):
        got[name] = {"steps": meta["steps"], "loss": meta["history"]["loss"],
                     "val": meta["history"]["val"], "world_size": meta["world_size"],
                     "rates": meta["rates"]}
    (out_dir / f"rank{rank}.json").write_text(json.dumps(got))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
