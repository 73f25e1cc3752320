"""The training loop over a built `TrainRun` (hearsay.train.state, built by hearsay.train.prepare):
epochs of micro-batches, each epoch ended by a readout and a checkpoint. `hearsay.train.run`
builds the run and calls `train_epochs`; see hearsay.train for the recipe and the exit codes.

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

from hearsay import store as stores
from hearsay.contracts import run_dir
from hearsay.detector import layer_weights
from hearsay.detector.model import save_detector
from hearsay.sound import audio, example
from hearsay.train import checkpoint, levers, rates, shares
from hearsay.train.data import device_batch, validate
from hearsay.train.errors import TrainError, Tripwire
from hearsay.train.records import StreamRecords
from hearsay.train.state import TrainRun
from hearsay.train.step import (
    all_rank_rng,
    check_pending,
    clip_gradients,
    lr_multiplier,
    nonfinite_flag,
    queue_step,
)
from hearsay.train.steplog import StepLog, step_lrs
from hearsay.util.files import write_json

# --------------------------------------------------------------------------- the run
#
# The parts: hearsay.train.config (config, hash, exit-code errors), hearsay.train.state (a run's
# parts: r.plan, r.data, r.nets, r.store, r.progress; only r.progress moves on here),
# hearsay.train.prepare (builds them before the first step), hearsay.train.data (rows, sampler,
# batches, validation), hearsay.train.step (LR, optimiser groups, non-finite flag, RNG state).
# Here: train_epochs (the epoch loop) -> _train_epoch / _end_epoch and their steps.


def train_epochs(r: TrainRun, stop_after_epoch: int | None) -> dict:
    """The loop: epochs of micro-batches, each epoch ended by a readout and a checkpoint.

    An abort (exit 4-6, 9) still writes run_meta.json, with the reason under "aborted"."""
    # the device-augmented batches' stream records, on their own thread (hearsay.train.records)
    r.progress.stream = StreamRecords(r.plan.tc.stream_records_max, r.progress.records,
                                      wait=r.plan.device.type != "cuda")
    r.progress.hist.setdefault("grad_norm", [])  # a checkpoint written before grad norms were kept
    r.progress.hist.setdefault("lr_backbone", [])
    r.progress.steplog = StepLog(r)  # stdout + RUN_DIR/train_log.csv every log_every steps / s
    try:
        for epoch in range(r.progress.start_epoch, r.plan.tc.epochs + 1):
            _train_epoch(r, epoch)
            _end_epoch(r, epoch)
            if stop_after_epoch == epoch:
                return r.progress.meta
        if r.plan.rank == 0:
            _finish(r)
        else:
            _write_meta(r, complete=True)  # every rank's own progress (rank 0 writes the file)
    except (TrainError, stores.StoreError, rates.AugmentRateError) as err:
        with contextlib.suppress(RuntimeError):  # the abort's reason is what to report
            r.progress.stream.flush()
        _write_meta(r, aborted={"error": type(err).__name__, "reason": str(err)})
        raise
    finally:
        r.progress.stream.close()
        r.progress.steplog.close()  # the TensorBoard event file
    return r.progress.meta


# --------------------------------------------------------------------------- one epoch


def _train_epoch(r: TrainRun, epoch: int) -> None:
    """This epoch's micro-batches; an optimiser step closes each group of tc.grad_accum (the
    trailing, shorter group too); a readout every tc.val_every steps. Timed into
    r.progress.t_loop."""
    tc = r.plan.tc
    r.data.keys.set_epoch(epoch)  # the loader and its workers persist; only the keys change
    t0 = time.time()
    group_loss = torch.zeros((), device=r.plan.device)  # summed micro-batch losses of this group
    for i, batch in enumerate(r.data.loader):
        group_n = min(tc.grad_accum, r.data.per_rank - (i - i % tc.grad_accum))
        last = i % tc.grad_accum == group_n - 1
        group_loss = group_loss + _micro_batch(r, batch, group_n, last)
        if not last:
            continue
        _optimiser_step(r, epoch, group_loss, group_n)
        group_loss = torch.zeros((), device=r.plan.device)
        if tc.val_every and r.progress.step % tc.val_every == 0:
            r.progress.t_loop += time.time() - t0
            check_pending(r.progress.pending, r.progress.hist["loss"], wait=True,
                          norms=r.progress.hist["grad_norm"])
            _readout(r, epoch, epoch_end=False)
            t0 = time.time()
    check_pending(r.progress.pending, r.progress.hist["loss"], wait=True,
                  norms=r.progress.hist["grad_norm"])
    r.progress.t_loop += time.time() - t0


def _micro_batch(r: TrainRun, batch: dict, group_n: int, last: bool) -> torch.Tensor:
    """Forward + backward of one micro-batch (gradients summed into the group); returns its
    detached loss. Under DDP the gradient all-reduce runs only on the group's `last` one.
    Host->device in hearsay.train.data.device_batch (with the GPU augmentation); nothing here
    waits for the device, nor computes the stream records (their thread does:
    hearsay.train.records)."""
    tc = r.plan.tc
    iv, am, y = device_batch(batch, r.plan.device, tc.gpu_augment)  # (B, T), (B, T), (B,)
    if tc.gpu_augment:
        r.progress.stream.offer(iv, batch)  # a non-blocking copy; its records on their own thread
    iv, am = _cut_padding(r, batch, iv, am)
    sync = r.nets.model.no_sync() if r.plan.ddp and not last else contextlib.nullcontext()
    with sync:
        with r.plan.amp():
            # the speed levers' arguments (hearsay.train.levers), from the host's lengths
            logits = r.nets.fwd(iv, am, **levers.forward_args(
                tc, batch["lengths"].numpy(), iv.shape[1], r.nets.det.cfg, r.plan.device))
        target = y * (1 - tc.label_smoothing) + 0.5 * tc.label_smoothing
        loss = F.binary_cross_entropy_with_logits(logits.float(), target)
        (loss / group_n).backward()
    _tally(r, batch)
    return loss.detach()


def _cut_padding(r: TrainRun, batch: dict, iv: torch.Tensor, am: torch.Tensor):
    """(B, T) -> (B, T_cut): the smallest crop bucket holding the batch's longest valid clip
    (hearsay.sound.example.cut_samples; the longest length is read on the host, no device wait). Cut
    after augmentation and the stream records, so they see the batch as drawn. Counts the
    computed audio and the distinct batch shapes (one compiled graph each) into run_meta."""
    n = example.cut_samples(int(batch["lengths"].max()), iv.shape[1], r.data.ctx.crop.buckets_s)
    iv, am = iv[:, :n], am[:, :n]
    r.progress.meta["computed_audio_s"] = r.progress.meta.get("computed_audio_s", 0.0) + \
        iv.shape[0] * n / audio.SAMPLE_RATE
    shapes = r.progress.meta.setdefault("batch_shapes", [])
    if list(iv.shape) not in shapes:
        shapes.append(list(iv.shape))
    return iv, am


def _tally(r: TrainRun, batch: dict) -> None:
    """Realised augmentation per clip, the CPU path's stream records, clips and audio s."""
    for src, lab, name in zip(batch["sources"], batch["label_names"], batch["names"],
                              strict=True):
        r.progress.rate_log.record(src, lab, name)
    cap = r.plan.tc.stream_records_max
    if batch["records"] and len(r.progress.records) < cap:  # made in the workers
        r.progress.records.extend(batch["records"][: cap - len(r.progress.records)])
        r.progress.stream.offered = len(r.progress.records)
    r.progress.clips += len(batch["labels"])
    if getattr(r.progress, "steplog", None) is not None:
        r.progress.steplog.batch(batch)
    r.progress.audio_s += int(batch["lengths"].numpy().sum()) / audio.SAMPLE_RATE  # host copy


def _optimiser_step(r: TrainRun, epoch: int, group_loss: torch.Tensor, group_n: int) -> None:
    """Clip, queue the non-finite flag (read one step late), set the LR, step, count."""
    tc = r.plan.tc
    norm = clip_gradients(r.nets.trainable, tc.grad_clip)
    flag = nonfinite_flag(group_loss, norm, r.plan.ddp)
    # the steps whose copies have landed; no wait
    check_pending(r.progress.pending, r.progress.hist["loss"],
                  norms=r.progress.hist.get("grad_norm"))
    r.progress.pending.append(queue_step(flag, group_loss / group_n, norm, r.progress.step, epoch))
    mult = lr_multiplier(r.progress.step, r.data.total_steps, tc.warmup_frac, tc.lr_floor)
    for g in r.nets.opt.param_groups:
        g["lr"] = g["base_lr"] * mult
    r.nets.opt.step()
    r.nets.opt.zero_grad(set_to_none=True)
    lr_backbone, lr_head = step_lrs(r.nets.opt)  # the real LRs of this step (not the multiplier)
    r.progress.hist["lr"].append(lr_head)
    r.progress.hist.setdefault("lr_backbone", []).append(lr_backbone)
    r.progress.step_t.append(round(time.time() - r.plan.t_start, 4))
    r.progress.step += 1
    if getattr(r.progress, "steplog", None) is not None:
        r.progress.steplog.after_step(r, epoch)


# --------------------------------------------------------------------------- epoch end, finish


def _readout(r: TrainRun, epoch: int, *, epoch_end: bool) -> None:
    """Validation AUC, EER and minDCF (pi 0.3) into the history as {"step", "epoch",
    "epoch_end", "auc", "eer", "min_dcf", "pi", "n"}, once per optimiser step at most (a
    val_every step that ends an epoch reads out once, marked epoch_end); rank 0 writes the last
    one to RUN_DIR/readout.json and pushes it to the store (what `runner/status.sh --why JOB`
    shows). Tripwire (exit 5) at or below tripwire_auc. Every rank scores its share and gets
    the same AUC, so all ranks stop together, with no broadcast."""
    if r.data.val_rows is None:
        return
    if r.progress.hist["val"] and r.progress.hist["val"][-1]["step"] == r.progress.step:
        if epoch_end and not r.progress.hist["val"][-1].get("epoch_end"):
            r.progress.hist["val"][-1]["epoch_end"] = True
            _push_readout(r)
        return
    tc = r.plan.tc
    res = validate(r.nets.det, r.data.val_loader, r.data.val_rows, r.plan.device, r.plan.amp,
                   r.plan.ddp)
    r.progress.hist["val"].append({"step": r.progress.step, "epoch": epoch,
                                   "epoch_end": epoch_end, **res})
    if r.progress.steplog is not None:
        r.progress.steplog.readout(r, epoch, res)  # its line, CSV row and TensorBoard scalars
    _push_readout(r)
    if tc.tripwire_auc is not None and res["auc"] <= tc.tripwire_auc:
        raise Tripwire(f"validation AUC {res['auc']:.4f} <= "
                       f"{tc.tripwire_auc} at optimiser step {r.progress.step}: the model "
                       "ranks spoof "
                       "at or below bona fide (flipped labels or a broken pipeline?)")


def _push_readout(r: TrainRun) -> None:
    """Rank 0: the last readout (+ job, fold, tripwire bound) to RUN_DIR/readout.json, pushed.
    A push that fails is said and training goes on: the readout is a progress report (it is in
    run_meta and every checkpoint too), and the checkpoint push that follows fails the run."""
    if r.plan.rank != 0:
        return
    path = Path(r.plan.out) / run_dir.READOUT
    write_json(path, {"job": r.plan.resolved["job"], "fold": r.plan.resolved["fold"],
                      "tripwire_auc": r.plan.tc.tripwire_auc, **r.progress.hist["val"][-1]})
    try:
        r.store.push_file(path, run_dir.READOUT)
    except stores.StoreError as err:
        print(f"hearsay train: readout not pushed ({err}); training goes on", file=sys.stderr)
    if r.progress.steplog is not None:
        # the per-step log's latest line goes with the readout (its CSV with the checkpoint)
        r.progress.steplog.push(r.store, with_csv=False)


def _end_epoch(r: TrainRun, epoch: int) -> None:
    """Readout, the class-balance check of the realised rates (exit 9), then on rank 0 the
    checkpoint (pushed to the store), the throughput and run_meta.json."""
    r.progress.stream.flush()  # this epoch's records are in r.progress.records (checkpointed)
    r.progress.meta["stream_records_skipped_batches"] = r.progress.stream.skipped
    _readout(r, epoch, epoch_end=True)
    r.progress.meta["rate_balance"] = r.progress.rate_log.check_balanced(r.plan.tc.rate_tol)
    # run_meta "source_mix"; exit 11 on drift
    shares.check_realised(r.plan.tc, r.progress.rate_log, r.progress.meta)
    r.progress.meta["epochs"] = epoch
    r.progress.meta["layer_weights"] = layer_weights.readout(r.nets.det, r.plan.tc.layer_rule)
    # every rank takes part
    rng = all_rank_rng(r.plan.device, r.nets.det.generator, r.plan.ddp, r.plan.world)
    logs = _all_rank_logs(r)  # a collective too
    if r.plan.rank == 0:
        _checkpoint(r, epoch, rng, logs)
    r.progress.meta["throughput"] = {"clips_per_s": r.progress.clips / max(r.progress.t_loop, 1e-9),
                            "audio_s_per_s": r.progress.audio_s / max(r.progress.t_loop, 1e-9),
                            **_padding_share(r)}
    _write_meta(r)  # rank 0 writes it; the others keep their own progress in r.progress.meta


def _padding_share(r: TrainRun) -> dict:
    """This run's valid vs computed audio (s, this rank, since start or resume) and the shapes
    the model was fed: valid_share 1 = no compute on padding."""
    computed = r.progress.meta.get("computed_audio_s", 0.0)
    return {"valid_audio_s": round(r.progress.audio_s, 3), "computed_audio_s": round(computed, 3),
            "valid_share": round(r.progress.audio_s / computed, 4) if computed else None,
            "batch_shapes": len(r.progress.meta.get("batch_shapes", []))}


def _all_rank_logs(r: TrainRun) -> list[dict]:
    """Every rank's own logs, [{"rate_log", "loss"}] by rank: each rank counts its own clips
    and losses, and resumes with its own (step 3 of hearsay.train.prepare)."""
    mine = {"rate_log": r.progress.rate_log.state(), "loss": list(r.progress.hist["loss"])}
    if not r.plan.ddp:
        return [mine]
    import torch.distributed as dist

    logs: list = [None] * r.plan.world
    dist.all_gather_object(logs, mine)
    return logs


def _checkpoint(r: TrainRun, epoch: int, rng: dict, logs: list[dict]) -> None:
    """checkpoints/epoch_NNNN (model, optimiser, every rank's RNG, state.json), pushed."""
    tc = r.plan.tc
    state = {**r.plan.identity, "epoch": epoch, "step": r.progress.step, "config": r.plan.resolved,
             "world_size": r.plan.world,
             "sampler": r.data.sampler.state(epoch), "rate_log": r.progress.rate_log.state(),
             "rank_logs": logs,
             "scheduler": {"kind": "warm-up + cosine (lr_multiplier)",
                           "next_step": r.progress.step, "total_steps": r.data.total_steps,
                           "warmup_frac": tc.warmup_frac, "floor": tc.lr_floor},
             "history": r.progress.hist, "stream_records": r.progress.records}
    name = stores.ckpt_name(epoch)
    local = checkpoint.write_checkpoint(r.plan.out / stores.CKPT_DIR / name,
                                        r.nets.det.state_dict(),
                                    r.nets.opt.state_dict(), rng, state)
    r.store.publish_checkpoint(local, epoch)  # folder, then its marker: visible only when whole
    if r.progress.steplog is not None:
        r.progress.steplog.push(r.store)  # and the per-step log with it


def _write_meta(r: TrainRun, **extra) -> dict:
    """Progress, history, realised rates and shortcut AUCs into run_meta (rank 0 writes it)."""
    r.progress.meta.update(steps=r.progress.step, history=r.progress.hist,
                           rates=r.progress.rate_log.rates(),
                  wall_s=time.time() - r.plan.t_start,
                  stream_shortcuts=rates.stream_shortcut_aucs(r.progress.records), **extra)
    if r.plan.rank == 0:
        run_dir.write_meta(r.plan.out, r.progress.meta)
    return r.progress.meta


def _finish(r: TrainRun) -> None:
    """Rank 0: RUN_DIR/final (the model + its config), run_meta complete, all pushed."""
    save_detector(r.nets.det, run_dir.final_dir(r.plan.out),
                  extra_config={k: v for k, v in r.plan.resolved.items() if k != "model"})
    r.store.push_dir(run_dir.final_dir(r.plan.out), run_dir.FINAL)
    _write_meta(r, complete=True)
    r.store.push_file(run_dir.meta_path(r.plan.out), run_dir.META)
    r.store.push_file(run_dir.config_path(r.plan.out), run_dir.CONFIG)
