"""The training loop over a built `TrainRun` (hearsay.train.prepare): epochs of micro-batches,
each epoch ended by a readout and a checkpoint. `hearsay.train.run` builds the run and calls
`train_epochs`; see hearsay.train for the recipe and the exit codes.

    r = build_run(resolved, bundle_dir, out, ...)   # hearsay.train.prepare
    meta = train_epochs(r, stop_after_epoch=None)    # -> run_meta
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from hearsay import layer_weights
from hearsay import store as stores
from hearsay.contracts import run_dir
from hearsay.files import write_json
from hearsay.model import save_detector
from hearsay.sound import audio, crops
from hearsay.train import checkpoint, rates, shares
from hearsay.train.data import device_batch, validate
from hearsay.train.errors import TrainError, Tripwire
from hearsay.train.prepare import TrainRun
from hearsay.train.records import StreamRecords
from hearsay.train.step import (
    all_rank_rng,
    check_pending,
    clip_gradients,
    lr_multiplier,
    nonfinite_flag,
    queue_step,
)
from hearsay.train.steplog import StepLog, step_lrs

# --------------------------------------------------------------------------- the run
#
# The parts: hearsay.train.config (config, hash, exit-code errors), hearsay.train.prepare (what a
# run builds before its first step: TrainRun), hearsay.train.data (rows, sampler, batches,
# validation), hearsay.train.step (LR, optimiser groups, non-finite flag, RNG state).
# Here: train_epochs (the epoch loop) -> _train_epoch / _end_epoch and their steps.


def train_epochs(r: TrainRun, stop_after_epoch: int | None) -> dict:
    """The loop: epochs of micro-batches, each epoch ended by a readout and a checkpoint.

    An abort (exit 4-6, 9) still writes run_meta.json, with the reason under "aborted"."""
    # the device-augmented batches' stream records, on their own thread (hearsay.train.records)
    r.stream = StreamRecords(r.tc.stream_records_max, r.records, wait=r.device.type != "cuda")
    r.hist.setdefault("grad_norm", [])  # a checkpoint written before grad norms were kept
    r.hist.setdefault("lr_backbone", [])
    r.steplog = StepLog(r)  # stdout + RUN_DIR/train_log.csv every log_every steps / s
    try:
        for epoch in range(r.start_epoch, r.tc.epochs + 1):
            _train_epoch(r, epoch)
            _end_epoch(r, epoch)
            if stop_after_epoch == epoch:
                return r.meta
        if r.rank == 0:
            _finish(r)
        else:
            _write_meta(r, complete=True)  # every rank's own progress (rank 0 writes the file)
    except (TrainError, stores.StoreError, rates.AugmentRateError) as err:
        with contextlib.suppress(RuntimeError):  # the abort's reason is what to report
            r.stream.flush()
        _write_meta(r, aborted={"error": type(err).__name__, "reason": str(err)})
        raise
    finally:
        r.stream.close()
    return r.meta


# --------------------------------------------------------------------------- one epoch


def _train_epoch(r: TrainRun, epoch: int) -> None:
    """This epoch's micro-batches; an optimiser step closes each group of tc.grad_accum (the
    trailing, shorter group too); a readout every tc.val_every steps. Timed into r.t_loop."""
    tc = r.tc
    r.keys.set_epoch(epoch)  # the loader and its workers persist; only the keys change
    t0 = time.time()
    group_loss = torch.zeros((), device=r.device)  # summed micro-batch losses of this group
    for i, batch in enumerate(r.loader):
        group_n = min(tc.grad_accum, r.per_rank - (i - i % tc.grad_accum))
        last = i % tc.grad_accum == group_n - 1
        group_loss = group_loss + _micro_batch(r, batch, group_n, last)
        if not last:
            continue
        _optimiser_step(r, epoch, group_loss, group_n)
        group_loss = torch.zeros((), device=r.device)
        if tc.val_every and r.step % tc.val_every == 0:
            r.t_loop += time.time() - t0
            check_pending(r.pending, r.hist["loss"], wait=True, norms=r.hist["grad_norm"])
            _readout(r, epoch, epoch_end=False)
            t0 = time.time()
    check_pending(r.pending, r.hist["loss"], wait=True, norms=r.hist["grad_norm"])
    r.t_loop += time.time() - t0


def _micro_batch(r: TrainRun, batch: dict, group_n: int, last: bool) -> torch.Tensor:
    """Forward + backward of one micro-batch (gradients summed into the group); returns its
    detached loss. Under DDP the gradient all-reduce runs only on the group's `last` one.
    Host->device in hearsay.train.data.device_batch (with the GPU augmentation); nothing here
    waits for the device, nor computes the stream records (their thread does:
    hearsay.train.records)."""
    tc = r.tc
    iv, am, y = device_batch(batch, r.device, tc.gpu_augment)  # (B, T), (B, T), (B,)
    if tc.gpu_augment:
        r.stream.offer(iv, batch)  # a non-blocking copy; its records on their own thread
    iv, am = _cut_padding(r, batch, iv, am)
    sync = r.model.no_sync() if r.ddp and not last else contextlib.nullcontext()
    with sync:
        with r.amp():
            logits = r.fwd(iv, am)
        target = y * (1 - tc.label_smoothing) + 0.5 * tc.label_smoothing
        loss = F.binary_cross_entropy_with_logits(logits.float(), target)
        (loss / group_n).backward()
    _tally(r, batch)
    return loss.detach()


def _cut_padding(r: TrainRun, batch: dict, iv: torch.Tensor, am: torch.Tensor):
    """(B, T) -> (B, T_cut): the smallest crop bucket holding the batch's longest valid clip
    (hearsay.sound.crops.cut_samples; the longest length is read on the host, no device wait). Cut
    after augmentation and the stream records, so they see the batch as drawn. Counts the
    computed audio and the distinct batch shapes (one compiled graph each) into run_meta."""
    n = crops.cut_samples(int(batch["lengths"].max()), iv.shape[1], r.ctx.crop.buckets_s)
    iv, am = iv[:, :n], am[:, :n]
    r.meta["computed_audio_s"] = r.meta.get("computed_audio_s", 0.0) + \
        iv.shape[0] * n / audio.SAMPLE_RATE
    shapes = r.meta.setdefault("batch_shapes", [])
    if list(iv.shape) not in shapes:
        shapes.append(list(iv.shape))
    return iv, am


def _tally(r: TrainRun, batch: dict) -> None:
    """Realised augmentation per clip, the CPU path's stream records, clips and audio s."""
    for src, lab, name in zip(batch["sources"], batch["label_names"], batch["names"],
                              strict=True):
        r.rate_log.record(src, lab, name)
    if batch["records"] and len(r.records) < r.tc.stream_records_max:  # made in the workers
        r.records.extend(batch["records"][: r.tc.stream_records_max - len(r.records)])
        r.stream.offered = len(r.records)
    r.clips += len(batch["labels"])
    if getattr(r, "steplog", None) is not None:
        r.steplog.batch(batch)
    r.audio_s += int(batch["lengths"].numpy().sum()) / audio.SAMPLE_RATE  # host copy


def _optimiser_step(r: TrainRun, epoch: int, group_loss: torch.Tensor, group_n: int) -> None:
    """Clip, queue the non-finite flag (read one step late), set the LR, step, count."""
    tc = r.tc
    norm = clip_gradients(r.trainable, tc.grad_clip)
    flag = nonfinite_flag(group_loss, norm, r.ddp)
    # the steps whose copies have landed; no wait
    check_pending(r.pending, r.hist["loss"], norms=r.hist.get("grad_norm"))
    r.pending.append(queue_step(flag, group_loss / group_n, norm, r.step, epoch))
    mult = lr_multiplier(r.step, r.total_steps, tc.warmup_frac, tc.lr_floor)
    for g in r.opt.param_groups:
        g["lr"] = g["base_lr"] * mult
    r.opt.step()
    r.opt.zero_grad(set_to_none=True)
    lr_backbone, lr_head = step_lrs(r.opt)  # the real LRs of this step (not the multiplier)
    r.hist["lr"].append(lr_head)
    r.hist.setdefault("lr_backbone", []).append(lr_backbone)
    r.step_t.append(round(time.time() - r.t_start, 4))
    r.step += 1
    if getattr(r, "steplog", None) is not None:
        r.steplog.after_step(r, epoch)


# --------------------------------------------------------------------------- epoch end, finish


def _readout(r: TrainRun, epoch: int, *, epoch_end: bool) -> None:
    """Validation AUC, EER and minDCF (pi 0.3) into the history as {"step", "epoch",
    "epoch_end", "auc", "eer", "min_dcf", "pi", "n"}, once per optimiser step at most (a
    val_every step that ends an epoch reads out once, marked epoch_end); rank 0 writes the last
    one to RUN_DIR/readout.json and pushes it to the store (what `runner/status.sh --why JOB`
    shows). Tripwire (exit 5) at or below tripwire_auc. Every rank scores its share and gets
    the same AUC, so all ranks stop together, with no broadcast."""
    if r.val_rows is None:
        return
    if r.hist["val"] and r.hist["val"][-1]["step"] == r.step:
        if epoch_end and not r.hist["val"][-1].get("epoch_end"):
            r.hist["val"][-1]["epoch_end"] = True
            _push_readout(r)
        return
    tc = r.tc
    res = validate(r.det, r.val_loader, r.val_rows, r.device, r.amp, r.ddp)
    r.hist["val"].append({"step": r.step, "epoch": epoch, "epoch_end": epoch_end, **res})
    _push_readout(r)
    if tc.tripwire_auc is not None and res["auc"] <= tc.tripwire_auc:
        raise Tripwire(f"validation AUC {res['auc']:.4f} <= "
                       f"{tc.tripwire_auc} at optimiser step {r.step}: the model ranks spoof "
                       "at or below bona fide (flipped labels or a broken pipeline?)")


def _push_readout(r: TrainRun) -> None:
    """Rank 0: the last readout (+ job, fold, tripwire bound) to RUN_DIR/readout.json, pushed.
    A push that fails is said and training goes on: the readout is a progress report (it is in
    run_meta and every checkpoint too), and the checkpoint push that follows fails the run."""
    if r.rank != 0:
        return
    path = Path(r.out) / run_dir.READOUT
    write_json(path, {"job": r.resolved["job"], "fold": r.resolved["fold"],
                      "tripwire_auc": r.tc.tripwire_auc, **r.hist["val"][-1]})
    try:
        r.store.push_file(path, run_dir.READOUT)
    except stores.StoreError as err:
        print(f"hearsay train: readout not pushed ({err}); training goes on", file=sys.stderr)
    if r.steplog is not None:
        # the per-step log's latest line goes with the readout (its CSV with the checkpoint)
        r.steplog.push(r.store, with_csv=False)


def _end_epoch(r: TrainRun, epoch: int) -> None:
    """Readout, the class-balance check of the realised rates (exit 9), then on rank 0 the
    checkpoint (pushed to the store), the throughput and run_meta.json."""
    r.stream.flush()  # the records offered this epoch are in r.records (checkpointed below)
    r.meta["stream_records_skipped_batches"] = r.stream.skipped
    _readout(r, epoch, epoch_end=True)
    r.meta["rate_balance"] = r.rate_log.check_balanced(r.tc.rate_tol)
    shares.check_realised(r.tc, r.rate_log, r.meta)  # run_meta "source_mix"; exit 11 on drift
    r.meta["epochs"] = epoch
    r.meta["layer_weights"] = layer_weights.readout(r.det, r.tc.layer_rule)
    rng = all_rank_rng(r.device, r.det.generator, r.ddp, r.world)  # every rank takes part
    logs = _all_rank_logs(r)  # a collective too
    if r.rank == 0:
        _checkpoint(r, epoch, rng, logs)
    r.meta["throughput"] = {"clips_per_s": r.clips / max(r.t_loop, 1e-9),
                            "audio_s_per_s": r.audio_s / max(r.t_loop, 1e-9),
                            **_padding_share(r)}
    _write_meta(r)  # rank 0 writes it; the others keep their own progress in r.meta


def _padding_share(r: TrainRun) -> dict:
    """This run's valid vs computed audio (s, this rank, since start or resume) and the shapes
    the model was fed: valid_share 1 = no compute on padding."""
    computed = r.meta.get("computed_audio_s", 0.0)
    return {"valid_audio_s": round(r.audio_s, 3), "computed_audio_s": round(computed, 3),
            "valid_share": round(r.audio_s / computed, 4) if computed else None,
            "batch_shapes": len(r.meta.get("batch_shapes", []))}


def _all_rank_logs(r: TrainRun) -> list[dict]:
    """Every rank's own logs, [{"rate_log", "loss"}] by rank: each rank counts its own clips
    and losses, and resumes with its own (step 3 of hearsay.train.prepare)."""
    mine = {"rate_log": r.rate_log.state(), "loss": list(r.hist["loss"])}
    if not r.ddp:
        return [mine]
    import torch.distributed as dist

    logs: list = [None] * r.world
    dist.all_gather_object(logs, mine)
    return logs


def _checkpoint(r: TrainRun, epoch: int, rng: dict, logs: list[dict]) -> None:
    """checkpoints/epoch_NNNN (model, optimiser, every rank's RNG, state.json), pushed."""
    tc = r.tc
    state = {**r.identity, "epoch": epoch, "step": r.step, "config": r.resolved,
             "world_size": r.world,
             "sampler": r.sampler.state(epoch), "rate_log": r.rate_log.state(),
             "rank_logs": logs,
             "scheduler": {"kind": "warm-up + cosine (lr_multiplier)",
                           "next_step": r.step, "total_steps": r.total_steps,
                           "warmup_frac": tc.warmup_frac, "floor": tc.lr_floor},
             "history": r.hist, "stream_records": r.records}
    name = stores.ckpt_name(epoch)
    local = checkpoint.write_checkpoint(r.out / stores.CKPT_DIR / name, r.det.state_dict(),
                                    r.opt.state_dict(), rng, state)
    r.store.publish_checkpoint(local, epoch)  # folder, then its marker: visible only when whole
    if r.steplog is not None:
        r.steplog.push(r.store)  # and the per-step log with it


def _write_meta(r: TrainRun, **extra) -> dict:
    """Progress, history, realised rates and shortcut AUCs into run_meta (rank 0 writes it)."""
    r.meta.update(steps=r.step, history=r.hist, rates=r.rate_log.rates(),
                  wall_s=time.time() - r.t_start,
                  stream_shortcuts=rates.stream_shortcut_aucs(r.records), **extra)
    if r.rank == 0:
        run_dir.write_meta(r.out, r.meta)
    return r.meta


def _finish(r: TrainRun) -> None:
    """Rank 0: RUN_DIR/final (the model + its config), run_meta complete, all pushed."""
    save_detector(r.det, run_dir.final_dir(r.out),
                  extra_config={k: v for k, v in r.resolved.items() if k != "model"})
    r.store.push_dir(run_dir.final_dir(r.out), run_dir.FINAL)
    _write_meta(r, complete=True)
    r.store.push_file(run_dir.meta_path(r.out), run_dir.META)
    r.store.push_file(run_dir.config_path(r.out), run_dir.CONFIG)
