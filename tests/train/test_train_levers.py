"""The trainer's speed levers (hearsay.train.levers): their switches judged in the config, the
packed trainer's loss curve equal to the padded one, and the compiled graphs bounded by the
batch shapes (static shapes: what CUDA graphs need), counted on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hearsay import train as tr
from hearsay.detector import packing
from hearsay.detector.model import Detector, ModelConfig
from hearsay.train import config as tcfg
from hearsay.train import levers, step
from hearsay.train.errors import ConfigError


def resolve(**train):
    return tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={"train": train})


def test_every_lever_is_off_by_default():
    tc = tcfg.TrainConfig()
    assert (tc.pack, tc.mask_free, tc.cuda_graphs, tc.fp8) == ("off", False, False, False)


@pytest.mark.parametrize("train, says", [
    ({"pack": "varlen"}, "pack='varlen': use one of off, sdpa, flex"),
    ({"cuda_graphs": True, "compile": False}, "cuda_graphs=true needs compile=true"),
])
def test_a_lever_the_config_cannot_honour_is_refused_before_any_work(train, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        resolve(**train)


def test_forward_args_pack_or_go_mask_free_only_when_every_clip_fills_the_batch():
    mc = ModelConfig.tiny()
    full, short = np.array([8000, 8000]), np.array([8000, 4000])
    assert levers.forward_args(tcfg.TrainConfig(), full, 8000, mc, "cpu") == {}
    free = tcfg.TrainConfig(mask_free=True)
    assert levers.forward_args(free, full, 8000, mc, "cpu") == {"mask_free": True}
    assert levers.forward_args(free, short, 8000, mc, "cpu") == {}
    packed = levers.forward_args(tcfg.TrainConfig(pack="sdpa"), short, 8000, mc, "cpu")
    assert isinstance(packed["packed"], packing.Packed)


def test_the_packed_trainer_follows_the_padded_loss_curve(demo_bundle, tmp_path):
    """The same steps, draws and weights: only the layers' layout differs (fp32, CPU)."""
    fed = {"off": [], "sdpa": []}  # the packing kind of every training forward

    def hook(pack):
        def record(det):
            forward = det.forward

            def wrapped(iv, am, packed=None, mask_free=False):
                if det.training:
                    fed[pack].append(None if packed is None else packed.kind)
                return forward(iv, am, packed=packed, mask_free=mask_free)

            det.forward = wrapped
        return record

    metas = {pack: tr.run(resolve(pack=pack, max_crop_s=2.0), demo_bundle.root,
                          tmp_path / pack, model_hook=hook(pack)) for pack in ("off", "sdpa")}
    padded, packed = (metas[p]["history"]["loss"] for p in ("off", "sdpa"))
    assert len(padded) == len(packed) >= 4
    np.testing.assert_allclose(packed, padded, rtol=1e-4, atol=1e-5)
    assert set(fed["off"]) == {None} and set(fed["sdpa"]) == {"sdpa"}


def test_compile_forward_asks_for_cuda_graphs_only_when_switched_on(monkeypatch):
    seen = []
    monkeypatch.setattr(step, "compile_blocker", lambda: None)
    monkeypatch.setattr(torch, "compile", lambda model, **kw: seen.append(kw) or model)
    step.compile_forward(torch.nn.Linear(1, 1))
    step.compile_forward(torch.nn.Linear(1, 1), cuda_graphs=True)
    assert [kw["mode"] for kw in seen] == [None, "reduce-overhead"]
    assert all(kw["dynamic"] is False for kw in seen)


def graphs_for(shapes: list[tuple[int, list[int]]], pack: str = "off") -> list[int]:
    """Dynamo's compiled frames after each pass over `shapes` ((T samples, clip lengths)),
    the Detector in training mode compiled as the trainer does (static shapes)."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny()).train()
    det.generator = torch.Generator().manual_seed(1)
    counter = CompileCounter()
    fwd = torch.compile(det, dynamic=False, backend=counter)
    tc = tcfg.TrainConfig(pack=pack)
    counts = []
    for _ in range(2):
        for n, lengths in shapes:
            x = torch.randn(len(lengths), n)
            mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).long()
            fwd(x, mask, **levers.forward_args(tc, np.array(lengths), n, det.cfg, "cpu"))
        counts.append(counter.frame_count)
    torch._dynamo.reset()
    return counts


def test_compiled_graphs_are_one_set_per_bucket_shape_and_none_on_the_second_pass():
    """Three batch shapes (two buckets, and one batch size twice with other clip lengths):
    the second pass compiles nothing (static: every shape replays its graphs)."""
    one = graphs_for([(8000, [8000, 4000])])[0]  # graphs per shape (SpecAugment's draw
    #                                              breaks the graph: eager in between)
    first, second = graphs_for([(8000, [8000, 4000]), (16000, [16000, 800]),
                                (8000, [3000, 8000])])
    assert first == second == 2 * one


def test_packed_rows_rounded_keep_the_compiled_graphs_per_bucket_bounded():
    """Packed: batches of one (B, T) whose clips fill 2 rows or 1 round to the same
    ROW_MULTIPLE rows, so one set of graphs serves them all."""
    one = graphs_for([(8000, [8000, 8000])], pack="sdpa")[0]
    first, second = graphs_for([(8000, [8000, 8000]), (8000, [4000, 3000]),
                                (8000, [8000, 2000])], pack="sdpa")
    assert first == second == one
