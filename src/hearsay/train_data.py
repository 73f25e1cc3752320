"""What the `hearsay train` loop reads: the job's rows, the label-balanced source-quota batch
plan, the per-batch loading + augmentation, and the validation readout.

    from hearsay.train_data import plan_job, Sampler, EpochBatches
    train, val = plan_job(bundle, "fold", 3)                  # holdout/test rows never train
    plan = Sampler(train, 64, "proportional", seed=0).epoch_plan(epoch=1, n_batches=500)
    batch = EpochBatches(bundle.root, rows, plan, 1, ctx)[0]   # one micro-batch, on the CPU
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from hearsay import audio, augment, crops
from hearsay.train_config import ConfigError, TrainConfig


def plan_job(bundle, job: str, fold: int | None):
    """(train rows, validation rows or None) of the bundle manifest for this job."""
    from hearsay.folds import SplitsConfig, train_ids

    df = bundle.manifest
    scfg = SplitsConfig.from_dict((bundle.meta.get("folds") or {}).get("config") or {})
    key = {"fold": str(fold), "pilot": "4", "full": "full"}[job]
    ids = set(train_ids(df, scfg, key))
    train = df.loc[df["id"].isin(ids)].reset_index(drop=True)
    # defence in depth: these rows must never reach a training batch
    leaked = train.loc[train["fold"].isin(["holdout", "test"]) | (train["fold"] == key)]
    assert leaked.empty, f"fold protocol broken: {leaked['id'].tolist()[:5]}"
    val = None
    if job != "full":
        val = df.loc[(df["fold"] == key) & (df["train_scope"] == "core")].reset_index(drop=True)
    return train, val


def quotas(train, batch_size: int, mix: str) -> dict[tuple[str, str], int]:
    """Clips per batch of each (label, source): batch_size/2 per label, split over the sources
    of that label by largest remainder (proportional to their counts, or equal); each source
    gets at least one slot when the half-batch has room for all of them. Fixed for the run."""
    half = batch_size // 2
    out: dict[tuple[str, str], int] = {}
    for label in augment.LABELS:
        counts = train.loc[train["label"] == label, "source"].value_counts().sort_index()
        if counts.empty:
            raise ConfigError(f"no {label} clips in the training rows: cannot balance labels")
        share = (counts / counts.sum()) if mix == "proportional" else counts * 0 + 1 / len(counts)
        raw = share * half
        q = np.floor(raw).astype(int)
        order = sorted(counts.index, key=lambda s: (-(raw[s] - q[s]), s))
        for s in order[: half - int(q.sum())]:
            q[s] += 1
        for s in counts.index:
            if q[s] == 0 and len(counts) <= half:
                donor = max(counts.index, key=lambda t: (q[t], t))
                q[donor] -= 1
                q[s] += 1
        out.update({(label, s): int(q[s]) for s in counts.index if q[s] > 0})
    return out


class Sampler:
    """Label-balanced batches with a constant source mix: every batch holds exactly
    `quotas[(label, source)]` clips of each pool. Each pool is drawn without replacement in a
    fresh permutation per epoch (re-permuted when it runs out). Stateless: the plan of epoch e
    is a function of (seed, e), so resuming at an epoch boundary needs only the epoch number."""

    def __init__(self, train, batch_size: int, mix: str, seed: int):
        self.quotas = quotas(train, batch_size, mix)
        self.seed = seed
        labels, sources = train["label"].to_numpy(), train["source"].to_numpy()
        self.pools = {k: np.flatnonzero((labels == k[0]) & (sources == k[1]))
                      for k in self.quotas}

    def epoch_plan(self, epoch: int, n_batches: int) -> np.ndarray:
        """(n_batches, batch_size) row positions into `train`."""
        rng = np.random.default_rng([self.seed, epoch, 0x5A3])
        cols = []
        for key in sorted(self.quotas):
            q, pool = self.quotas[key], self.pools[key]
            need = q * n_batches
            draws = np.concatenate([rng.permutation(pool)
                                    for _ in range(-(-need // len(pool)))])[:need]
            cols.append(draws.reshape(n_batches, q))
        return np.concatenate(cols, axis=1)

    def state(self, epoch: int) -> dict:
        return {"seed": self.seed, "next_epoch": epoch + 1,
                "quotas": {f"{lab}|{src}": q for (lab, src), q in sorted(self.quotas.items())}}


class EpochBatches(torch.utils.data.Dataset):
    """Item i = this rank's i-th micro-batch of the epoch, made on the CPU (loader workers).

    Per clip: choose the augmentation (before loading: codec copies are separate files) ->
    load the FLAC (or its codec copy) -> augment.training_example (trim jitter, crop, wave
    augmentation, band-limit, normalise). The generator of batch b is (seed, epoch, b): batches
    do not depend on worker count or order, which is what makes resume exact.
    """

    def __init__(self, root: Path, rows: list[dict], plan: np.ndarray, epoch: int, ctx: dict):
        self.root, self.rows, self.plan, self.epoch, self.ctx = root, rows, plan, epoch, ctx

    def __len__(self) -> int:
        return len(self.plan) // self.ctx["world"]

    def __getitem__(self, i: int) -> dict:
        c = self.ctx
        b = i * c["world"] + c["rank"]  # global batch index
        rng = np.random.default_rng([c["seed"], self.epoch, b, 0xC0])
        length = crops.crop_length_s(rng, c["test_durations"], c["cap_s"], c["crop"])
        if c["max_crop_s"] > 0:
            length = min(length, c["max_crop_s"])
        n = crops.n_samples(length)
        waves, n_valid, names, params, records = [], [], [], [], []
        for pos in self.plan[b]:
            row = self.rows[pos]
            name = augment.choose(rng, c["augment"], row["codec_ids"])
            rel = (f"codecs/{name.split(':', 1)[1]}/{row['id']}.flac"
                   if name.startswith("codec:") else row["flac"])
            x = audio.load_audio(self.root / rel)
            if c["gpu_augment"]:  # draw here, render + finish the whole batch on the device
                wave, nv, p = augment.plan_example(x, name, n, rng, c["augment"])
                params.append(p)
            else:
                wave, nv = augment.training_example(x, name, n, rng, c["augment"])
                records.append(augment.stream_record(row["source"], row["label"], wave, nv))
            waves.append(wave)
            n_valid.append(nv)
            names.append(name)
        values, mask = crops.pad_batch(waves, n_valid)
        labels = [1.0 if self.rows[p]["label"] == "spoof" else 0.0 for p in self.plan[b]]
        return {"input_values": torch.from_numpy(values), "attention_mask": torch.from_numpy(mask),
                "labels": torch.tensor(labels), "names": names, "params": params,
                "records": records, "sources": [self.rows[p]["source"] for p in self.plan[b]],
                "label_names": [self.rows[p]["label"] for p in self.plan[b]]}


def validate(det, val_rows: list[dict], root: Path, tc: TrainConfig, device, amp) -> dict:
    """AUC (spoof positive) of the validation rows, each the whole clip up to val_max_s."""
    xs = [crops.test_input(audio.load_audio(root / r["flac"]), tc.val_max_s) for r in val_rows]
    order = np.argsort([len(x) for x in xs], kind="stable")
    logits = np.zeros(len(xs))
    det.eval()
    with torch.no_grad(), amp():
        for start in range(0, len(xs), tc.val_batch):
            idx = order[start: start + tc.val_batch]
            values, mask = crops.pad_batch([xs[i] for i in idx], [len(xs[i]) for i in idx])
            out = det(torch.from_numpy(values).to(device), torch.from_numpy(mask).to(device))
            logits[idx] = out.float().cpu().numpy()
    det.train()
    is_spoof = np.array([r["label"] == "spoof" for r in val_rows])
    return {"auc": augment.auc(logits[is_spoof], logits[~is_spoof]), "n": len(xs)}
