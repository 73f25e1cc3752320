"""hearsay.train.records and the loop around it: the stream records off the training thread,
a loop that never waits for the device, and the audit that counts CUDA synchronisations."""

from __future__ import annotations

import threading

import numpy as np
import torch
from train_world import smoke

from hearsay import train as tr
from hearsay.train import rates
from hearsay.train.records import StreamRecords
from hearsay.train.step import check_pending


def _batch(seed: int, b: int = 3, n: int = 1600):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, n)).astype(np.float32) * 0.1
    x[:, :200] = 0  # leading silence to find
    lengths = np.array([n, n * 3 // 4, n // 2], dtype=np.int32)[:b]
    return torch.from_numpy(x), {"lengths": torch.from_numpy(lengths),
                                 "sources": [f"s{i}" for i in range(b)],
                                 "label_names": ["bonafide", "spoof", "spoof"][:b]}


def test_records_are_the_inline_ones_made_on_another_thread(monkeypatch):
    threads = []
    real = rates.stream_record

    def spy(*a, **k):
        threads.append(threading.current_thread())
        return real(*a, **k)

    monkeypatch.setattr(rates, "stream_record", spy)
    recs = StreamRecords(cap=5, records=[], wait=True)
    want = []
    for seed in range(3):
        iv, batch = _batch(seed)
        recs.offer(iv, batch)
        want += [real(s, lab, iv[i].numpy(), int(batch["lengths"][i]))
                 for i, (s, lab) in enumerate(zip(batch["sources"], batch["label_names"],
                                                  strict=True))]
    recs.flush()
    recs.close()
    assert recs.records == want[:5]  # in order, capped
    assert threads and threading.main_thread() not in threads


def test_a_thread_behind_skips_a_device_batch_instead_of_blocking(monkeypatch):
    gate = threading.Event()
    real = rates.stream_record
    monkeypatch.setattr(rates, "stream_record", lambda *a, **k: (gate.wait(5), real(*a, **k))[1])
    recs = StreamRecords(cap=100, records=[], wait=False, depth=1)
    for seed in range(4):  # 1st: taken by the (stuck) thread, 2nd: queued, then full
        recs.offer(*_batch(seed))
    assert recs.skipped >= 2 and not gate.is_set()  # returned without waiting
    gate.set()
    recs.flush()
    recs.close()
    assert len(recs.records) == 3 * (4 - recs.skipped)


def test_the_loop_reads_only_landed_steps_unless_told_to_wait():
    class Pending:  # a CUDA event that has not fired yet
        def __init__(self):
            self.fired = False

        def query(self):
            return self.fired

        def synchronize(self):
            self.fired = True

    ev = Pending()
    pending = [(torch.tensor([0.0, 0.5, 1.0]), None, 0, 1),
               (torch.tensor([0.0, 0.4, 1.0]), ev, 1, 1)]
    losses = []
    check_pending(pending, losses)
    assert losses == [0.5] and len(pending) == 1 and not ev.fired  # no wait on the device
    check_pending(pending, losses, wait=True)
    assert losses == [0.5, 0.4] and not pending


def test_no_stream_record_on_the_training_thread(bundle_dir, tmp_path, monkeypatch):
    """A device-augmented CPU run: every record is made, none on the training thread."""
    on_main = []
    real = rates.stream_record

    def spy(*a, **k):
        on_main.append(threading.current_thread() is threading.main_thread())
        return real(*a, **k)

    monkeypatch.setattr(rates, "stream_record", spy)
    meta = tr.run(smoke(epochs=1, batches_per_epoch=3), bundle_dir, tmp_path / "run")
    assert meta["steps"] == 3 and len(on_main) == 3 * 8 and not any(on_main)
    assert meta["stream_records_skipped_batches"] == 0


def test_the_audit_counts_a_cuda_synchronisation_on_the_training_thread():
    from device_audit import DeviceAudit

    with DeviceAudit() as audit:
        audit.counting = True
        torch.cuda.Event().synchronize()  # never recorded: returns at once, even without a GPU
        t = threading.Thread(target=lambda: torch.cuda.Event().synchronize())
        t.start()
        t.join()
    assert audit.counts["sync"] == 1 and audit.counts["sync_off_main"] == 1
    assert torch.cuda.Event.synchronize.__name__ == "synchronize"  # restored
