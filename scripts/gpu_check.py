#!/usr/bin/env python3
"""Helpers of scripts/gpu_check.sh: the machine check before the steps, the summary after.

    python3 scripts/gpu_check.py env OUT_DIR [--dry-run]   # -> OUT_DIR/env.json
    python3 scripts/gpu_check.py summary OUT_DIR STEPS_TSV  # -> OUT_DIR/summary.json + table
    python3 scripts/gpu_check.py ddp OUT_DIR WORK_DIR [--dry-run]   # -> OUT_DIR/ddp.json

`env` records what the figures were measured on (python, torch, CUDA, the GPU, package versions,
where hearsay was imported from) and, on a GPU, the card as found: a bf16 8192^3 matrix product
rate on random data (a ceiling to read the other figures against; 769-798 TFLOP/s were seen
on an H200) and one read-only nvidia-smi query. It imports every module the steps need, so
a missing wheel fails here, in seconds, not after minutes of another step.

`ddp` runs `hearsay train` under torchrun (python -m torch.distributed.run --standalone): one
rank per GPU, at most 2 (NCCL), or 2 ranks with gloo on the CPU (--dry-run, the trainer's
--cpu-smoke preset), on the preflight's synthetic bundle (container/trainer/smoke_train.py) with
its smoke sizes, 2 epochs: DistributedDataParallel(device_ids), a validation readout per
optimiser step (the logits all-reduced), both epochs' checkpoints (every rank's RNG and logs
through all_gather_object) and the final model; ddp.json (world size, backend, exit code,
seconds, steps, readouts, losses, the rates' balance) is written as soon as the run ends.

`summary` reads each step's rc/seconds/limit (STEPS_TSV, written by gpu_check.sh) and the
files the steps left in OUT_DIR, and prints one short table (a remote run's log ends with
it). Figures are copied from the steps' own outputs, never recomputed.

Exit codes: env: 0 ready, 3 not ready (an import failed, or no CUDA device outside --dry-run);
summary: 0 every step exited 0, 1 a step failed, timed out or was skipped; ddp: the trainer's
(torchrun's) exit code.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("numpy", "scipy", "pandas", "onnx", "onnxruntime", "onnxscript", "transformers",
            "safetensors", "soundfile", "soxr")
# hearsay modules the three steps import: a missing wheel shows up here first
MODULES = ("hearsay.sound.audio", "hearsay.evaluate.score", "hearsay.train",
           "hearsay.export.parity", "hearsay.export.onnx_export")
ENCODERS = ("libmp3lame", "libopus", "aac", "libopencore_amrnb", "pcm_mulaw")  # codec copies
LOCK = Path(__file__).resolve().parents[1] / "requirements.lock"
SMI_FIELDS = ("name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,"
              "temperature.gpu,power.draw,utilization.gpu")


def lock_differences(names) -> dict[str, str]:
    """{package: "installed X, lock Y"} for each of `names` whose installed version (python's
    package metadata) differs from requirements.lock's pin ("not installed" when absent)."""
    from importlib import metadata

    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^ ;]+)", LOCK.read_text(), flags=re.M))
    pins = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    diff = {}
    for name in names:
        want = pins.get(name.lower().replace("_", "-"))
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = "not installed"
        if want is not None and have != want:
            diff[name] = f"installed {have}, lock {want}"
    return diff


def ffmpeg_info() -> dict:
    """The ffmpeg the steps use (hearsay.sound.decoder's lookup: $HEARSAY_FFMPEG first, as
    gpu_check.sh
    exports it) and the encoders of ENCODERS it lacks."""
    try:
        from hearsay.sound import decoder

        exe = decoder.ffmpeg_exe()
        listed = subprocess.run([exe, "-hide_banner", "-encoders"], capture_output=True,
                                text=True, timeout=30).stdout
    except Exception as err:  # noqa: BLE001 - report any failure, the steps say the rest
        return {"ffmpeg": f"MISSING ({type(err).__name__}: {err})"}
    names = {ln.split()[1] for ln in listed.splitlines() if len(ln.split()) > 1}
    return {"ffmpeg": exe, "ffmpeg_missing_encoders": [e for e in ENCODERS if e not in names]}


def env(out: Path, dry: bool) -> int:
    info: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dry_run": dry,
                  "python": platform.python_version(), "executable": sys.executable}
    try:
        import torch
    except ImportError as err:  # the device image holds torch; anything else is not that image
        info.update(torch=f"MISSING ({err})", ready=False, error="torch does not import")
        (out / "env.json").write_text(json.dumps(info, indent=1) + "\n")
        print("env.json:", json.dumps(info))
        return 3
    info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                cuda_available=torch.cuda.is_available(), cpus=os.cpu_count(),
                torch_threads=torch.get_num_threads())
    ready = True
    for name in PACKAGES:
        try:
            info[name] = getattr(importlib.import_module(name), "__version__", "?")
        except Exception as err:  # noqa: BLE001 - report any import failure, keep checking
            info[name], ready = f"MISSING ({type(err).__name__}: {err})", False
    for name in MODULES:
        try:
            info[f"import {name}"] = importlib.import_module(name).__file__
        except Exception as err:  # noqa: BLE001
            info[f"import {name}"], ready = f"FAILED ({type(err).__name__}: {err})", False
    # torchao: the fp8 lever's; without it that row is skipped (hearsay.train.fp8), not a failure
    info["lock_differs"] = lock_differences(("torch", *PACKAGES, "torchao"))
    info.update(ffmpeg_info())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                    gpu_mem_gib=round(p.total_memory / 2**30, 1),
                    cudnn=torch.backends.cudnn.version())
        if not dry:
            from hearsay.train.flops import bf16_matmul_tflops  # the one timing of that rate

            info["bf16_matmul_8192_tflops"] = round(bf16_matmul_tflops(), 1)
        try:  # read-only query: the card's settings are left as found
            info["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as err:
            info["nvidia_smi"] = f"unavailable ({err})"
    elif not dry:
        info["error"] = "no CUDA device (torch.cuda.is_available() is False)"
        ready = False
    info["ready"] = ready
    (out / "env.json").write_text(json.dumps(info, indent=1) + "\n")
    print("env.json:", json.dumps(info))
    return 0 if ready else 3


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def parity_figures(out: Path) -> tuple[dict | None, str]:
    data = read_json(out / "parity.json") or {}
    rep = data.get("parity_b") or data.get("parity_b_cpu_check")
    if not rep:
        return None, "no parity_b in parity.json"
    b, f = rep["bf16_vs_ort"], rep["fp32_vs_ort"]
    line = (f"{rep['device']}, {rep['clips']} clips: bf16 vs ORT Spearman {b['spearman']:.5f} "
            f"max|d| {b['max_abs_dlogit']:.4f} ({'PASS' if rep['passed'] else 'FAIL'}); "
            f"fp32 vs ORT max|d| {f['max_abs_dlogit']:.2e}")
    return rep, line


def score_figures(out: Path) -> tuple[list[str], str]:
    try:
        lines = (out / "bench_score.txt").read_text().splitlines()
    except OSError:
        return [], "no bench_score.txt"
    keep = [ln for ln in lines
            if ln.startswith(("shape=", "end-to-end:", "fed scoring:", "feed only:", "model only:",
                              "end-to-end / model only:"))]
    # "end-to-end: 41.8 clips/s wall, 229.0 audio-s/s (1.53 s wall); ..." -> the two rates
    rates = [f"{name} {re.sub(r' [(].*$', '', rest).strip()}"
             for name, rest in (ln.split(":", 1) for ln in keep if not ln.startswith("shape="))]
    return keep, "; ".join(rates) or "no rate lines"


TRAIN_LINE = re.compile(r"^(fine-tune|frozen)( \+ \w+)?\s+(raw|\| trainer)\s")


def _train_row(r: dict) -> str:
    """'fine-tune + compile: raw 900 (1.9x eager) trainer 850 (0.94), valid 86%' (clips/s);
    a trainer-only row (bench_train_gpu --trainer-only) has no raw part."""
    text = f"{r['variant']}:"
    if "raw" in r:
        text += f" raw {r['raw']['clips_per_s']:.0f}"
    if "compiled_over_eager" in r:
        text += f" ({r['compiled_over_eager']:.2f}x eager)"
    if "trainer" in r:
        share = r["trainer"].get("valid_share")
        text += f" trainer {r['trainer']['clips_per_s']:.0f}"
        if "clips_per_s_median_step" in r["trainer"]:
            text += f" (median step {r['trainer']['clips_per_s_median_step']:.0f})"
        if "trainer_over_raw" in r:
            text += f" ({r['trainer_over_raw']:.2f})"
        text += "" if share is None else f" valid {100 * share:.0f}%"
    return text


def train_figures(out: Path, log_text: str) -> tuple[list, str]:
    data = read_json(out / "bench_train.json")
    if data:
        rows = data["figures"]
        text = "; ".join(_train_row(r) for r in rows)
        return rows, text + " clips/s"
    # killed before the JSON: the per-variant lines it printed (flushed) are what is left
    rows = [ln.strip() for ln in log_text.splitlines() if TRAIN_LINE.match(ln)]
    return rows, ("no bench_train.json; from the log: "
                  + "; ".join(re.sub(r"\s+", " ", r) for r in rows) if rows else "no figures")


def _smoke_train():
    """container/trainer/smoke_train.py as a module: its bundle and its smoke-size config."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "container" / "trainer" / "smoke_train.py"
    spec = importlib.util.spec_from_file_location("smoke_train", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ddp(out: Path, work: Path, dry: bool) -> int:
    import torch

    st = _smoke_train()
    cuda = not dry and torch.cuda.is_available()
    world = min(2, torch.cuda.device_count()) if cuda else 2
    device = torch.device("cuda" if cuda else "cpu")
    cfg, flags = st.train_config(device)
    cfg["train"]["epochs"] = 2
    work.mkdir(parents=True, exist_ok=True)
    (work / "ddp-config.json").write_text(json.dumps(cfg))
    bundle = st.make_bundle(work)
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            str(world), "-m", "hearsay.cli", "train", "--bundle", str(bundle), "--fold", "0",
            "--out", str(work / "run"), "--config", str(work / "ddp-config.json"), *flags]
    t0 = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    info = {"world_size": world, "backend": "nccl" if cuda else "gloo (dry run)",
            "rc": proc.returncode, "seconds": round(time.time() - t0, 1)}
    meta = read_json(work / "run" / "run_meta.json") or {}
    hist = meta.get("history", {})
    info.update(steps=meta.get("steps"), complete=meta.get("complete"),
                val=hist.get("val"), loss=hist.get("loss"),
                rate_balance=meta.get("rate_balance"), device=meta.get("device"))
    if proc.returncode != 0:
        info["stderr_tail"] = proc.stderr[-2000:]
    (out / "ddp.json").write_text(json.dumps(info, indent=1) + "\n")
    print(proc.stderr[-3000:] if proc.returncode else "", end="")
    print("ddp.json:", json.dumps({k: info[k] for k in ("world_size", "backend", "rc",
                                                       "seconds", "steps")}))
    return proc.returncode


def ddp_figures(out: Path) -> tuple[dict | None, str]:
    info = read_json(out / "ddp.json")
    if not info:
        return None, "no ddp.json"
    val = ", ".join(f"{v['auc']:.2f}" for v in info.get("val") or [])
    return info, (f"{info['world_size']} rank(s) {info['backend']}: rc {info['rc']}, "
                  f"{info['steps']} steps, readouts AUC [{val}], {info['seconds']} s")


def preflight_figures(out: Path) -> tuple[list[str], str]:
    try:
        lines = (out / "preflight.txt").read_text().splitlines()
    except OSError:
        return [], "no preflight.txt"
    keep = [ln for ln in lines if ln.startswith(("smoke_check: ok", "smoke_check: FAIL"))]
    return keep, " | ".join(ln.removeprefix("smoke_check: ") for ln in keep)[:400] or "no lines"


def summary(out: Path, steps_tsv: Path) -> int:
    steps = []
    for line in steps_tsv.read_text().splitlines():
        name, rc, seconds, limit = line.split("\t")
        steps.append({"step": name, "rc": int(rc), "seconds": int(seconds), "limit_s": int(limit),
                      "timed_out": rc in ("124", "137"), "skipped": rc == "-1"})
    try:
        log_text = (out / "gpu_check.log").read_text(errors="replace")
    except OSError:
        log_text = ""
    env_info = read_json(out / "env.json") or {}
    figures = {"preflight": preflight_figures(out), "ddp": ddp_figures(out),
               "parity": parity_figures(out), "score": score_figures(out),
               "train": train_figures(out, log_text)}
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": env_info.get("gpu", "cpu (dry run)" if env_info.get("dry_run") else "?"),
              "bf16_matmul_8192_tflops": env_info.get("bf16_matmul_8192_tflops"),
              "lock_differs": env_info.get("lock_differs"), "ffmpeg": env_info.get("ffmpeg"),
              "steps": steps, "figures": {k: v[0] for k, v in figures.items()}}
    (out / "summary.json").write_text(json.dumps(result, indent=1) + "\n")
    dry = " (DRY RUN: checks the plumbing, no figure is a measurement)" \
        if env_info.get("dry_run") else ""
    print(f"\nversions differing from requirements.lock: "
          f"{env_info.get('lock_differs', '?') or 'none'}; ffmpeg {env_info.get('ffmpeg', '?')}"
          f" (missing encoders: {env_info.get('ffmpeg_missing_encoders', '?')})")
    print(f"gpu_check summary: {result['machine']}, bf16 matmul "
          f"{result['bf16_matmul_8192_tflops']} TFLOP/s, {result['date']}{dry}")
    print(f"{'step':<9} {'rc':>4} {'s':>5} {'limit':>5}  figures")
    for s in steps:
        rc = "skip" if s["skipped"] else ("TIME" if s["timed_out"] else str(s["rc"]))
        note = figures.get(s["step"], (None, ""))[1]
        print(f"{s['step']:<9} {rc:>4} {s['seconds']:>5} {s['limit_s']:>5}  {note}")
    return 0 if steps and all(s["rc"] == 0 for s in steps) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["env"] and len(argv) in (2, 3):
        return env(Path(argv[1]), "--dry-run" in argv[2:])
    if argv[:1] == ["summary"] and len(argv) == 3:
        return summary(Path(argv[1]), Path(argv[2]))
    if argv[:1] == ["ddp"] and len(argv) in (3, 4):
        return ddp(Path(argv[1]), Path(argv[2]), "--dry-run" in argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
