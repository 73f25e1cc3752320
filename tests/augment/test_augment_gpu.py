"""hearsay.train.augment_gpu: the batched torch rendering agrees with the numpy reference."""


import numpy as np
import pytest
from augment_signals import speechlike

from hearsay.sound import audio, augment, example

SR = audio.SAMPLE_RATE


def test_torch_batch_path_agrees_with_the_numpy_reference():
    torch = pytest.importorskip("torch")
    from hearsay.train import augment_gpu

    names = list(augment.WAVE_TYPES) * 2 + ["none", "codec:mp3", "trim_jitter"]
    lengths = [int(s * SR) for s in np.linspace(0.3, 2.5, len(names))]
    n_samples = 2 * SR
    crops_, n_valids, params, reference = [], [], [], []
    for i, (name, length) in enumerate(zip(names, lengths, strict=True)):
        x = speechlike(length / SR, np.random.default_rng(100 + i))
        ref, n_ref = example.training_example(x, name, n_samples, np.random.default_rng(i))
        crop, n_valid, p = example.plan_example(x, name, n_samples, np.random.default_rng(i))
        assert n_valid == n_ref
        crops_.append(crop), n_valids.append(n_valid), params.append(p), reference.append(ref)
    values, mask = audio.pad_batch(crops_, n_valids)
    out = augment_gpu.train_batch(torch.from_numpy(values), torch.from_numpy(mask), names,
                                  params).numpy()
    for i, name in enumerate(names):
        np.testing.assert_allclose(out[i], reference[i], atol=5e-5, err_msg=name)
        assert np.all(out[i, n_valids[i]:] == 0)


def test_torch_finish_batch_equals_crops_finish():
    torch = pytest.importorskip("torch")
    from hearsay.train import augment_gpu

    rng = np.random.default_rng(30)
    waves = [speechlike(s, rng) for s in (0.004, 0.5, 1.0)]
    values, mask = audio.pad_batch(waves, [len(w) for w in waves])
    out = augment_gpu.finish_batch(torch.from_numpy(values), torch.from_numpy(mask)).numpy()
    for i, w in enumerate(waves):
        np.testing.assert_allclose(out[i, : len(w)], example.finish(w), atol=5e-5)


def test_torch_render_batch_leaves_the_padding_zero():
    torch = pytest.importorskip("torch")
    from hearsay.train import augment_gpu

    rng = np.random.default_rng(31)
    names = list(augment.WAVE_TYPES)
    planned = [example.plan_example(speechlike(0.5, rng), nm, SR, rng) for nm in names]
    values, mask = audio.pad_batch([p[0] for p in planned], [p[1] for p in planned])
    out = augment_gpu.render_batch(torch.from_numpy(values), torch.from_numpy(mask), names,
                                   [p[2] for p in planned]).numpy()
    assert np.all(out[mask == 0] == 0)
    assert not np.allclose(out, values)
