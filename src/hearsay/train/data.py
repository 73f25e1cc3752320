"""What the `hearsay train` loop reads: the job's rows, the label-balanced source-quota batch
plan, the per-batch loading + augmentation, and the validation readout.

    from hearsay.train.data import plan_job, Sampler, EpochBatches
    train, val, excl = plan_job(bundle, "fold", 3)            # holdout/test rows never train
    sampler = Sampler(train, 64, "proportional", seed=0)
    batch = EpochBatches(bundle.root, rows, sampler, 500, ctx)[(1, 0)]  # epoch 1, batch 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hearsay import metrics
from hearsay.contracts import protocol
from hearsay.contracts.bundle import clip_rel
from hearsay.contracts.manifest import LABELS
from hearsay.sound import audio, augment, example
from hearsay.sound.audio import pad_batch
from hearsay.train import augment_gpu, rates, shares
from hearsay.train.config import TrainConfig
from hearsay.train.errors import ConfigError, FoldLeak


def plan_job(bundle, job: str, fold: int | None):
    """(train rows, validation rows or None, family exclusion) of the bundle for this job.

    Family exclusion: the hand list `family_exclusion[k]` of the fold file's config, plus,
    derived from the fold file, every generator family of fold k's validation spoof rows:
    an extra row of a family that fold k validates on never trains fold k's model (a
    forgotten hand entry can no longer train a model on its own validation family). The full
    model has no validation split: the hand list `family_exclusion["full"]` only.
    Raises FoldLeak (exit 10) if a holdout, test or validation row would train, and ConfigError
    (exit 2) for a fold the bundle's fold file has no model for (0..n_folds-1 only)."""
    from hearsay.contracts.folds import SplitsConfig, train_ids

    df = bundle.manifest
    scfg = SplitsConfig.from_dict((bundle.meta.get("folds") or {}).get("config") or {})
    try:  # the fold count is the bundle's fold file's, never a literal: the pilot's is its last
        key = protocol.exclusion_key(job, fold, scfg.n_folds)
    except protocol.FoldOutside as err:
        raise ConfigError(f"--fold {fold}: {err}") from None
    val = None
    listed = sorted(scfg.family_exclusion.get(key, []))
    derived: list[str] = []
    if job != "full":
        val = df.loc[(df["fold"] == key) & (df["train_scope"] == "core")].reset_index(drop=True)
        spoof = val.loc[val["label"] == "spoof", "generator"]
        derived = sorted(set(spoof.map(scfg.family)) - set(listed))
    if derived:
        scfg = dataclasses.replace(scfg, family_exclusion={
            **scfg.family_exclusion, key: listed + derived})
    ids = set(train_ids(df, scfg, key))
    train = df.loc[df["id"].isin(ids)].reset_index(drop=True)
    # defence in depth, not an assert (python -O would drop it): these rows never train
    leaked = train.loc[train["fold"].isin(["holdout", "test", "probe"]) | (train["fold"] == key)]
    if val is not None:
        leaked = pd.concat([leaked, train.loc[train["id"].isin(val["id"])]])
    if not leaked.empty:
        raise FoldLeak(f"fold protocol broken: {len(leaked)} holdout/test/probe/validation rows "
                       f"would train the {job} model ({leaked['id'].tolist()[:5]}): re-make the "
                       "fold file (hearsay splits make) and the bundle")
    dropped = int(((df["train_scope"] == "extra") & df["generator"].map(scfg.family).isin(
        listed + derived) & ~df["fold"].isin(["holdout", "test", key])).sum())
    return train, val, {"listed": listed, "derived": derived, "extra_rows_dropped": dropped}


def quotas(train, batch_size: int, mix) -> dict[tuple[str, str], int]:
    """Clips per batch of each (label, source): batch_size/2 per label, split over the sources
    of that label by largest remainder (proportional to their counts, equal, or the shares of a
    source_mix table: {label: {source: share}}, shares 0 left out); each source gets at least
    one slot when the half-batch has room for all of them. Fixed for the run."""
    half = batch_size // 2
    out: dict[tuple[str, str], int] = {}
    for label in LABELS:
        counts = train.loc[train["label"] == label, "source"].value_counts().sort_index()
        if counts.empty:
            raise ConfigError(f"no {label} clips in the training rows: cannot balance labels")
        if isinstance(mix, dict):
            share = table_shares(mix, label, counts.index)
        elif mix == "proportional":
            share = counts / counts.sum()
        else:
            share = counts * 0 + 1 / len(counts)
        names = share.index
        raw = share * half
        q = np.floor(raw).astype(int)
        order = sorted(names, key=lambda s: (-(raw[s] - q[s]), s))
        for s in order[: half - int(q.sum())]:
            q[s] += 1
        for s in names:
            if q[s] == 0 and len(names) <= half:
                donor = max(names, key=lambda t: (q[t], t))
                q[donor] -= 1
                q[s] += 1
        out.update({(label, s): int(q[s]) for s in names if q[s] > 0})
    return out


def table_shares(mix: dict, label: str, sources) -> pd.Series:
    """The table's positive shares of `label` (index: sources, sorted); ConfigError unless the
    table names exactly the sources of that class's training rows."""
    table = mix[label]
    present = sorted(map(str, sources))
    missing, unlisted = sorted(set(table) - set(present)), sorted(set(present) - set(table))
    if missing:
        raise ConfigError(f"source_mix[{label!r}] names source(s) {missing} with no {label} "
                          f"clips in this job's training rows (its {label} sources: {present}): "
                          "fix the names or drop them from the table")
    if unlisted:
        raise ConfigError(f"source_mix[{label!r}] gives no share to source(s) {unlisted} of "
                          f"this job's {label} training rows: add them (a share of 0 = never "
                          "drawn) or select them out at bundle time")
    return pd.Series({s: float(v) for s, v in table.items() if v > 0}).sort_index()


class Sampler:
    """Label-balanced batches with a constant source mix: every batch holds exactly
    `quotas[(label, source)]` clips of each pool. Each pool is drawn without replacement in a
    fresh permutation per epoch (re-permuted when it runs out). Stateless: the plan of epoch e
    is a function of (seed, e), so resuming at an epoch boundary needs only the epoch number.
    With a source_mix table, `share_tol` refuses (ShareDrift, exit 11) quotas whose shares miss
    the table by more than that: the batch is too small to realise it."""

    def __init__(self, train, batch_size: int, mix, seed: int, share_tol: float | None = None):
        self.quotas = quotas(train, batch_size, mix)
        self.seed = seed
        if isinstance(mix, dict) and share_tol is not None:
            shares.check_planned(train, batch_size, mix, self.quotas, share_tol, quotas)
        # (label, source) pools with no slot (more sources than half a batch): never drawn;
        # listed in run_meta ("sources_without_quota") rather than dropped silently
        pairs = train[["label", "source"]].drop_duplicates().itertuples(index=False)
        self.without_quota = sorted(f"{lab}|{src}" for lab, src in pairs
                                    if (lab, src) not in self.quotas)
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


class EpochKeys(torch.utils.data.Sampler):
    """The keys (epoch, i) of this rank's micro-batches of one epoch; `set_epoch` before each
    epoch. The loader (and its persistent workers) lives for the whole run."""

    def __init__(self, per_rank: int):
        self.per_rank, self.epoch = per_rank, 1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.per_rank

    def __iter__(self):
        return iter([(self.epoch, i) for i in range(self.per_rank)])


@dataclass(frozen=True)
class BatchContext:
    """What EpochBatches needs besides the rows (pickled into every loader worker)."""

    seed: int  # TrainConfig.seed: every batch's RNG derives from (seed, epoch, batch)
    world: int  # processes in the job
    rank: int  # this process: it builds global batches rank, rank + world, ...
    test_durations: np.ndarray  # s, the bundle's test rows: the crop-length distribution
    cap_s: float  # the longest crop both classes reach (example.class_cap_s)
    crop: example.CropConfig
    augment: augment.AugmentConfig
    max_crop_s: float  # TrainConfig.max_crop_s (0 = no cap)
    gpu_augment: bool  # draw here, render on the device (TrainConfig.gpu_augment)


class EpochBatches(torch.utils.data.Dataset):
    """Item (epoch, i) = this rank's i-th micro-batch of that epoch, made on the CPU (loader
    workers, which persist across epochs: the plan of an epoch is re-derived in the worker).

    Per clip: hearsay.sound.example.build (choose the augmentation -> load the FLAC or its codec
    copy -> trim jitter, crop, wave augmentation, band-limit, normalise; with gpu_augment the
    render and finish are left to `device_batch`). The generator of batch b is (seed, epoch,
    b): batches do not depend on worker count or order, which is what makes resume exact. The
    batch carries `lengths` (B,) int32, not a (B, T) int64 mask: `device_batch` builds the mask
    on the device (an eighth of the bytes through shared memory, pinned memory and PCIe).
    """

    def __init__(self, root: Path, rows: list[dict], sampler: Sampler, n_batches: int,
                 ctx: BatchContext):
        self.root, self.rows, self.sampler, self.n_batches, self.ctx = \
            root, rows, sampler, n_batches, ctx
        self._plan: tuple[int, np.ndarray] | None = None  # (epoch, plan) cached per worker

    def plan(self, epoch: int) -> np.ndarray:
        if self._plan is None or self._plan[0] != epoch:
            self._plan = (epoch, self.sampler.epoch_plan(epoch, self.n_batches))
        return self._plan[1]

    def __getitem__(self, key: tuple[int, int]) -> dict:
        epoch, i = key
        c = self.ctx
        plan = self.plan(epoch)
        b = i * c.world + c.rank  # global batch index
        rng = np.random.default_rng([c.seed, epoch, b, 0xC0])
        length = example.crop_length_s(rng, c.test_durations, c.cap_s, c.crop)
        if c.max_crop_s > 0:
            length = min(length, c.max_crop_s)
        n = example.n_samples(length)
        waves, n_valid, names, params, records = [], [], [], [], []
        for pos in plan[b]:
            row = self.rows[pos]
            # gpu_augment: drawn here, rendered + finished for the whole batch on the device
            ex = example.build(self.root, row, n, rng, c.augment, locate=clip_file,
                               render=not c.gpu_augment)
            if c.gpu_augment:
                params.append(ex.params)
            else:
                records.append(rates.stream_record(row["source"], row["label"], ex.wave,
                                                   ex.n_valid))
            waves.append(ex.wave)
            n_valid.append(ex.n_valid)
            names.append(ex.name)
        values, _ = pad_batch(waves, n_valid)
        labels = [1.0 if self.rows[p]["label"] == "spoof" else 0.0 for p in plan[b]]
        return {"input_values": torch.from_numpy(values),
                "lengths": torch.from_numpy(np.asarray(n_valid, dtype=np.int32)),
                "labels": torch.tensor(labels), "names": names, "params": params,
                "records": records, "sources": [self.rows[p]["source"] for p in plan[b]],
                "label_names": [self.rows[p]["label"] for p in plan[b]]}


def clip_file(row: dict, name: str) -> str:
    """A training row's file under the bundle root for augmentation `name`: the codec copy for
    "codec:<c>", else the row's FLAC."""
    return clip_rel(row["id"], name.split(":", 1)[1]) if name.startswith("codec:") else row["flac"]


def device_batch(batch: dict, device: torch.device, gpu_augment: bool):
    """An EpochBatches batch on the device -> (input_values (B, T) float32 @ 16 kHz, attention
    mask (B, T) int64 1 = valid, labels (B,) 1.0 = spoof). Three non-blocking copies from
    pinned memory (+ one for the augmentation parameters); the mask is built there. With
    gpu_augment the drawn augmentations are rendered and every clip finished on the device
    (hearsay.train.augment_gpu: the numpy path's render + finish, batched)."""
    iv = batch["input_values"].to(device, non_blocking=True)
    lengths = batch["lengths"].to(device, non_blocking=True)  # (B,) int32 valid samples
    am = sample_mask(lengths, iv.shape[1])
    y = batch["labels"].to(device, non_blocking=True)
    if gpu_augment:
        iv = augment_gpu.train_batch(iv, am, batch["names"], batch["params"])
    return iv, am, y


def sample_mask(lengths: torch.Tensor, n: int) -> torch.Tensor:
    """(B,) valid samples (any int dtype, on the device) -> (B, n) int64 mask, built there."""
    return (torch.arange(n, device=lengths.device)[None, :] < lengths[:, None]).long()


class ValBatches(torch.utils.data.Dataset):
    """Item j = this rank's j-th validation batch: (row positions (b,) int64, values (b, T)
    float32, lengths (b,) int32), each clip whole up to val_max_s, batches length-sorted by the
    manifest duration. Batch k of the run goes to rank k % world: every rank scores a share."""

    def __init__(self, root: Path, val_rows: list[dict], tc: TrainConfig, world: int,
                 rank: int):
        order = np.argsort([min(r["duration"], tc.val_max_s) for r in val_rows], kind="stable")
        chunks = [order[s: s + tc.val_batch] for s in range(0, len(order), tc.val_batch)]
        self.root, self.rows, self.max_s = root, val_rows, tc.val_max_s
        self.chunks = chunks[rank::world]

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, j: int):
        idx = self.chunks[j]
        xs = [example.test_input(audio.load_audio(self.root / self.rows[i]["flac"]), self.max_s)
              for i in idx]
        values, _ = pad_batch(xs, [len(x) for x in xs])
        return (torch.from_numpy(np.asarray(idx, dtype=np.int64)), torch.from_numpy(values),
                torch.from_numpy(np.asarray([len(x) for x in xs], dtype=np.int32)))


def validate(det, loader, val_rows: list[dict], device, amp, ddp: bool) -> dict:
    """{"auc", "eer", "min_dcf", "pi", "n"} of the validation rows (spoof positive; minDCF
    normalised, at pi = hearsay.metrics.PI_OF_RECORD, cost direction as stated); each rank scores
    its share of the batches (`ValBatches` on the loader's workers), the logits meet in one
    all-reduce on the device."""
    logits = torch.zeros(len(val_rows), device=device)
    det.eval()
    with torch.no_grad(), amp():
        for idx, values, lengths in loader:
            lengths = lengths.to(device, non_blocking=True)
            out = det(values.to(device, non_blocking=True), sample_mask(lengths, values.shape[1]))
            logits.index_copy_(0, idx.to(device, non_blocking=True), out.float())
    det.train()
    if ddp:
        import torch.distributed as dist

        dist.all_reduce(logits)  # each row was scored on exactly one rank, zeros elsewhere
    scores = logits.cpu().numpy()  # one device->host read per readout
    is_spoof = np.array([r["label"] == "spoof" for r in val_rows])
    return readout_metrics(scores, is_spoof)


def readout_metrics(scores: np.ndarray, is_spoof: np.ndarray) -> dict:
    """The readout of one validation pass: AUC (the tripwire reads it), EER and minDCF at pi
    PI_OF_RECORD; EER and minDCF are None when one class is missing (AUC is then NaN)."""
    scores = np.asarray(scores, np.float64)
    if is_spoof.all() or not is_spoof.any():
        return {"auc": float("nan"), "eer": None, "min_dcf": None,
                "pi": metrics.PI_OF_RECORD, "n": len(scores)}
    thr, p_miss, p_fa = metrics.operating_points(scores, is_spoof)
    dcf, _ = metrics.min_dcf(p_miss, p_fa, thr, metrics.PI_OF_RECORD)
    return {"auc": metrics.auc(scores, is_spoof), "eer": metrics.eer_from_points(p_miss, p_fa),
            "min_dcf": dcf, "pi": metrics.PI_OF_RECORD, "n": len(scores)}
