"""One engine, one process: time it on the bench's batches, write the figures as JSON.

    python scripts/bench_engine_worker.py ENGINE DIR OUT.json [--threads N] [--gate]

Run by scripts/bench_cpu_inference.py --engines (which writes DIR: batches.npz, gate.npz,
calib.npz, the exported models); each engine's interpreter may be another venv's (OpenVINO's),
so this file imports numpy and the engine only, never torch (asserted, except for `eager`) and
never hearsay (except for `eager`, which needs the Detector). ENGINE is one of ENGINES.
`--gate` also runs the gate clips one at a time (logits for the int8 gate and parity).
OUT: {"engine", "load_s", "seconds" (one timed pass over every batch, after one warm-up pass),
"logits" (timed batches, flat), "gate_logits" | null, "torch_loaded"}.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ENGINES = ("eager", "ort_fp32", "ort_int8", "ort_int8_layers", "ort_int8_two_digit",
           "ort_int8_one_digit", "ort_int8_posconv", "ortov_fp32", "ov_fp32", "ov_bf16",
           "ov_int8", "ov_int8_quantize")
# the int8 graphs bench_cpu_inference.py writes beside the export, timed whether or not their
# gate holds (the gate is reported beside the time): ENGINE -> file in DIR
RECIPE_FILES = {"ort_int8_layers": "int8_layers.onnx",  # the layers' MatMuls only
                "ort_int8_two_digit": "int8_two_digit.onnx",  # row-wise, two digits, no bundle
                "ort_int8_one_digit": "int8_one_digit.onnx",  # the export's second recipe
                "ort_int8_posconv": "int8_posconv.onnx"}  # its first: + the positional conv


def threads_allowed() -> int:
    return len(os.sched_getaffinity(0))


def ort_runner(path: Path, threads: int, provider: str = "CPUExecutionProvider"):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    if provider == "OpenVINOExecutionProvider":
        providers = [(provider, {"device_type": "CPU", "precision": "FP32",
                                 "num_of_threads": str(threads)})]
    else:
        providers = [provider]
    sess = ort.InferenceSession(str(path), opts, providers=providers)

    def run(x, m):
        return sess.run(["logits"], {"input_values": x, "attention_mask": m})[0].reshape(-1)
    return run, sess.get_providers()


def ov_runner(path: Path, threads: int, precision: str):
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": precision,
                                                     "INFERENCE_NUM_THREADS": threads,
                                                     "PERFORMANCE_HINT": "LATENCY"})
    req = compiled.create_infer_request()

    def run(x, m):
        out = req.infer({"input_values": x, "attention_mask": m})
        return np.asarray(next(iter(out.values()))).reshape(-1).astype(np.float32)
    got = compiled.get_property("INFERENCE_PRECISION_HINT")  # what the plugin actually chose
    return run, [f"openvino {ov.__version__} CPU asked {precision}, runs {got}"]


def eager_runner(ckpt: Path, threads: int):
    import torch

    from hearsay.detector.model import load_detector

    torch.set_num_threads(threads)
    model, _ = load_detector(ckpt)
    model = model.eval()

    def run(x, m):
        with torch.inference_mode():
            return model(torch.from_numpy(x), torch.from_numpy(m)).numpy().reshape(-1)
    return run, [f"torch {torch.__version__}"]


def ov_quantize(d: Path) -> None:
    """NNCF post-training int8 of the plain export, calibrated on calib.npz -> ov_int8.xml."""
    import nncf
    import openvino as ov

    calib = np.load(d / "calib.npz")
    items = [{"input_values": calib[k][None, :],
              "attention_mask": np.ones((1, len(calib[k])), np.int64)} for k in calib.files]
    model = ov.Core().read_model(str(d / "plain.onnx"))
    q = nncf.quantize(model, nncf.Dataset(items), model_type=nncf.ModelType.TRANSFORMER,
                      subset_size=len(items))
    ov.save_model(q, str(d / "ov_int8.xml"))


def build(engine: str, d: Path, threads: int):
    if engine == "eager":
        return eager_runner(d / "ckpt", threads)
    if engine in ("ort_fp32", "ort_int8"):
        name = "model.onnx" if engine == "ort_fp32" else "model.int8.onnx"
        return ort_runner(d / "export" / name, threads)
    if engine in RECIPE_FILES:
        return ort_runner(d / RECIPE_FILES[engine], threads)
    if engine == "ortov_fp32":
        return ort_runner(d / "plain.onnx", threads, "OpenVINOExecutionProvider")
    if engine in ("ov_fp32", "ov_bf16"):
        return ov_runner(d / "plain.onnx", threads, engine[3:].replace("fp", "f"))
    if engine == "ov_int8":
        return ov_runner(d / "ov_int8.xml", threads, "f32")
    raise SystemExit(f"bench_engine_worker: engine {engine!r} unknown (one of {ENGINES})")


def main(argv: list[str]) -> int:
    engine, d, out = argv[0], Path(argv[1]), Path(argv[2])
    threads = int(argv[argv.index("--threads") + 1]) if "--threads" in argv else 0
    threads = threads or threads_allowed()
    if engine == "ov_int8_quantize":
        t0 = time.perf_counter()
        ov_quantize(d)
        out.write_text(json.dumps({"engine": engine, "seconds": time.perf_counter() - t0}))
        return 0
    t0 = time.perf_counter()
    run, providers = build(engine, d, threads)
    load_s = time.perf_counter() - t0
    data = np.load(d / "batches.npz")
    batches = [(data[f"x{i}"], data[f"m{i}"]) for i in range(len(data.files) // 2)]
    logits = np.concatenate([run(x, m) for x, m in batches])  # warm-up pass + the logits
    t0 = time.perf_counter()
    for x, m in batches:
        run(x, m)
    seconds = time.perf_counter() - t0
    gate = None
    if "--gate" in argv:
        g = np.load(d / "gate.npz")
        gate = [float(run(g[k][None, :], np.ones((1, len(g[k])), np.int64))[0])
                for k in sorted(g.files, key=lambda k: int(k[1:]))]
    if engine != "eager":
        assert "torch" not in sys.modules, "torch was loaded by a deploy-side engine"
    out.write_text(json.dumps({"engine": engine, "providers": providers, "threads": threads,
                               "load_s": load_s, "seconds": seconds,
                               "logits": logits.tolist(), "gate_logits": gate,
                               "torch_loaded": "torch" in sys.modules}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
