"""A fake vast.ai REST API on loopback, for driving the real `vastai` CLI in tests.

    python tests/fakes/fake_vast.py --port 0 --url-file /tmp/u --api-key KEY --seed 7
    VAST_URL=$(cat /tmp/u) VAST_API_KEY=KEY vastai show instances --raw

Models what the runner must survive (docs/DESIGN.md "Runner"): instances that go
created -> loading -> running (-> exited), billing that accrues into `credit`, paging of
/api/v1/instances/, per-instance API keys, listing lag after destroy, and programmable
faults (errors, 429 without Retry-After, malformed/empty answers, dropped connections).
Control API under /_control/ (no auth): see tests/fakes/README.md. Paths and payloads
follow the CLI's own source: tests/fakes/vastai_notes.md. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HOURS_PER_MONTH = 30 * 24  # storage_cost is $/GB/month; dph is $/hour
GPU_NAMES = ["RTX 4090", "RTX 3090", "A100 SXM4", "H100 SXM", "RTX A6000", "L40S", "RTX 4080"]
GPU_RAM = [24564, 24576, 81920, 81559, 49140, 46068, 16376]  # MB
# The newest CUDA each host's driver runs (vast.ai's cuda_max_good). The last offer is a host with
# an old driver (CUDA 12.4: no CUDA 13 torch runs there) and the cheapest of all, so a search that
# does not filter on cuda_max_good rents it.
CUDA_MAX_GOOD = [13.0, 13.0, 13.0, 13.0, 13.0, 13.0, 12.4]
OLD_DRIVER = len(GPU_NAMES) - 1
# The host's NVIDIA driver behind each cuda_max_good (driver_version, a string as the service gives
# it): 580.65.06 shipped with CUDA 13.0, 550.54.15 with CUDA 12.4.
DRIVER_OF_CUDA = {13.0: "580.65.06", 12.4: "550.54.15"}
# vCPUs: cpu_cores is the host's, cpu_cores_effective the share one rental of the offer gets.
CPU_CORES, CPU_CORES_EFFECTIVE = 64, 16.0
# Two more A100 SXM4 offers after the seeded seven (fixed reliability 0.995, CUDA 13.0), so each
# floor of the runner's default query bites on its own: one with 32 vCPUs (what the default rents
# when the seeded A100's reliability is below 0.98, as with seed 7), and a cheaper one with 16 vCPUs
# (below the 32-vCPU floor). Each: (cpu_cores, cpu_cores_effective, dph_base low end).
EXTRA_A100 = [(128, 32.0, 0.95), (64, 16.0, 0.60)]
FAULT_KINDS = {
    "error",
    "rate_limit",
    "non_json",
    "empty",
    "empty_object",
    "null",
    "success_false",
    "truncated",
    "drop",
    "delay",
    "noop",
    "late",  # create only: answer an error now, create the instance delay_s seconds later
    "churn",  # list only: another account user's create lands just before this page is served
}
RULE_KEYS = ("op", "kind", "times", "skip", "prob", "status", "body", "delay_s", "apply", "create",
             "instance")
OPS = {"list", "show", "create", "destroy", "label", "state", "user", "offers", "any"}
# Settings a test may change at start (--set k=v) or at run time (POST /_control/settings).
DEFAULT_SETTINGS = {
    "page_size": 25,  # rows per /api/v1/instances/ page (the CLI asks for 25)
    "created_s": 0.3,  # seconds an instance reports actual_status "created"
    "loading_s": 0.7,  # then seconds in "loading"
    "run_s": None,  # then seconds "running" before it exits on its own (None: never)
    "stuck_loading": False,  # new instances never leave "loading"
    "lag_listings": 0,  # a destroyed instance stays listed for this many listings ...
    "lag_s": 0.0,  # ... and/or this many seconds
    "bill_scale": 1.0,  # billed hours per real hour (raise it to see spend quickly)
    "bill_markup": 0.0,  # $/h a new instance bills above the price its offer was searched at
    "initial_credit": 50.0,  # $ credit at start / reset
    "ssh_host": "127.0.0.1",
    "ssh_port": None,  # None: a seeded port, unique per instance; an int: that port for all
    "accept_any_key": False,  # True: any non-empty key is valid (campaign convenience)
    # a command run as `boot_cmd ID SSH_PORT` (VAST_URL set) when an instance with an on-start
    # command first reports running: the box's container starting and running that command, with
    # no laptop involved. It runs in its own session; a destroy kills that session (the container
    # goes), as does the fake's shutdown. None: on-start commands are only recorded.
    "boot_cmd": None,
    # a command run as `destroy_cmd ID SSH_PORT` (VAST_URL set) when an instance is destroyed,
    # before its container's processes end, and waited for (at most 5 s): it sees the box as the
    # destroy found it (the fault campaign records each box's phase). None: nothing is run.
    "destroy_cmd": None,
}


class Fake:
    """All state, guarded by one lock. Times are wall-clock seconds plus a control offset."""

    def __init__(self, seed: int, api_keys: list[str], settings: dict):
        self.seed, self.api_keys, self.base_settings = seed, list(api_keys), dict(settings)
        self.url = ""  # the server's own URL, set once it listens (boot_cmd's VAST_URL)
        self.lock = threading.RLock()
        self.reset()

    # --- state -----------------------------------------------------------------------
    def reset(self) -> None:
        with self.lock:
            self.rng = random.Random(self.seed)
            self.settings = dict(self.base_settings)
            self.offset = 0.0  # seconds added by POST /_control/advance
            self.credit_billed = 0.0
            self.instances: dict[int, dict] = {}
            self.boots: dict[int, subprocess.Popen] = getattr(self, "boots", {})
            self.next_id = 10_000_000 + self.rng.randrange(1_000_000)
            self.rules: list[dict] = []
            self.fired: list[dict] = []
            self.late_pending = 0  # `late` creates answered with an error, not yet landed
            self.keys_seen: dict[str, int] = {}
            self.counts: dict[str, int] = {}
            self.log: list[dict] = []
            self.unknown: list[str] = []
            self.internal_errors: list[str] = []
            self.unknown_offer_fields: set[str] = set()
            self.offers = self._make_offers()
            self.last_tick = self.now()

    def now(self) -> float:
        return time.time() + self.offset

    def _make_offers(self) -> list[dict]:
        offers = []
        for i, name in enumerate(GPU_NAMES):
            oid = 5_000_000 + 1000 * i + self.rng.randrange(1000)
            dph_base = round(0.2 + 0.35 * i + self.rng.random() * 0.1, 4)
            if i == OLD_DRIVER:  # below every other offer's 0.2 + storage
                dph_base = round(0.1 + (dph_base - 0.2 - 0.35 * i) * 0.5, 4)
            offers.append(
                {
                    "id": oid,
                    "ask_contract_id": oid,
                    "machine_id": 40_000 + i,
                    "host_id": 900 + i,
                    "gpu_name": name,
                    "num_gpus": 1,
                    "gpu_ram": GPU_RAM[i],
                    "dph_base": dph_base,
                    "storage_cost": round(0.1 + self.rng.random() * 0.2, 4),  # $/GB/month
                    "reliability": round(0.97 + self.rng.random() * 0.029, 4),
                    "reliability2": 0.99,
                    "verified": True,
                    "rentable": True,
                    "rented": False,
                    "external": False,
                    "cuda_max_good": CUDA_MAX_GOOD[i],
                    "disk_space": 500.0,
                    "inet_down": 900.0,
                    "inet_up": 800.0,
                    "geolocation": "SE",
                    "cpu_ram": 64000,
                    "cpu_cores": CPU_CORES,
                    "cpu_cores_effective": CPU_CORES_EFFECTIVE,
                    "driver_version": DRIVER_OF_CUDA[CUDA_MAX_GOOD[i]],
                    "score": 100.0 - i,
                    "duration": 30 * 86400.0,
                    "direct_port_count": 100,
                    "compute_cap": 890,
                    "total_flops": 80.0,
                    "gpu_total_ram": GPU_RAM[i],
                    "gpu_arch": "nvidia",
                    "cpu_arch": "amd64",
                    "datacenter": True,
                    "static_ip": True,
                    "disk_bw": 2000.0,
                    "pcie_bw": 25.0,
                }
            )
        a100 = offers[GPU_NAMES.index("A100 SXM4")]
        for k, (cores, effective, low) in enumerate(EXTRA_A100):
            oid = 5_000_000 + 1000 * (len(GPU_NAMES) + k) + self.rng.randrange(1000)
            offers.append(
                dict(a100, id=oid, ask_contract_id=oid, machine_id=40_000 + len(offers),
                     host_id=900 + len(offers), dph_base=round(low + self.rng.random() * 0.05, 4),
                     storage_cost=round(0.1 + self.rng.random() * 0.2, 4), reliability=0.995,
                     cuda_max_good=13.0, driver_version=DRIVER_OF_CUDA[13.0], cpu_cores=cores,
                     cpu_cores_effective=effective, score=90.0 - k)
            )
        return offers

    def _phase(self, inst: dict, now: float) -> str:
        if inst["destroyed_at"] is not None:
            return "destroyed"
        if inst["forced"]:
            return inst["forced"]
        if inst["stopped"]:
            return "exited"
        s, dt = self.settings, now - inst["created_at"]
        if dt < s["created_s"]:
            return "created"
        if inst["stuck"] or dt < s["created_s"] + s["loading_s"]:
            return "loading"
        if s["run_s"] is not None and dt >= s["created_s"] + s["loading_s"] + s["run_s"]:
            return "exited"
        return "running"

    def tick(self) -> None:
        """Accrue billing since the last tick at each instance's current rate."""
        with self.lock:
            now = self.now()
            hours = max(0.0, now - self.last_tick) / 3600.0 * self.settings["bill_scale"]
            self.last_tick = now
            for inst in self.instances.values():
                phase = self._phase(inst, now)
                if phase == "destroyed":
                    continue  # only destroy ends billing
                rate = inst["storage_dph"] if phase == "exited" else inst["dph_total"]
                inst["billed"] += rate * hours
                self.credit_billed += rate * hours

    def credit(self) -> float:
        return self.settings["initial_credit"] - self.credit_billed

    def row(self, inst: dict, now: float) -> dict:
        """The instance as /api/v1/instances/ and /instances/ID/ show it."""
        phase = self._phase(inst, now)
        if phase == "destroyed":
            phase = inst["last_phase"]
        stopped = inst["stopped"] or phase == "exited"
        return {
            "id": inst["id"],
            "machine_id": inst["offer"]["machine_id"],
            "host_id": inst["offer"]["host_id"],
            "actual_status": phase,
            "cur_state": "stopped" if stopped else "running",
            "next_state": "stopped" if stopped else "running",
            "intended_status": "stopped" if inst["stopped"] else "running",
            "label": inst["label"],
            "image_uuid": inst["image"],
            "image_runtype": inst["runtype"],
            "image_args": inst["args"] or [],
            "onstart": inst["onstart"],
            "extra_env": [[k, v] for k, v in sorted(inst["env"].items())],
            "num_gpus": 1,
            "gpu_name": inst["offer"]["gpu_name"],
            "gpu_util": 0.0,
            "disk_space": inst["disk"],
            "dph_total": inst["dph_total"],
            "storage_cost": inst["offer"]["storage_cost"],
            "dph_base": inst["offer"]["dph_base"],
            "ssh_host": self.settings["ssh_host"],
            "ssh_port": inst["ssh_port"],
            "ssh_idx": "0",
            "public_ipaddr": "127.0.0.1",
            "start_date": inst["created_at"],
            "end_date": None,
            "status_msg": f"fake: {phase}",
            "uptime_mins": max(0.0, (now - inst["created_at"]) / 60.0),
            "reliability2": 0.99,
            "cuda_max_good": inst["offer"]["cuda_max_good"],
            "inet_up": 800.0,
            "inet_down": 900.0,
            "template_id": None,
            "template_hash_id": None,
            "template_name": None,
            "cpu_ram": 64000,
            "cpu_cores": inst["offer"]["cpu_cores"],
            "cpu_cores_effective": inst["offer"]["cpu_cores_effective"],
            "driver_version": inst["offer"]["driver_version"],
        }

    def listed(self, inst: dict, now: float) -> bool:
        if inst["destroyed_at"] is None:
            return True
        return inst["lag_left"] > 0 or now < inst["lag_until"]

    def create(self, offer_id: int, body: dict, key: str) -> tuple[int, dict]:
        offer = next((o for o in self.offers if o["id"] == offer_id), None)
        if offer is None:
            return 404, {
                "success": False,
                "error": "no_such_ask",
                "msg": f"Offer {offer_id} does not exist.",
            }
        if not body.get("image"):
            return 400, {"success": False, "error": "invalid_args", "msg": "image is required"}
        if self.credit() <= 0:
            return 402, {
                "success": False,
                "error": "insufficient_credit",
                "msg": "Your credit is too low.",
            }
        disk = float(body.get("disk") or 10)
        storage_dph = offer["storage_cost"] * disk / HOURS_PER_MONTH
        iid = self.next_id
        self.next_id += 1 + self.rng.randrange(50)
        inst = {
            "id": iid,
            "offer": offer,
            "label": body.get("label"),
            "image": body.get("image"),
            "runtype": body.get("runtype") or "ssh",
            "args": body.get("args"),
            "onstart": body.get("onstart"),
            "env": dict(body.get("env") or {}),
            "disk": disk,
            "storage_dph": round(storage_dph, 6),
            "dph_total": round(
                offer["dph_base"] + storage_dph + float(self.settings["bill_markup"]), 6
            ),
            "created_at": self.now(),
            "destroyed_at": None,
            "stopped": False,
            "forced": None,
            "stuck": self.settings["stuck_loading"],
            "billed": 0.0,
            "lag_left": 0,
            "lag_until": 0.0,
            "lag_visible": False,
            "last_phase": None,
            "ssh_port": self.settings["ssh_port"] or self._free_port(),
            "instance_api_key": "fakeinst-%016x" % self.rng.getrandbits(64),
            "created_by": key_tag(key),
            "booted": False,
        }
        self.instances[iid] = inst
        return 200, {
            "success": True,
            "new_contract": iid,
            "instance_api_key": inst["instance_api_key"],
            "ask_id": offer_id,
        }

    def _free_port(self) -> int:
        """A seeded ssh port no other instance of this run has had (tests key boxes by port)."""
        used = {i["ssh_port"] for i in self.instances.values()}
        while True:
            port = 20_000 + self.rng.randrange(20_000)
            if port not in used:
                return port

    def destroy(self, iid: int) -> tuple[int, dict]:
        inst = self.instances.get(iid)
        if inst is None or inst["destroyed_at"] is not None:
            return 404, {
                "success": False,
                "error": "no_such_instance",
                "msg": f"Instance {iid} not found.",
            }
        now = self.now()
        inst["last_phase"] = self._phase(inst, now)
        inst["destroyed_at"] = now
        self.on_destroy(inst)
        self.halt(inst)
        inst["lag_left"] = int(self.settings["lag_listings"])
        inst["lag_until"] = now + float(self.settings["lag_s"])
        inst["lag_visible"] = inst["lag_left"] > 0 or now < inst["lag_until"]
        return 200, {"success": True}

    def boot_due(self) -> None:
        """Run boot_cmd for each live instance with an on-start command now running (once each)."""
        cmd = self.settings["boot_cmd"]
        if not cmd:
            return
        with self.lock:
            now = self.now()
            for inst in self.instances.values():
                if inst["booted"] or not inst["onstart"] or self._phase(inst, now) != "running":
                    continue
                inst["booted"] = True
                env = dict(os.environ, VAST_URL=self.url)
                self.boots[inst["id"]] = subprocess.Popen(
                    [cmd, str(inst["id"]), str(inst["ssh_port"])], env=env,
                    stdin=subprocess.DEVNULL, start_new_session=True)

    def on_destroy(self, inst: dict) -> None:
        """Run destroy_cmd for a destroyed instance, waited for (5 s at most), output dropped."""
        cmd = self.settings["destroy_cmd"]
        if not cmd:
            return
        env = dict(os.environ, VAST_URL=self.url)
        try:
            subprocess.run([cmd, str(inst["id"]), str(inst["ssh_port"])], env=env, timeout=5,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass  # a hook that cannot run or hangs never stops a destroy

    def halt(self, inst: dict) -> None:
        """A destroyed container's processes end: the boot command's whole session is killed."""
        proc = self.boots.pop(inst["id"], None)
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def halt_all(self) -> None:
        with self.lock:
            for inst in self.instances.values():
                self.halt(inst)

    def state(self) -> dict:
        self.tick()
        now = self.now()
        insts = []
        for inst in self.instances.values():
            d = {k: v for k, v in inst.items() if k != "offer"}
            d["boot_pid"] = self.boots[inst["id"]].pid if inst["id"] in self.boots else None
            d.update(
                offer_id=inst["offer"]["id"],
                phase=self._phase(inst, now),
                listed=self.listed(inst, now),
            )
            insts.append(d)
        live = [i["id"] for i in insts if i["destroyed_at"] is None]
        return {
            "now": now,
            "credit": self.credit(),
            "billed_total": self.credit_billed,
            "instances": insts,
            "live": live,
            "late_pending": self.late_pending,  # creates that will still land (fault `late`)
            "created_total": len(insts),
            "destroyed_total": len(insts) - len(live),
            "keys_seen": dict(self.keys_seen),
            "counts": dict(self.counts),
            "faults": list(self.rules),
            "fired": list(self.fired),
            "settings": dict(self.settings),
            "unknown_paths": list(self.unknown),
            "internal_errors": list(self.internal_errors),
            "unknown_offer_fields": sorted(self.unknown_offer_fields),
            "offers": self.offers,
            "api_keys": list(self.api_keys),
        }

    # --- faults ----------------------------------------------------------------------
    def add_rules(self, rules: list, replace: bool) -> None:
        checked = []
        for r in rules:
            unknown = set(r) - set(RULE_KEYS)
            if unknown:
                raise ValueError(
                    f"unknown fault keys {sorted(unknown)} (see tests/fakes/README.md)"
                )
            if r.get("op", "any") not in OPS or r.get("kind") not in FAULT_KINDS:
                raise ValueError(
                    f"fault needs op in {sorted(OPS)} and kind in {sorted(FAULT_KINDS)}: {r}"
                )
            checked.append(
                {
                    "op": r.get("op", "any"),
                    "kind": r["kind"],
                    "times": r.get("times", 1),
                    "skip": int(r.get("skip", 0)),
                    "prob": float(r.get("prob", 1.0)),
                    "status": r.get("status"),
                    "body": r.get("body"),
                    "delay_s": float(r.get("delay_s", 0.0)),
                    # "apply" (alias "create"): do the operation, then answer with the fault
                    "apply": bool(r.get("apply", r.get("create", False))),
                    # "instance": only requests about that instance id (destroy, show, label, state)
                    "instance": r.get("instance"),
                }
            )
        self.rules = checked if replace else self.rules + checked

    def draw_fault(self, op: str, ident=None) -> dict | None:
        """The first rule matching op (and instance) that fires now (consuming one of its times)."""
        for r in self.rules:
            if r["op"] not in (op, "any") or r["times"] == 0:
                continue
            if r["instance"] is not None and r["instance"] != ident:
                continue
            if r["skip"] > 0:
                r["skip"] -= 1
                continue
            if r["prob"] < 1.0 and self.rng.random() >= r["prob"]:
                continue
            if r["times"] is not None:
                r["times"] -= 1
            self.fired.append({"op": op, "kind": r["kind"], "t": self.now()})
            return r
        return None


def key_tag(key: str | None) -> str | None:
    """A short tag for logs: never the key itself."""
    return None if key is None else f"...{key[-4:]}" if len(key) > 8 else "<short>"


def fault_response(rule: dict) -> tuple[int, str, bytes]:
    """(status, content-type, body) for an injected fault."""
    kind, status = rule["kind"], rule["status"]
    if rule["body"] is not None:
        body = rule["body"] if isinstance(rule["body"], str) else json.dumps(rule["body"])
        return status or 500, "application/json", body.encode()
    canned = {
        "error": (500, {"success": False, "error": "fake_fault", "msg": "injected server error"}),
        "rate_limit": (
            429,
            {"success": False, "error": "rate_limited", "msg": "Too many requests"},
        ),
        "success_false": (
            200,
            {"success": False, "error": "fake_fault", "msg": "injected failure"},
        ),
        "empty_object": (200, {}),
        "null": (200, None),
    }
    if kind in canned:
        code, obj = canned[kind]
        return status or code, "application/json", json.dumps(obj).encode()
    if kind == "non_json":
        return status or 200, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"
    if kind == "empty":
        return status or 200, "application/json", b""
    if kind == "truncated":
        return status or 200, "application/json", b'{"instances": [{"id": 1'
    raise AssertionError(kind)


def match_filters(row: dict, filters: dict) -> bool:
    """The subset of the service's select_filters the CLI sends: {col: {op: value}}."""
    for col, conds in (filters or {}).items():
        if not isinstance(conds, dict):
            continue
        v = row.get(col)
        for op, want in conds.items():
            if not compare(v, op, want):
                return False
    return True


def compare(v, op: str, want) -> bool:
    if op in ("in", "notin"):
        inside = v in want or (isinstance(v, (int, float)) and str(v) in map(str, want))
        return inside if op == "in" else not inside
    if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(want, str):
        try:
            want = float(want)
        except ValueError:
            return False
    try:
        return (
            {"eq": v == want, "neq": v != want}[op]
            if op in ("eq", "neq")
            else {"gt": v > want, "gte": v >= want, "lt": v < want, "lte": v <= want}[op]
        )
    except (TypeError, KeyError):
        return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: Fake
    log_file = None

    def log_message(self, fmt, *args):  # quiet: to the --log file or nowhere
        if self.log_file:
            self.log_file.write("%.3f %s\n" % (time.time(), fmt % args))
            self.log_file.flush()

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def send(self, status: int, obj=None, raw: bytes | None = None, ctype="application/json"):
        body = raw if raw is not None else json.dumps(obj).encode()
        if getattr(self, "entry", None) is not None:
            self.entry["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", ctype)  # the CLI's search checks == 'application/json'
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route(self, method: str) -> None:
        self.entry = None  # this request's line in the request log (set below for API calls)
        try:
            return self.handle_api(method)
        except Exception as e:  # a bug in the fake: answer 500 and record it, never just hang up
            import traceback

            with self.fake.lock:
                self.fake.internal_errors.append(f"{method} {self.path}: {e!r}")
            if self.log_file:
                traceback.print_exc(file=self.log_file)
            return self.send(500, {"success": False, "error": "fake_bug", "msg": repr(e)})

    def handle_api(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self.send(
                400, {"success": False, "error": "invalid_json", "msg": "body is not JSON"}
            )
        if path.startswith("/_control/"):
            return self.control(method, path, body)
        f = self.fake
        with f.lock:
            f.tick()
            op, ident = classify(method, path, body)
            self.entry = {"t": f.now(), "method": method, "path": path, "op": op, "query": query}
            if op == "offers":  # the search as the service got it: the runner's floors and ceiling
                self.entry["body"] = body
            f.log.append(self.entry)
            del f.log[:-2000]
            if op is None:
                f.unknown.append(f"{method} {path}")
                return self.send(
                    404, {"success": False, "error": "not_found", "msg": f"no route {path}"}
                )
            if op == "meta":  # unauthenticated lookups the CLI makes at import time
                if path.startswith("/api/v0/gpu_names/"):
                    return self.send(200, {"gpu_names": GPU_NAMES})
                return self.send(200, {"gpu_types": []} if "gpu_types" in path else {"filters": []})
            f.counts[op] = f.counts.get(op, 0) + 1
            key = bearer(self.headers.get("Authorization"))
            if key is not None:
                f.keys_seen[key] = f.keys_seen.get(key, 0) + 1
            denied = self.auth(key, op, ident)
            if denied:
                return self.send(401, denied)
            rule = f.draw_fault(op, ident)
        if rule is not None and rule["kind"] == "delay":
            time.sleep(rule["delay_s"])
            rule = None
        with f.lock:
            if rule is not None:
                if rule["apply"] and op == "create":
                    f.create(ident, body, key)  # the instance exists whatever the answer says
                if rule["apply"] and op == "destroy" and ident is not None:
                    f.destroy(ident)  # destroyed, though the answer says otherwise
                if rule["kind"] == "drop":
                    self.entry["status"] = "dropped"
                    self.close_connection = True
                    self.connection.shutdown(2)  # no answer at all: the CLI sees a ConnectionError
                    return None
                if rule["kind"] == "churn":  # someone else rents a box between two pages
                    f.create(f.offers[0]["id"], {"image": "other/image", "label": "someone-else"},
                             key)
                    return self.serve(op, ident, query, body, key)
                if rule["kind"] == "noop":
                    return self.send(200, {"success": True})
                if rule["kind"] == "late":  # the create lands after the client gave up on it
                    if op == "create":
                        late = (ident, body, key)
                        f.late_pending += 1
                        threading.Timer(rule["delay_s"], self.late_create, late).start()
                    return self.send(500, {"success": False, "error": "fake_fault",
                                           "msg": "injected timeout (the create lands later)"})
                status, ctype, payload = fault_response(rule)
                return self.send(status, raw=payload, ctype=ctype)
            return self.serve(op, ident, query, body, key)

    def late_create(self, ident, body: dict, key: str | None) -> None:
        with self.fake.lock:
            try:
                self.fake.create(ident, body, key)
            finally:
                self.fake.late_pending -= 1

    def auth(self, key: str | None, op: str, ident) -> dict | None:
        f = self.fake
        if key and (key in f.api_keys or f.settings["accept_any_key"]):
            return None
        owned = [i for i in f.instances.values() if key and i["instance_api_key"] == key]
        if owned and op in ("destroy", "show", "label", "state") and ident == owned[0]["id"]:
            return None  # an instance key acts on its own instance only
        # The CLI's main.py treats 401 + msg "Invalid user key" as a bad key.
        return {"success": False, "error": "auth_error", "msg": "Invalid user key"}

    def serve(self, op: str, ident, query: dict, body: dict, key: str | None):
        f, now = self.fake, self.fake.now()
        if op == "list":
            filters = json.loads(query.get("select_filters") or "{}")
            after = decode_token(query.get("after_token"))
            if after is None:  # a new listing: decide which destroyed rows still lag into it
                for inst in f.instances.values():
                    if inst["destroyed_at"] is not None:
                        inst["lag_visible"] = f.listed(inst, now)
                        inst["lag_left"] = max(0, inst["lag_left"] - 1)
            rows = [
                f.row(i, now)
                for i in sorted(f.instances.values(), key=lambda i: i["id"])
                if i["destroyed_at"] is None or i["lag_visible"]
            ]
            rows = [r for r in rows if match_filters(r, filters)]
            total = len(rows)
            rows = [r for r in rows if after is None or r["id"] > after]
            size = max(1, min(int(query.get("limit") or 25), int(f.settings["page_size"])))
            page, more = rows[:size], len(rows) > size
            token = encode_token(page[-1]["id"]) if more else None
            labels: dict = {}
            for r in page:
                labels[r["label"] or ""] = labels.get(r["label"] or "", 0) + 1
            return self.send(
                200,
                {
                    "instances": page,
                    "next_token": token,
                    "total_instances": total,
                    "label_counts": labels,
                },
            )
        if op == "show":
            inst = f.instances.get(ident)
            row = f.row(inst, now) if inst is not None and f.listed(inst, now) else None
            return self.send(200, {"instances": row})
        if op == "create":
            status, obj = f.create(ident, body, key)
            return self.send(status, obj)
        if op == "destroy":
            ids = body.get("instance_ids") if ident is None else [ident]
            results = [f.destroy(int(i)) for i in ids or []]
            if ident is not None:
                return self.send(*results[0])
            return self.send(200, {"success": bool(results) and all(s == 200 for s, _ in results)})
        if op in ("label", "state"):
            inst = f.instances.get(ident)
            if inst is None or inst["destroyed_at"] is not None:
                return self.send(
                    404,
                    {
                        "success": False,
                        "error": "no_such_instance",
                        "msg": f"Instance {ident} not found.",
                    },
                )
            if op == "label":
                inst["label"] = body.get("label")
            else:
                inst["stopped"] = body.get("state") == "stopped"
                if not inst["stopped"]:
                    inst["forced"] = None
            return self.send(200, {"success": True})
        if op == "user":
            return self.send(
                200,
                {
                    "id": 4242,
                    "username": "fake-user",
                    "email": "fake@example.invalid",
                    "credit": round(f.credit(), 6),
                    "balance": 0.0,
                    "host_agreement_accepted": False,
                    "api_key": key,  # the CLI pops it (api/billing.py:show_user)
                },
            )
        if op == "offers":
            q = body.get("q", body)
            storage = float(q.get("allocated_storage") or 5.0)
            filt = {k: v for k, v in q.items() if isinstance(v, dict)}
            f.unknown_offer_fields.update(
                k for k in filt if k not in f.offers[0] and k != "dph_total"
            )
            rows = []
            for o in f.offers:
                extra = o["storage_cost"] * storage / HOURS_PER_MONTH  # priced at --storage GB
                row = dict(o, dph_total=round(o["dph_base"] + extra, 6))
                if match_filters(row, filt):  # an unknown field never matches (see state)
                    rows.append(row)
            # The CLI sends order as [[field, "asc"|"desc"], ...]; sort by the last key first.
            for col, way in reversed([o for o in q.get("order") or [] if len(o) == 2]):
                rows.sort(
                    key=lambda r, c=col: (r.get(c) is None, r.get(c) or 0), reverse=way == "desc"
                )
            limit = q.get("limit")
            return self.send(200, {"offers": rows[: int(limit)] if limit else rows})
        raise AssertionError(op)

    def control(self, method: str, path: str, body: dict):
        f = self.fake
        try:
            with f.lock:
                if path == "/_control/health":
                    return self.send(200, {"ok": True})
                if path == "/_control/state" and method == "GET":
                    return self.send(200, f.state())
                if path == "/_control/requests" and method == "GET":
                    return self.send(200, {"requests": list(f.log)})
                if path == "/_control/reset" and method == "POST":
                    f.reset()
                    return self.send(200, {"ok": True})
                if path == "/_control/faults" and method == "POST":
                    f.add_rules(body.get("rules", []), bool(body.get("replace", False)))
                    return self.send(200, {"ok": True, "faults": f.rules})
                if path == "/_control/faults" and method == "DELETE":
                    f.rules = []
                    return self.send(200, {"ok": True})
                if path == "/_control/settings" and method == "POST":
                    apply_settings(f.settings, body)
                    return self.send(200, {"ok": True, "settings": f.settings})
                if path == "/_control/advance" and method == "POST":
                    f.tick()
                    f.offset += float(body.get("seconds", 0))
                    f.tick()
                    return self.send(200, {"ok": True, "now": f.now()})
                m = re.fullmatch(r"/_control/instances/(\d+)", path)
                if m and method == "POST":
                    inst = f.instances.get(int(m.group(1)))
                    if inst is None:
                        return self.send(404, {"ok": False, "msg": "no such instance"})
                    f.tick()
                    if "phase" in body:
                        if body["phase"] not in (None, "created", "loading", "running", "exited"):
                            raise ValueError("phase must be created|loading|running|exited|null")
                        inst["forced"] = body["phase"]
                    if "stuck" in body:
                        inst["stuck"] = bool(body["stuck"])
                    return self.send(200, {"ok": True})
        except (ValueError, TypeError) as e:
            return self.send(400, {"ok": False, "msg": str(e)})
        return self.send(404, {"ok": False, "msg": f"unknown control {method} {path}"})


def classify(method: str, path: str, body: dict) -> tuple[str | None, int | None]:
    """(op, instance-or-offer id) for an API path the CLI uses; (None, None) if unknown."""
    if method == "GET" and path in (
        "/api/v0/gpu_names/unique/",
        "/api/v0/gpu_types/",
        "/api/v0/instances/filters/",
    ):
        return "meta", None
    if method == "GET" and path == "/api/v1/instances/":
        return "list", None
    if method == "GET" and path.rstrip("/") == "/api/v0/users/current":
        return "user", None
    if (method, path) in (("POST", "/api/v0/bundles/"), ("PUT", "/api/v0/search/asks/")):
        return "offers", None
    if method == "DELETE" and path == "/api/v0/instances/":
        return "destroy", None
    m = re.fullmatch(r"/api/v0/(asks|instances)/(\d+)/", path)
    if not m:
        return None, None
    ident = int(m.group(2))
    if m.group(1) == "asks":
        return ("create", ident) if method == "PUT" else (None, None)
    if method == "GET":
        return "show", ident
    if method == "DELETE":
        return "destroy", ident
    if method == "PUT":
        return ("label" if "label" in body else "state"), ident
    return None, None


def bearer(header: str | None) -> str | None:
    if header and header.startswith("Bearer "):
        return header[len("Bearer ") :]
    return None


def encode_token(last_id: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": last_id}).encode()).decode()


def decode_token(token: str | None) -> int | None:
    if not token:
        return None
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["after"])
    except (ValueError, KeyError, TypeError):
        return None


def apply_settings(settings: dict, updates: dict) -> None:
    for k, v in updates.items():
        if k not in DEFAULT_SETTINGS:
            raise ValueError(f"unknown setting {k!r}; known: {sorted(DEFAULT_SETTINGS)}")
        settings[k] = v


def parse_set(items: list[str]) -> dict:
    """--set k=v pairs; v is JSON when it parses (2, 0.5, true, null), else a plain string."""
    out = {}
    for item in items:
        k, _, v = item.partition("=")
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 2 bad arguments.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only by default)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    p.add_argument("--url-file", help="write http://HOST:PORT here (atomically) once listening")
    p.add_argument(
        "--api-key", action="append", default=[], help="a valid account key (repeatable)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed for ids, ports, prices and fault draws"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="K=JSON",
        help=f"override a setting, e.g. page_size=2; known: {', '.join(DEFAULT_SETTINGS)}",
    )
    p.add_argument("--faults", help="JSON list of fault rules to install at start")
    p.add_argument("--log", help="request log file (default: none)")
    p.add_argument("--dump-state", help="write GET /_control/state JSON here at shutdown")
    a = p.parse_args(argv)
    os.closerange(3, 256)  # hold none of the caller's descriptors (bats waits on fd 3)
    settings = dict(DEFAULT_SETTINGS)
    try:
        apply_settings(settings, parse_set(a.set))
    except ValueError as e:
        p.error(str(e))
    fake = Fake(a.seed, a.api_key or ["fake-api-key"], settings)
    if a.faults:
        try:
            fake.add_rules(json.loads(a.faults), replace=True)
        except ValueError as e:
            p.error(f"--faults: {e}")
    Handler.fake = fake
    Handler.log_file = open(a.log, "a") if a.log else None
    server = ThreadingHTTPServer((a.host, a.port), Handler)
    server.daemon_threads = True
    url = f"http://{a.host}:{server.server_address[1]}"
    fake.url = url
    if a.url_file:
        with open(a.url_file + ".tmp", "w") as fh:
            fh.write(url + "\n")
        os.replace(a.url_file + ".tmp", a.url_file)

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ticker_stop = threading.Event()

    def ticker():
        while not ticker_stop.wait(0.05):
            fake.tick()
            fake.boot_due()

    threading.Thread(target=ticker, daemon=True).start()
    server.serve_forever(poll_interval=0.1)
    ticker_stop.set()
    fake.halt_all()
    server.server_close()
    if a.dump_state:
        with fake.lock, open(a.dump_state, "w") as fh:
            json.dump(fake.state(), fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
