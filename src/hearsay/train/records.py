"""The realised-stream records of `hearsay train`'s device-augmented path, computed off the
training loop's thread, so the device never idles on this host work.

    recs = StreamRecords(cap=20000, records=[], wait=False)   # wait: block when behind (CPU)
    recs.offer(iv, batch)      # main thread: start the device->host copy, hand it on; no wait
    recs.flush()               # epoch end / readout: what was offered is in recs.records
    recs.close()

Each offered micro-batch is copied into a pinned host buffer (non-blocking) with a CUDA event
behind it; one background thread waits on the event and computes `rates.stream_record` of
every clip (trim_silence + peak over the valid samples: 0.2-0.9 s per micro-batch of 64 clips at
4-14 s crops on one core, which used to stall the step). The thread takes batches in order, so
`records` is the same list as the inline computation made. At most `depth` batches wait: on CUDA
(`wait=False`) a batch offered while the thread is that far behind is not recorded (counted in
`skipped`; records come from later batches instead); on the CPU (`wait=True`) the offer blocks
(there is no device to keep busy, and the records stay a function of the seed).
"""

from __future__ import annotations

import queue
import threading

import torch

from hearsay.train import rates


class StreamRecords:
    def __init__(self, cap: int, records: list[dict], wait: bool, depth: int = 2):
        self.cap = cap  # clips kept at most (TrainConfig.stream_records_max)
        self.records = records  # appended by the thread only; read after flush()
        self.offered = len(records)  # clips promised (records + in flight): the main thread's
        self.wait = wait
        self.skipped = 0  # batches not recorded because the thread was `depth` behind
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def wants(self) -> bool:
        return self.offered < self.cap

    def offer(self, iv: torch.Tensor, batch: dict) -> None:
        """(B, T) realised batch on the device + its loader batch: queue its records."""
        if not self.wants():
            return
        if not self.wait and self._q.full():
            self.skipped += 1
            return
        cuda = iv.device.type == "cuda"
        host = torch.empty(iv.shape, dtype=torch.float32, pin_memory=cuda)
        host.copy_(iv, non_blocking=True)
        event = None
        if cuda:
            event = torch.cuda.Event()
            event.record()
        self.offered += len(batch["sources"])
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stream-records", daemon=True)
            self._thread.start()
        self._q.put((host, event, batch["lengths"].numpy(), batch["sources"],
                     batch["label_names"]))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                self._one(*item)
            except BaseException as err:  # noqa: BLE001 - re-raised on the main thread
                self._error = err
            finally:
                self._q.task_done()

    def _one(self, host: torch.Tensor, event, n_valid, sources: list, labels: list) -> None:
        if event is not None:
            event.synchronize()  # this thread waits, the training loop does not
        values = host.numpy()  # (B, T) float32, pinned
        for i, (s, lab) in enumerate(zip(sources, labels, strict=True)):
            if len(self.records) < self.cap:
                self.records.append(rates.stream_record(s, lab, values[i], int(n_valid[i])))

    def flush(self) -> None:
        """Wait until every offered batch is in `records` (epoch end, readout, abort)."""
        if self._thread is not None:
            self._q.join()
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"stream records: {err}") from err

    def close(self) -> None:
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None
