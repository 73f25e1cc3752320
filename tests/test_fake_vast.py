"""The fake vast.ai API (tests/fakes/fake_vast.py) driven by the REAL `vastai` CLI.

    .venv/bin/pytest -q tests/test_fake_vast.py

Each test states one behaviour of the fake *as the CLI shows it* (stdout, stderr, exit status)
and checks the fake's ground truth through its control API. What the CLI prints for each
fault is recorded in tests/fakes/vastai_notes.md; these tests keep those notes true.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

FAKES = Path(__file__).parent / "fakes"
VASTAI = Path(sys.executable).parent / "vastai"
KEY = "fakeacct-0123456789abcdef"  # the account key the fake accepts


class Fake:
    """A running fake: its URL, its control API and the real CLI pointed at it."""

    def __init__(self, url: str, home: Path):
        self.url, self.home = url, home

    def http(self, method: str, path: str, body=None, key: str | None = None):
        req = urllib.request.Request(self.url + path, method=method)
        data = None if body is None else json.dumps(body).encode()
        if key:
            req.add_header("Authorization", "Bearer " + key)
        try:
            with urllib.request.urlopen(req, data=data, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def control(self, method: str, what: str, body=None):
        status, obj = self.http(method, "/_control/" + what, body)
        assert status == 200, obj
        return obj

    def faults(self, *rules):
        self.control("POST", "faults", {"rules": list(rules), "replace": True})

    def settings(self, **kw):
        self.control("POST", "settings", kw)

    def state(self) -> dict:
        return self.control("GET", "state")

    def inst(self, iid: int) -> dict:
        return next(i for i in self.state()["instances"] if i["id"] == iid)

    def offer_id(self) -> int:
        return self.state()["offers"][0]["id"]

    def create(self, label="job-g1", disk=10, key=KEY) -> dict:
        """Create straight through the API (setup only; the CLI path has its own test)."""
        status, obj = self.http(
            "PUT",
            f"/api/v0/asks/{self.offer_id()}/",
            {"image": "img", "disk": disk, "label": label},
            key,
        )
        assert status == 200, obj
        return obj

    def cli(self, *args, key: str | None = KEY, stdin: str = "") -> subprocess.CompletedProcess:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / "cfg"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "XDG_STATE_HOME": str(self.home / "state"),
            "VAST_URL": self.url,
            "VASTAI_NO_UPDATE_CHECK": "1",
        }
        if key is not None:
            env["VAST_API_KEY"] = key
        return subprocess.run(
            [str(VASTAI), *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
        )

    def raw(self, *args, key: str | None = KEY):
        p = self.cli(*args, "--raw", key=key)
        assert p.returncode == 0 and p.stdout.strip(), (p.returncode, p.stdout, p.stderr)
        return json.loads(p.stdout)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("fake_vast")
    subprocess.run(
        [
            str(FAKES / "start_fake_vast.sh"),
            str(d / "url"),
            str(d / "pid"),
            "--api-key",
            KEY,
            "--seed",
            "7",
            "--log",
            str(d / "log"),
            "--dump-state",
            str(d / "final.json"),
            # Slow lifecycle: tests move the clock with POST /_control/advance instead of sleeping.
            "--set",
            "created_s=30",
            "--set",
            "loading_s=30",
        ],
        check=True,
        env=dict(os.environ, FAKE_VAST_PYTHON=sys.executable),
        timeout=30,
    )
    pid = int((d / "pid").read_text())
    yield (d / "url").read_text().strip(), d
    os.kill(pid, signal.SIGTERM)


@pytest.fixture
def fake(server, tmp_path) -> Fake:
    url, _ = server
    f = Fake(url, tmp_path)
    f.control("POST", "reset")
    # Pre-seed the CLI's role cache so it does not probe /users/current before each command
    # (cli/util.py:detect_role): request counts and fault draws stay exact.
    (tmp_path / "cfg" / "vastai").mkdir(parents=True)
    (tmp_path / "cfg" / "vastai" / "vast_role").write_text("client")
    return f


def listed_ids(fake: Fake) -> list[int]:
    return [row["id"] for row in fake.raw("show", "instances")]


# --- the happy path ---------------------------------------------------------------------


def test_create_lists_runs_and_destroy_removes(fake):
    offers = fake.raw("search", "offers", "gpu_ram>=40 num_gpus=1", "--storage", "40")
    assert offers and all(o["gpu_ram"] >= 40000 for o in offers)
    made = fake.raw(
        "create",
        "instance",
        str(offers[0]["id"]),
        "--image",
        "trainer:1",
        "--disk",
        "40",
        "--label",
        "fold3-g2",
        "--onstart-cmd",
        "echo start",
    )
    assert made["success"] is True and isinstance(made["new_contract"], int)
    iid = made["new_contract"]
    rows = fake.raw("show", "instances")
    assert [r["id"] for r in rows] == [iid]
    assert rows[0]["label"] == "fold3-g2" and rows[0]["actual_status"] == "created"
    assert rows[0]["intended_status"] == "running" and rows[0]["disk_space"] == 40.0
    # The offer's dph_total was quoted at --storage 40: the instance bills exactly that.
    assert rows[0]["dph_total"] == pytest.approx(offers[0]["dph_total"], abs=1e-6)
    assert fake.inst(iid)["onstart"] == "echo start"
    fake.control("POST", "advance", {"seconds": 35})
    assert fake.inst(iid)["phase"] == "loading"
    fake.control("POST", "advance", {"seconds": 30})
    one = fake.raw("show", "instance", str(iid))
    assert one["actual_status"] == "running" and one["cur_state"] == "running"
    assert one["ssh_host"] == "127.0.0.1" and isinstance(one["ssh_port"], int)

    p = fake.cli("destroy", "instance", str(iid), "-y")
    assert (p.returncode, p.stdout) == (0, f"destroying instance {iid}.\n")
    assert listed_ids(fake) == []
    assert fake.raw("show", "instance", str(iid)) == {"instances": None}
    assert fake.state()["live"] == []


def test_destroy_without_yes_aborts_and_leaves_the_instance(fake):
    iid = fake.create()["new_contract"]
    p = fake.cli("destroy", "instance", str(iid), stdin="")
    assert p.returncode == 0 and p.stdout.endswith("Aborted.\n")
    assert fake.state()["live"] == [iid] and fake.state()["counts"].get("destroy") is None


def test_listing_pages_through_every_instance(fake):
    fake.settings(page_size=2)
    made = [fake.create(label=f"j{i}")["new_contract"] for i in range(5)]
    assert listed_ids(fake) == sorted(made)
    pages = [r for r in fake.control("GET", "requests")["requests"] if r["op"] == "list"]
    assert len(pages) == 3 and "after_token" not in pages[0]["query"]
    assert all("after_token" in r["query"] for r in pages[1:])


def test_label_and_ssh_url(fake):
    iid = fake.create(label="old")["new_contract"]
    p = fake.cli("label", "instance", str(iid), "new-label")
    assert p.stdout == f"label for {iid} set to new-label.\n"
    assert fake.inst(iid)["label"] == "new-label"
    p = fake.cli("ssh-url", str(iid))
    assert p.stdout == f"ssh://root@127.0.0.1:{fake.inst(iid)['ssh_port']}\n"


# --- billing ---------------------------------------------------------------------------


def test_offer_price_includes_storage_at_the_requested_size(fake):
    status, small = fake.http("POST", "/api/v0/bundles/", {"allocated_storage": 5}, KEY)
    status, big = fake.http("POST", "/api/v0/bundles/", {"allocated_storage": 725}, KEY)
    small = {o["id"]: o for o in small["offers"]}
    for o in big["offers"]:
        extra = o["storage_cost"] * 720 / (30 * 24)  # 720 GB more, $/GB/month -> $/h
        assert o["dph_total"] == pytest.approx(small[o["id"]]["dph_total"] + extra, abs=1e-5)


def test_billing_accrues_stopped_bills_storage_destroy_ends_it(fake):
    iid = fake.create(disk=100)["new_contract"]
    inst, start = fake.inst(iid), fake.state()["credit"]
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.raw("show", "user")["credit"] == pytest.approx(start - inst["dph_total"], rel=0.02)
    after_hour = fake.state()["credit"]
    assert fake.cli("stop", "instance", str(iid)).returncode == 0
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.raw("show", "instance", str(iid))["actual_status"] == "exited"
    stopped_hour = after_hour - fake.state()["credit"]
    assert stopped_hour == pytest.approx(inst["storage_dph"], rel=0.05) and stopped_hour > 0
    assert fake.http("DELETE", f"/api/v0/instances/{iid}/", {}, KEY)[0] == 200
    gone = fake.state()
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.state()["billed_total"] == pytest.approx(gone["billed_total"], abs=1e-9)
    assert gone["instances"][0]["billed"] == pytest.approx(gone["billed_total"])


# --- auth and keys ---------------------------------------------------------------------


def test_bad_or_missing_key_is_a_401_the_cli_exits_0_on(fake):
    for key in ("wrong-key-0000", None):
        p = fake.cli("show", "instances", "--raw", key=key)
        assert p.returncode == 0 and p.stdout == ""
        assert json.loads(p.stderr) == {
            "error": True,
            "status_code": 401,
            "msg": "Invalid user key",
        }
    assert "wrong-key-0000" in fake.state()["keys_seen"]


def test_instance_key_destroys_its_own_instance_only(fake):
    mine, other = fake.create(), fake.create()
    key = mine["instance_api_key"]
    p = fake.cli("destroy", "instance", str(other["new_contract"]), "-y", key=key)
    assert "401: Invalid user key" in p.stderr
    p = fake.cli("destroy", "instance", str(mine["new_contract"]), "-y", key=key)
    assert p.stdout == f"destroying instance {mine['new_contract']}.\n"
    assert fake.state()["live"] == [other["new_contract"]]


def test_set_api_key_file_is_used_and_seen(fake):
    assert fake.cli("set", "api-key", KEY, key=None).returncode == 0
    assert fake.raw("show", "user", key=None)["credit"] > 0
    assert fake.state()["keys_seen"] == {KEY: 1}
