"""CPU inference throughput: PyTorch eager fp32 vs onnxruntime fp32 vs onnxruntime int8.

    .venv/bin/python scripts/bench_cpu_inference.py --engines eager,ort_fp32,ort_int8 \
        --calibration demo_out/bundle --rounds 3          # per-engine processes (below)

`--engines` times each engine in its own process (scripts/bench_engine_worker.py; torch is not
loaded in any but eager's), interleaved: every round runs each engine once, the order rotated
per round; per engine the median, min and max clips/s over the rounds and the median of the
per-round ratios to eager. The models are what `hearsay export onnx --calibration BUNDLE`
ships (fused fp32, int8 with the conv encoder row-wise or calibrated when its gate holds;
ort_int8_layers = that fp32 graph with only the layers' MatMuls int8, the recipe before the
convs; ort_int8_two_digit = the row-wise encoder with two weight digits and no mean
correction, the recipe without a bundle; ort_int8_posconv = the export's first recipe (one
digit, mean-corrected, and the positional conv static int8), ort_int8_one_digit = its second
(the same, the positional conv fp32), each made whether or not its gate holds, so a model on
which no recipe ships still has int8 times; each gated like the shipped one, to compare
inside one run, and timed whatever its gate says); OpenVINO's
engines (ov_fp32, ov_bf16, ov_int8 = NNCF post-training int8 on the same calibration clips,
ortov_fp32 = onnxruntime's OpenVINO EP) read the plain (unfused) export and run under the
interpreter `--python-openvino` / `--python-ort-openvino` names (a bench venv: they are not in
the project's lock). The GEMM peaks are measured before and after the rounds (best counts).

Without `--engines`, the older single-process bench:

    .venv/bin/python scripts/bench_cpu_inference.py                 # XLS-R-300M shape, 12 layers
    .venv/bin/python scripts/bench_cpu_inference.py --layers 2 --clips 4   # quick look

One run, the same 8 s clips for every engine, random init (speed and parity do not depend on the
weights' values). Prints clips/s, ratios to eager, achieved GFLOP/s against this machine's fp32
GEMM peak measured in the same run (torch.matmul, 2048^2, the same thread count) and against its
int8 GEMM peak (onnxruntime MatMulInteger u8 x s8, 2048^2), and the parity each engine holds: ORT
fp32 vs PyTorch max |delta logit| (gate 1e-4) and the int8 gate exactly as `hearsay export onnx`
applies it (export/quantize.py: QuantGate's 100 clips spread over the deploy range 0.5-8 s, seed
1, Spearman >= 0.995, decision agreement >= 99% at the median fp32 logit, max |dlogit| <= 0.05).
Run it three times and quote the median of each ratio: on a shared 2-core machine one run is noise.
Engines are timed interleaved (round robin, fastest round per batch counts), so a busy shared
machine slows them alike. Writes the figures as JSON with --json. Nothing here is a test:
record results in docs/BENCHMARKS.md ("CPU inference") with the command and date.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from hearsay.detector.model import Detector, ModelConfig
from hearsay.engines.cpu_engine import allowed_cpus, make_session, run_logits
from hearsay.export import probe
from hearsay.export.onnx_export import export_onnx
from hearsay.export.quantize import (
    QuantGate,
    gate_clips,
    gate_report,
    layer_matmuls,
    quantize_file,
    quantize_int8,
    write_recipe,
)
from hearsay.sound.audio import pad_batch
from hearsay.train import flops

WORKER = Path(__file__).with_name("bench_engine_worker.py")
FRONT = {"sample_rate": 16_000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def flops_per_clip(cfg: ModelConfig, samples: int) -> float:
    """FLOP of one forward on `samples` samples (hearsay.train.flops: every product, 2 per
    multiply-add: CNN, projection, positional conv, kept layers, pooling and head)."""
    return float(flops.clip_flops(cfg, samples)["forward"])


def gemm_peak(threads: int, n: int = 2048, reps: int = 5) -> float:
    """Best fp32 GEMM GFLOP/s of torch.matmul (n x n) at `threads` threads."""
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    torch.matmul(a, b)
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = max(best, 2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def int8_gemm_peak(threads: int, n: int = 2048, reps: int = 5) -> float:
    """Best int8 GEMM GOP/s of onnxruntime's MatMulInteger (uint8 x int8 -> int32, n x n, the
    kernel the int8 model's quantised MatMuls run on) at `threads` intra-op threads."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.integers(-128, 128, (n, n), dtype=np.int8), "b")
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info(
        "a", TensorProto.UINT8, [n, n])], [helper.make_tensor_value_info(
        "y", TensorProto.INT32, [n, n])], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    a = {"a": rng.integers(0, 256, (n, n), dtype=np.uint8)}
    sess.run(None, a)
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, a)
        best = max(best, 2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def interleaved(runs: dict, batches, rounds: int) -> dict:
    """Each round runs every engine over every batch in turn (after one warm-up pass each), so a
    noisy neighbour hits all engines alike; per batch the fastest round counts.
    Returns {engine: (seconds for all batches, logits (N,))}."""
    best = {name: [float("inf")] * len(batches) for name in runs}
    logits = {}
    for name, run in runs.items():
        logits[name] = np.concatenate([run(b) for b in batches])  # warm-up + the logits
    for _ in range(rounds):
        for name, run in runs.items():
            for i, b in enumerate(batches):
                t0 = time.perf_counter()
                run(b)
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
    return {name: (sum(best[name]), logits[name]) for name in runs}


def worker_python(engine: str, args) -> str:
    if engine.startswith("ov_"):
        return args.python_openvino or sys.executable
    if engine.startswith("ortov"):
        return args.python_ort_openvino or sys.executable
    return sys.executable


def run_worker(engine: str, d: Path, args, threads: int, gate: bool) -> dict:
    out = d / f"{engine}.json"
    out.unlink(missing_ok=True)
    cmd = [worker_python(engine, args), str(WORKER), engine, str(d), str(out),
           "--threads", str(threads)] + (["--gate"] if gate else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.worker_timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.worker_timeout} s"}
    if proc.returncode or not out.exists():
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    return json.loads(out.read_text())


def install_mb(python: str, module: str) -> float | None:
    """Size of an installed package's folder (MB): what an image would carry for it."""
    try:
        where = subprocess.run([python, "-c", f"import {module}, os; print(os.path.dirname("
                                f"{module}.__file__))"], capture_output=True, text=True,
                               timeout=120, check=True).stdout.strip()
        du = subprocess.run(["du", "-sk", where], capture_output=True, text=True, check=True)
        return round(int(du.stdout.split()[0]) / 1024, 1)
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


def per_process(args, threads: int) -> dict:
    """The `--engines` bench (module docstring): returns the figures. It works in `--keep-work`
    when given, else in a temp folder removed at the end, failed or not: on the XLS-R shape the
    checkpoint, the exports and the int8 copies are about 2 GB a run."""
    if args.keep_work is not None:
        args.keep_work.mkdir(parents=True, exist_ok=True)
        return measure_engines(args, threads, args.keep_work)
    d = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    try:
        return measure_engines(args, threads, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def measure_engines(args, threads: int, d: Path) -> dict:
    """per_process's work, in the folder `d`."""
    import dataclasses

    from hearsay.detector.model import save_detector
    from hearsay.export import quantize_conv
    from hearsay.export.onnx_export import ExportConfig, export_model

    engines = args.engines.split(",")
    torch.manual_seed(0)
    cfg = ModelConfig.tiny() if args.tiny else ModelConfig(
        init="random", keep_layers=args.layers, train_top=0, hidden_dropout=0.0,
        attention_dropout=0.0)
    model = Detector(cfg).eval()
    save_detector(model, d / "ckpt")
    clips = probe.synthetic_clips(np.random.default_rng(0), args.clips, 8.0, 8.0, FRONT)
    batches = [pad_batch(b, [len(w) for w in b]) for b in
               (clips[i : i + args.batch] for i in range(0, len(clips), args.batch))]
    np.savez(d / "batches.npz", **{f"{k}{i}": a for i, b in enumerate(batches)
                                   for k, a in zip("xm", b, strict=True)})
    gate = QuantGate(clips=args.gate_clips)
    t0 = time.perf_counter()
    report = export_model(model, d / "export", ExportConfig(
        gate=gate, calibration=None if args.calibration is None else str(args.calibration)))
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": threads,
                 "layers": args.layers, "clips": len(clips), "batch": args.batch,
                 "rounds": args.rounds, "loadavg_start": os.getloadavg(),
                 "export_s": round(time.perf_counter() - t0, 1),
                 "fusion": {k: v for k, v in (report["fusion"] or {}).items() if k != "parity_a"},
                 "parity_a_export": report["parity_a"]["max_abs_dlogit"],
                 "int8_export_gate": {k: v for k, v in (report["int8"] or {}).items()
                                      if k != "attempts"},
                 "int8_export_attempts": [{k: a.get(k) for k in (
                     "recipe", "spearman", "agreement", "max_abs_dlogit", "passed", "error")}
                     for a in (report["int8"] or {}).get("attempts", [])],
                 "versions": probe.versions(torch)}
    if "ort_int8" in engines and not (d / "export" / "model.int8.onnx").exists():
        engines.remove("ort_int8")  # nothing shipped to time: say so instead
        res["ort_int8"] = {"errors": ["not shipped: every int8 recipe failed the export's gate"]}
    export_onnx(model, d / "plain.onnx", "torchscript")
    # the export's gate clips and calibration clips, drawn exactly as quantize_int8 draws them
    rng, calib, real = np.random.default_rng(1), [], []
    if args.calibration is not None:
        calib, real = quantize_conv.bundle_clips(args.calibration, FRONT, gate.calibration_clips,
                                                 gate.clips, rng)
    res["int8_recipes"] = write_int8_recipes(d, engines, calib)
    top = max(0, gate.clips - len(real))
    waves = real + (gate_clips(dataclasses.replace(gate, clips=top), FRONT, rng) if top else [])
    np.savez(d / "gate.npz", **{f"g{i}": w for i, w in enumerate(waves)})
    np.savez(d / "calib.npz", **{f"c{i}": w for i, w in enumerate(calib or waves[:24])})
    if "ov_int8" in engines:
        res["ov_int8_quantize"] = run_worker("ov_int8_quantize", d, args, threads, False)
    gflop = flops_per_clip(cfg, int(np.mean([len(c) for c in clips])))
    peak, peak8 = gemm_peak(threads), int8_gemm_peak(threads)
    rounds: dict = {e: [] for e in engines}
    for r in range(args.rounds):
        for e in engines[r % len(engines):] + engines[: r % len(engines)]:
            rounds[e].append(run_worker(e, d, args, threads, gate=r == 0))
    peak, peak8 = max(peak, gemm_peak(threads)), max(peak8, int8_gemm_peak(threads))
    res.update(loadavg_end=os.getloadavg(), gflop_per_clip=round(gflop / 1e9, 1),
               gemm_peak_gflops=round(peak, 1), int8_gemm_peak_gops=round(peak8, 1))
    eager = [x.get("seconds") for x in rounds.get("eager", [])]
    first = {e: next((x for x in rs if "logits" in x), None) for e, rs in rounds.items()}
    ref = (first.get("ort_fp32") or {}).get("gate_logits")
    for e, rs in rounds.items():
        ok = [x for x in rs if "seconds" in x]
        if not rs:
            continue
        row: dict = {"errors": [x["error"] for x in rs if "error" in x]}
        if ok:
            cps = [len(clips) / x["seconds"] for x in ok]
            ratios = [eager[i] / x["seconds"] for i, x in enumerate(rs)
                      if "seconds" in x and i < len(eager) and eager[i]]
            row.update(clips_per_s=round(float(np.median(cps)), 3),
                       min=round(min(cps), 3), max=round(max(cps), 3),
                       x_eager=round(float(np.median(ratios)), 2) if ratios else None,
                       pct_of_fp32_peak=round(100 * np.median(cps) * gflop / 1e9 / peak, 1),
                       pct_of_int8_peak=round(100 * np.median(cps) * gflop / 1e9 / peak8, 1),
                       providers=ok[0].get("providers"), torch_loaded=ok[0]["torch_loaded"],
                       load_s=round(ok[0]["load_s"], 1))
            if first.get("eager") and first[e]:
                row["max_abs_dlogit_vs_eager"] = float(np.max(np.abs(
                    np.array(first[e]["logits"]) - np.array(first["eager"]["logits"]))))
            if ref and first[e] and first[e].get("gate_logits") and e != "ort_fp32":
                row["gate_vs_ort_fp32"] = gate_report(
                    np.array(ref), np.array(first[e]["gate_logits"]), gate)
        res[e] = row
    res["install_mb"] = {"onnxruntime": install_mb(sys.executable, "onnxruntime"),
                         "torch": install_mb(sys.executable, "torch")}
    if args.python_openvino:
        res["install_mb"]["openvino"] = install_mb(args.python_openvino, "openvino")
    if args.python_ort_openvino:
        res["install_mb"]["onnxruntime-openvino"] = install_mb(args.python_ort_openvino,
                                                               "onnxruntime")
    return res


def worker_recipe_files() -> dict[str, str]:
    """bench_engine_worker.py's RECIPE_FILES (engine -> the int8 graph's file it times), read
    from the worker so the two scripts name each file once."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_engine_worker", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)  # numpy only at import: no engine is loaded
    return dict(worker.RECIPE_FILES)


def write_int8_recipes(d: Path, engines: list[str], calib: list[np.ndarray]) -> dict:
    """Write the int8 graphs the `engines` time beside the export (bench_engine_worker.py's
    RECIPE_FILES), each from the shipped fp32 graph, whether or not its gate would hold: the
    worker's gate logits say that beside the time. Returns {engine: what was made}.

    ort_int8_posconv is the export's first recipe, ort_int8_one_digit its second (the same
    without the positional conv); both need `calib`, the bundle's calibration clips."""
    import onnx

    from hearsay.export import quantize_conv

    files = worker_recipe_files()  # engine -> its graph's file name in `d`
    if not set(files) & set(engines):
        return {}
    src, layers = d / "export" / "model.onnx", d / files["ort_int8_layers"]
    fp32 = onnx.load(str(src), load_external_data=False)
    nodes, convs = layer_matmuls(fp32), quantize_conv.encoder_convs(fp32)[1:]
    quantize_file(src, layers, nodes)  # every recipe starts from it
    made = {"ort_int8_layers": f"{len(nodes)} MatMuls"}
    if "ort_int8_two_digit" in engines:
        write_recipe(src, d / files["ort_int8_two_digit"], "rowwise", convs, nodes, [], layers)
        made["ort_int8_two_digit"] = f"+ {len(convs)} convs row-wise, two digits"
    if {"ort_int8_one_digit", "ort_int8_posconv"} & set(engines) and not calib:
        raise SystemExit("ort_int8_one_digit and ort_int8_posconv need --calibration BUNDLE")
    if "ort_int8_one_digit" in engines:
        write_recipe(src, d / files["ort_int8_one_digit"], "rowwise_mean", convs, nodes, calib,
                     layers)
        made["ort_int8_one_digit"] = f"+ {len(convs)} convs row-wise, one digit, mean-corrected"
    if "ort_int8_posconv" in engines:
        write_recipe(src, d / files["ort_int8_posconv"], "rowwise_mean_pos", convs, nodes, calib,
                     layers)
        q = onnx.load(str(d / files["ort_int8_posconv"]), load_external_data=False).graph.node
        made["ort_int8_posconv"] = (f"+ {len(convs)} convs row-wise, one digit, mean-corrected"
                                    f" + {sum(n.op_type == 'QLinearConv' for n in q)} "
                                    "QLinearConv (the positional conv)")
    return made


def add_fused(model, cfg: ModelConfig, tmp: Path, paths: dict, gates: dict) -> dict:
    """Export the fusable copy, fuse it both ways, quantise each; adds to `paths` and `gates`.
    int8 of the MultiHeadAttention graph is the shipped recipe unchanged (its q/k/v MatMuls
    stay); int8 of the Attention graph quantises the layers' remaining MatMuls (out, FFN in,
    FFN out) and the Attention nodes (QAttention: onnxruntime forces reduce_range weights)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from hearsay.export import fuse

    export_onnx(fuse.fusable_copy(model), tmp / "fusable.onnx", "torchscript")
    ops = {}
    for kind, multi_head in (("attn", False), ("mha", True)):
        paths[f"ort_fp32_{kind}"] = tmp / f"model.{kind}.onnx"
        ops[kind] = fuse.fuse_file(tmp / "fusable.onnx", paths[f"ort_fp32_{kind}"],
                                   cfg.num_heads, cfg.hidden_size, multi_head)
    # q/k/v MatMuls feeding a com.microsoft op defeat the quantiser's type inference: say float
    extra = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    for kind in ("mha", "attn"):
        g = onnx.load(str(paths[f"ort_fp32_{kind}"]))
        if kind == "mha":
            nodes, types = layer_matmuls(g), ["MatMul"]  # the shipped recipe's selection
        else:
            consts = {t.name for t in g.graph.initializer}
            matmuls = [n.name for n in g.graph.node
                       if n.op_type == "MatMul" and n.input[1] in consts]
            nodes = matmuls[1:-2] + fuse.attention_nodes(g)  # not projection, pooling, head
            types = ["MatMul", "Attention"]
        want = (6 if kind == "mha" else 4) * cfg.keep_layers
        ops[f"int8_{kind}_nodes"] = len(nodes)
        if len(nodes) != want:  # the fusion did not give the expected graph: say so, skip
            ops[f"int8_{kind}_skipped"] = f"{len(nodes)} nodes to quantise, expected {want}"
            continue
        paths[f"ort_int8_{kind}"] = tmp / f"model.int8.{kind}.onnx"
        quantize_dynamic(str(paths[f"ort_fp32_{kind}"]), str(paths[f"ort_int8_{kind}"]),
                         op_types_to_quantize=types, per_channel=True,
                         weight_type=QuantType.QInt8, nodes_to_quantize=nodes,
                         extra_options=extra)
        q = onnx.load(str(paths[f"ort_int8_{kind}"]), load_external_data=False).graph.node
        ops[f"int8_{kind}_quantised"] = sum(n.op_type in ("MatMulInteger", "QAttention")
                                            for n in q)
    return ops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12, help="kept transformer layers")
    ap.add_argument("--clips", type=int, default=8, help="8 s clips timed per engine")
    ap.add_argument("--batch", type=int, default=4, help="clips per forward")
    ap.add_argument("--threads", type=int, default=0, help="0 = CPUs allowed (affinity/cgroup)")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds (fastest counts)")
    ap.add_argument("--int8-preprocess", action="store_true",
                    help="also time int8 made after onnxruntime's quant_pre_process")
    ap.add_argument("--int8-every-matmul", action="store_true",
                    help="also time and gate the old recipe: every MatMul and the head quantised")
    ap.add_argument("--fused", action="store_true",
                    help="also time the attention-fused graphs (export/fuse.py): fp32 with "
                    "Attention (packed q/k/v) and with MultiHeadAttention, and int8 of each")
    ap.add_argument("--gate-clips", type=int, default=QuantGate.clips,
                    help="int8 gate clips (default: the export's 100; fewer = a weaker gate, "
                    "say so when quoting)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--engines", help="comma list of bench_engine_worker.py ENGINES: time each "
                    "in its own process, interleaved (see the docstring)")
    ap.add_argument("--calibration", type=Path, help="bundle whose clips calibrate int8")
    ap.add_argument("--python-openvino", help="interpreter with openvino + nncf (ov_* engines)")
    ap.add_argument("--python-ort-openvino",
                    help="interpreter with onnxruntime-openvino (ortov_fp32)")
    ap.add_argument("--tiny", action="store_true",
                    help="--engines on the tiny test config (checks the bench runs; no figure)")
    ap.add_argument("--keep-work", type=Path,
                    help="--engines: work in this folder and keep it (models, clips; about 2 GB "
                    "on the XLS-R shape); default: a temp folder removed at the end")
    ap.add_argument("--worker-timeout", type=int, default=900, help="s per engine process")
    args = ap.parse_args(argv)
    threads = args.threads or allowed_cpus()
    if args.engines:
        res = per_process(args, threads)
        print(json.dumps(res, indent=2))
        if args.json:
            args.json.write_text(json.dumps(res, indent=2) + "\n")
        return 0
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = ModelConfig(init="random", keep_layers=args.layers, train_top=0,
                      hidden_dropout=0.0, attention_dropout=0.0)
    model = Detector(cfg).eval()
    rng = np.random.default_rng(0)
    clips = probe.synthetic_clips(rng, args.clips, 8.0, 8.0, FRONT)
    batches = [pad_batch(b, [len(w) for w in b]) for b in
               (clips[i : i + args.batch] for i in range(0, len(clips), args.batch))]
    gflop = flops_per_clip(cfg, int(np.mean([len(c) for c in clips])))
    peak, peak8 = gemm_peak(threads), int8_gemm_peak(threads)
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": threads,
                 "layers": args.layers, "clips": len(clips), "batch": args.batch,
                 "clip_s": round(float(np.mean([len(c) for c in clips])) / 16_000, 3),
                 "gflop_per_clip": round(gflop / 1e9, 1), "gemm_peak_gflops": round(peak, 1),
                 "versions": probe.versions(torch)}

    def torch_run(batch):
        with torch.inference_mode():
            x, m = (torch.from_numpy(a) for a in batch)
            return model(x, m).numpy()

    runs = {"eager_fp32": torch_run}
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp:
        paths = {"ort_fp32": Path(tmp) / "model.onnx", "ort_int8": Path(tmp) / "model.int8.onnx",
                 "ort_int8_pre": Path(tmp) / "model.int8pre.onnx"}
        t0 = time.perf_counter()
        export_onnx(model, paths["ort_fp32"], "torchscript")
        res["export_s"] = round(time.perf_counter() - t0, 1)
        # what `hearsay export` ships, gated as it gates: same clips (seed = its seed 0 + 1)
        gate = QuantGate(clips=args.gate_clips)
        gates = {"ort_int8": quantize_int8(paths["ort_fp32"], paths["ort_int8"], gate, FRONT,
                                           np.random.default_rng(1))}
        if args.int8_preprocess:  # lever: ORT's quantisation pre-processing (shape inference +
            from onnxruntime.quantization.shape_inference import quant_pre_process  # fusions)

            pre = Path(tmp) / "model.pre.onnx"
            quant_pre_process(str(paths["ort_fp32"]), str(pre), skip_symbolic_shape=True)
            quantize_file(pre, paths["ort_int8_pre"])
        else:
            del paths["ort_int8_pre"]
        if args.int8_every_matmul:  # the old recipe, for comparison (node list None = all)
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic

            paths["ort_int8_every"] = Path(tmp) / "model.int8every.onnx"
            quantize_dynamic(str(paths["ort_fp32"]), str(paths["ort_int8_every"]),
                             op_types_to_quantize=["MatMul"], per_channel=True,
                             weight_type=QuantType.QInt8)
            res["int8_every_quantised"] = sum(n.op_type == "MatMulInteger" for n in
                                              onnx.load(str(paths["ort_int8_every"])).graph.node)
        if args.fused:
            res["fused_ops"] = add_fused(model, cfg, Path(tmp), paths, gates)
        for name, path in paths.items():
            def ort_run(batch, sess=make_session(path, threads)):
                return sess.run(["logits"], {"input_values": batch[0],
                                             "attention_mask": batch[1]})[0].reshape(-1)

            runs[name] = ort_run
        engines = interleaved(runs, batches, args.rounds)
        gate_waves = gate_clips(gate, FRONT, np.random.default_rng(1))  # quantize_int8's clips
        g32 = run_logits(make_session(paths["ort_fp32"], threads), gate_waves)
        for name in [n for n in paths if n.startswith("ort_int8") and n not in gates]:
            gates[name] = gate_report(
                g32, run_logits(make_session(paths[name], threads), gate_waves), gate)
        for name, report in gates.items():
            res[f"{name}_gate"] = report
    peak = max(peak, gemm_peak(threads))  # best of before and after: contention only lowers it
    peak8 = max(peak8, int8_gemm_peak(threads))
    res["gemm_peak_gflops"], res["int8_gemm_peak_gops"] = round(peak, 1), round(peak8, 1)
    eager = engines["eager_fp32"][1]
    base = len(clips) / engines["eager_fp32"][0]
    for name, (secs, logits) in engines.items():
        cps = len(clips) / secs
        res[name] = {"clips_per_s": round(cps, 3), "x_eager": round(cps / base, 2),
                     "gflops": round(cps * gflop / 1e9, 1),
                     "pct_of_peak": round(100 * cps * gflop / 1e9 / peak, 1),
                     # the same work against the int8 GEMM peak (what int8 engines aim at)
                     "pct_of_int8_peak": round(100 * cps * gflop / 1e9 / peak8, 1),
                     "max_abs_dlogit_vs_eager": float(np.max(np.abs(logits - eager)))}
    for name in [n for n in res if n.startswith("ort_fp32")]:
        res[name]["parity_a_passed"] = res[name]["max_abs_dlogit_vs_eager"] <= 1e-4
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
