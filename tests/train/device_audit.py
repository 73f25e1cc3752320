"""A CPU stand-in for a GPU profiler: which tensors would live on the device, which would wait.

On a CPU run every tensor is a host tensor, so neither a collective handed a host tensor (NCCL
refuses it) nor a blocking device<->host copy can be seen directly. `DeviceAudit` (a torch
function mode) tracks where each tensor *would* be on a GPU run and tallies the conversions:

- host: made by a factory without `device=` (torch.tensor, torch.zeros, torch.from_numpy, ...),
  by `.cpu()`, or computed from host tensors only; everything else (parameters, `.to(device)`,
  factories with `device=`, results of device tensors) is on the device.
- d2h: a blocking device->host read of a device tensor: .item(), .tolist(), .cpu(), .numpy(),
  bool()/int()/float(), nonzero / masked_select / unique, boolean-mask indexing.
- h2d: a blocking host->device copy: .to(device) or .copy_() of a host tensor without
  non_blocking=True, or torch.tensor(data, device=...) (a pageable copy of Python data).
- collectives (torch.distributed.*) handed a host tensor raise `HostTensorInCollective`.
- sync: a CUDA synchronisation on the main thread (torch.cuda.synchronize, Event.synchronize,
  Event.wait, Stream.synchronize): the training loop waiting for the device. One on another
  thread is sync_off_main (hearsay.train.records' thread waits so that the loop need not). A
  CPU run makes no CUDA event, so only a GPU run can show a non-zero count; the patch itself
  is tested on the CPU (an Event never recorded synchronises at once).

    with DeviceAudit() as audit:
        ...                       # train
    audit.counts                  # Counter({"d2h": ..., "h2d": ..., "sync": ...}) while counting
"""

from __future__ import annotations

import threading
from collections import Counter

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

FACTORIES = {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "rand", "randn",
             "randint", "linspace", "zeros_like", "ones_like", "empty_like", "full_like",
             "rand_like", "randn_like", "scalar_tensor"}
D2H = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__",
       "nonzero", "masked_select", "unique", "argwhere", "nonzero_static"}
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce",
               "reduce_scatter_tensor", "gather", "scatter", "all_to_all_single")
INPLACE = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__"}
# (owner, attribute) of the CUDA calls that make the host wait for the device
SYNCS = ((torch.cuda, "synchronize"), (torch.cuda.Event, "synchronize"),
         (torch.cuda.Event, "wait"), (torch.cuda.Stream, "synchronize"))
HOST = "_audit_host"


class HostTensorInCollective(AssertionError):
    """A torch.distributed collective got a tensor that a GPU run would hold on the host."""


def is_host(t: torch.Tensor) -> bool:
    return getattr(t, HOST, False)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _tag(out, host: bool) -> None:
    for t in _tensors(out):
        try:
            setattr(t, HOST, host)
        except (AttributeError, RuntimeError):
            pass


class DeviceAudit(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()
        self.where: Counter = Counter()  # (kind, op) -> calls, to say what to fix
        self.counting = False
        self._saved: dict = {}

    def count(self, kind: str, op: str) -> None:
        if self.counting:
            self.counts[kind] += 1
            self.where[(kind, op)] += 1

    def __enter__(self):
        for name in COLLECTIVES:
            self._saved[name] = getattr(dist, name)
            setattr(dist, name, self._checked(name, self._saved[name]))
        self._saved["from_numpy"] = torch.from_numpy

        def from_numpy(a):
            t = self._saved["from_numpy"](a)
            _tag(t, True)
            return t

        torch.from_numpy = from_numpy
        self._syncs = [(owner, attr, getattr(owner, attr)) for owner, attr in SYNCS]
        for owner, attr, fn in self._syncs:
            setattr(owner, attr, self._counted_sync(f"{getattr(owner, '__name__', owner)}."
                                                    f"{attr}", fn))
        return super().__enter__()

    def _counted_sync(self, name, fn):
        def sync(*args, **kwargs):  # a helper thread's wait does not hold up the loop
            on_main = threading.current_thread() is threading.main_thread()
            self.count("sync" if on_main else "sync_off_main", name)
            return fn(*args, **kwargs)

        return sync

    def __exit__(self, *exc):
        for owner, attr, fn in self._syncs:
            setattr(owner, attr, fn)
        torch.from_numpy = self._saved.pop("from_numpy")
        for name, fn in self._saved.items():
            setattr(dist, name, fn)
        self._saved.clear()
        return super().__exit__(*exc)

    def _checked(self, name, fn):
        def collective(*args, **kwargs):
            host = [t for t in _tensors((args, kwargs)) if is_host(t)]
            if host:
                raise HostTensorInCollective(
                    f"torch.distributed.{name} got a tensor that is not on the model's device "
                    f"(shape {tuple(host[0].shape)}): NCCL refuses it; create it with "
                    "device=... or move it with .to(device)")
            return fn(*args, **kwargs)

        return collective

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        ins = list(_tensors((args, kwargs)))
        any_dev = any(not is_host(t) for t in ins)
        first_host = bool(ins) and is_host(ins[0])
        if name in D2H and ins and not is_host(ins[0]):
            self.count("d2h", name)
        elif name in ("__getitem__", "__setitem__", "index_put_", "masked_scatter_") and any(
                t.dtype == torch.bool and not is_host(t) for t in ins[1:]):
            self.count("d2h", f"{name}[bool mask]")
        elif name == "copy_" and first_host and len(args) > 1 and \
                isinstance(args[1], torch.Tensor) and not is_host(args[1]) and \
                not (kwargs.get("non_blocking") or (len(args) > 2 and args[2])):
            self.count("d2h", "copy_")
        elif name == "where" and len(args) == 1:
            self.count("d2h", "where(cond)")
        if name == "to" and first_host and _has_device(args[1:], kwargs) and \
                not kwargs.get("non_blocking", False):
            self.count("h2d", "to")
        elif name == "copy_" and not first_host and len(args) > 1 and \
                isinstance(args[1], torch.Tensor) and is_host(args[1]) and \
                not (kwargs.get("non_blocking") or (len(args) > 2 and args[2])):
            self.count("h2d", "copy_")
        elif name in ("tensor", "as_tensor") and kwargs.get("device") is not None and \
                not (args and isinstance(args[0], torch.Tensor) and not is_host(args[0])):
            self.count("h2d", name)
        out = func(*args, **kwargs)
        if name == "to" and first_host and out is args[0] and _has_device(args[1:], kwargs):
            out = out.clone()  # on a GPU this is a new tensor: the host original stays host
        if name.endswith("_") or name in INPLACE:
            return out  # in place: the tensor stays where it is (a GPU would refuse a mix)
        if name in FACTORIES and not name.endswith("_like"):
            host = kwargs.get("device") is None
        elif name in ("cpu", "numpy", "pin_memory"):
            host = True
        elif name == "to" and _has_device(args[1:], kwargs):
            host = False
        else:
            host = bool(ins) and not any_dev
        _tag(out, host)
        return out


def _has_device(args, kwargs) -> bool:
    if kwargs.get("device") is not None:
        return True
    return any(isinstance(a, (torch.device, str)) or
               (isinstance(a, torch.Tensor)) for a in args)
