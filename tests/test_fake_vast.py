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
import time
import urllib.error
import urllib.parse
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
    yield f
    # Every path the CLI used is modelled, and the fake never fell over.
    state = f.state()
    assert (state["unknown_paths"], state["internal_errors"]) == ([], [])


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
    assert listed_ids(fake) == [] and fake.state()["live"] == []
    assert fake.http("GET", f"/api/v0/instances/{iid}/", None, KEY)[1] == {"instances": None}


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


def test_churn_rents_a_box_between_two_pages_and_the_total_moves(fake):
    fake.settings(page_size=2)
    made = [fake.create(label=f"j{i}")["new_contract"] for i in range(3)]
    fake.faults({"op": "list", "kind": "churn", "skip": 1})
    _, first = fake.http("GET", "/api/v1/instances/?limit=25", None, KEY)
    token = first["next_token"]
    _, second = fake.http("GET", f"/api/v1/instances/?limit=25&after_token={token}", None, KEY)
    assert (first["total_instances"], second["total_instances"]) == (3, 4)
    other = [i for i in fake.state()["live"] if i not in made]
    assert len(other) == 1 and fake.inst(other[0])["label"] == "someone-else"
    assert [r["id"] for r in first["instances"] + second["instances"]] == sorted(made) + other


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


def test_offer_search_orders_filters_and_flags_unknown_fields(fake):
    body = {"order": [["dph_total", "desc"]], "dph_total": {"lt": "1.5"}, "limit": 3}
    offers = fake.http("POST", "/api/v0/bundles/", body, KEY)[1]["offers"]
    prices = [o["dph_total"] for o in offers]
    assert len(prices) == 3 and prices == sorted(prices, reverse=True) and max(prices) < 1.5
    body = {"no_such_field": {"eq": "1"}}
    assert fake.http("POST", "/api/v0/bundles/", body, KEY)[1] == {"offers": []}
    assert fake.state()["unknown_offer_fields"] == ["no_such_field"]


def test_billing_accrues_stopped_bills_storage_destroy_ends_it(fake):
    iid = fake.create(disk=100)["new_contract"]
    inst, start = fake.inst(iid), fake.state()["credit"]
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.raw("show", "user")["credit"] == pytest.approx(start - inst["dph_total"], rel=0.02)
    after_hour = fake.state()["credit"]
    assert fake.http("PUT", f"/api/v0/instances/{iid}/", {"state": "stopped"}, KEY)[0] == 200
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.inst(iid)["phase"] == "exited"
    stopped_hour = after_hour - fake.state()["credit"]
    assert stopped_hour == pytest.approx(inst["storage_dph"], rel=0.05) and stopped_hour > 0
    assert fake.http("DELETE", f"/api/v0/instances/{iid}/", {}, KEY)[0] == 200
    gone = fake.state()
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.state()["billed_total"] == pytest.approx(gone["billed_total"], abs=1e-9)
    assert gone["instances"][0]["billed"] == pytest.approx(gone["billed_total"])


# --- auth and keys ---------------------------------------------------------------------


def test_bad_or_missing_key_is_a_401_the_cli_exits_0_on(fake):
    p = fake.cli("show", "instances", "--raw", key="wrong-key-0000")
    assert p.returncode == 0 and p.stdout == ""
    assert json.loads(p.stderr) == {"error": True, "status_code": 401, "msg": "Invalid user key"}
    assert "wrong-key-0000" in fake.state()["keys_seen"]
    assert fake.http("GET", "/api/v0/users/current")[0] == 401  # no key at all


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


# --- faults, as the CLI shows them ---------------------------------------------------------


@pytest.mark.parametrize(
    "kind, rc, stdout, stderr_has",
    [
        ("error", 0, "", '"status_code": 500, "msg": "injected server error"'),
        ("non_json", 0, "", '"status_code": 0, "msg": "Expecting value'),
        ("empty_object", 0, "[]\n", ""),  # {} reads as "no instances": the CLI cannot tell
        ("null", 1, "", "AttributeError: 'NoneType' object has no attribute 'get'"),
    ],
)
def test_listing_fault_reaches_the_cli(fake, kind, rc, stdout, stderr_has):
    fake.faults({"op": "list", "kind": kind})
    fake.create()
    p = fake.cli("show", "instances", "--raw")
    assert (p.returncode, p.stdout) == (rc, stdout) and stderr_has in p.stderr
    assert [f["kind"] for f in fake.state()["fired"]] == [kind]


def test_single_page_listing_shows_the_raw_answer(fake):
    fake.faults({"op": "list", "kind": "empty_object"})
    p = fake.cli("show", "instances", "--raw", "--limit", "25")
    assert (p.returncode, p.stdout) == (0, "{}\n")  # distinguishable from a real empty page


def test_dropped_connection_is_retried_three_times_then_a_traceback(fake):
    fake.faults({"op": "list", "kind": "drop", "times": None})
    p = fake.cli("show", "instances", "--raw")
    assert p.returncode == 1 and "requests.exceptions.ConnectionError" in p.stderr
    assert len(fake.state()["fired"]) == 3


@pytest.mark.parametrize("times, ok", [(2, True), (3, False)])
def test_429_without_retry_after_is_retried_by_the_cli_twice(fake, times, ok):
    fake.faults({"op": "user", "kind": "rate_limit", "times": times})
    p = fake.cli("show", "user", "--raw")
    assert p.returncode == 0 and ("credit" in p.stdout) == ok
    assert ('"status_code": 429' in p.stderr) == (not ok)
    log = fake.control("GET", "requests")["requests"]
    statuses = [r["status"] for r in log if r["op"] == "user"]
    assert statuses == [429] * times + ([200] if ok else [])


@pytest.mark.parametrize("create", [False, True])
def test_create_error_with_and_without_an_instance(fake, create):
    fake.faults({"op": "create", "kind": "error", "create": create})
    p = fake.cli("create", "instance", str(fake.offer_id()), "--image", "i", "--raw")
    assert p.returncode == 0 and p.stdout == "" and '"status_code": 500' in p.stderr
    assert len(fake.state()["live"]) == (1 if create else 0)


def test_create_dropped_after_renting_is_retried_and_rents_twice(fake):
    fake.faults({"op": "create", "kind": "drop", "create": True})
    made = fake.raw("create", "instance", str(fake.offer_id()), "--image", "i")
    live = fake.state()["live"]
    assert len(live) == 2 and made["new_contract"] == live[1]  # the first box: never reported


def test_destroy_failing_then_succeeding(fake):
    iid = fake.create()["new_contract"]
    fake.faults({"op": "destroy", "kind": "error", "times": 1})
    p = fake.cli("destroy", "instance", str(iid), "-y")
    assert p.returncode == 0 and "Failed with error 500" in p.stderr and p.stdout == ""
    assert fake.state()["live"] == [iid]
    p = fake.cli("destroy", "instance", str(iid), "-y")
    assert p.stdout == f"destroying instance {iid}.\n" and fake.state()["live"] == []


def test_destroy_applied_but_answered_with_an_error(fake):
    iid = fake.create()["new_contract"]
    fake.faults({"op": "destroy", "kind": "error", "apply": True})
    assert fake.http("DELETE", f"/api/v0/instances/{iid}/", {}, KEY)[0] == 500
    assert fake.state()["live"] == []


def test_destroy_noop_says_success_and_leaves_the_box(fake):
    iid = fake.create()["new_contract"]
    fake.faults({"op": "destroy", "kind": "noop"})
    assert fake.cli("destroy", "instance", str(iid), "-y").stdout == f"destroying instance {iid}.\n"
    assert fake.state()["live"] == [iid]


def test_listing_lags_after_destroy_for_n_listings(fake):
    fake.settings(lag_listings=1)
    iid = fake.create()["new_contract"]
    assert fake.http("DELETE", f"/api/v0/instances/{iid}/", {}, KEY)[0] == 200
    assert fake.state()["live"] == []  # gone (not billing) while still listed
    assert [listed_ids(fake) for _ in range(2)] == [[iid], []]


def test_listing_lags_for_seconds_after_destroy(fake):
    fake.settings(lag_s=60)
    iid = fake.create()["new_contract"]
    fake.http("DELETE", f"/api/v0/instances/{iid}/", {}, KEY)
    assert fake.http("GET", f"/api/v0/instances/{iid}/", None, KEY)[1]["instances"]["id"] == iid
    fake.control("POST", "advance", {"seconds": 61})
    assert fake.http("GET", f"/api/v0/instances/{iid}/", None, KEY)[1] == {"instances": None}


def test_stuck_loading_never_runs(fake):
    fake.settings(stuck_loading=True)
    iid = fake.create()["new_contract"]
    fake.control("POST", "advance", {"seconds": 3600})
    assert fake.raw("show", "instance", str(iid))["actual_status"] == "loading"


def test_user_answer_without_credit_reaches_the_cli(fake):
    fake.faults({"op": "user", "kind": "empty_object"})
    p = fake.cli("show", "user", "--raw")
    assert (p.returncode, p.stdout) == (0, "{}\n")  # no credit: the budget guard must refuse


# --- the fake itself, without the CLI ------------------------------------------------------


def test_every_fault_kind_answers_as_documented(fake):
    expect = {
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
    for kind, answer in expect.items():
        fake.faults({"op": "user", "kind": kind})
        assert fake.http("GET", "/api/v0/users/current", None, KEY) == answer
    for kind, text in [("non_json", b"<html>"), ("empty", b""), ("truncated", b'{"instances": [')]:
        fake.faults({"op": "user", "kind": kind})
        req = urllib.request.Request(fake.url + "/api/v0/users/current")
        req.add_header("Authorization", "Bearer " + KEY)
        with urllib.request.urlopen(req) as r:
            assert r.read().startswith(text) and "Retry-After" not in r.headers


def test_run_s_exits_forced_phases_label_filter_and_any_key(fake):
    fake.settings(run_s=10)
    a, b = fake.create(label="a")["new_contract"], fake.create(label="b")["new_contract"]
    fake.control("POST", "advance", {"seconds": 100})
    assert fake.inst(a)["phase"] == "exited"  # exited on its own: still billing storage
    fake.control("POST", f"instances/{a}", {"phase": "running"})
    assert fake.inst(a)["phase"] == "running"
    flt = urllib.parse.quote(json.dumps({"label": {"in": ["b"]}}))
    page = fake.http("GET", f"/api/v1/instances/?select_filters={flt}", None, KEY)[1]
    assert [r["id"] for r in page["instances"]] == [b] and page["next_token"] is None
    assert fake.http("GET", "/api/v0/users/current", None, "any-other-key")[0] == 401
    fake.settings(accept_any_key=True)
    assert fake.http("GET", "/api/v0/users/current", None, "any-other-key")[0] == 200
    status, _ = fake.http("POST", "/_control/settings", {"no_such_setting": 1})
    assert status == 400


def test_rules_skip_count_and_draw_with_the_seed(fake):
    fake.faults({"op": "destroy", "kind": "error", "times": 2, "skip": 1})
    ids = [fake.create()["new_contract"] for _ in range(4)]
    codes = [fake.http("DELETE", f"/api/v0/instances/{i}/", {}, KEY)[0] for i in ids]
    assert codes == [200, 500, 500, 200]

    def draws():
        fake.control("POST", "reset")
        fake.faults({"op": "user", "kind": "error", "prob": 0.5, "times": None})
        return [fake.http("GET", "/api/v0/users/current", None, KEY)[0] for _ in range(12)]

    first = draws()
    assert first == draws() and set(first) == {200, 500}


def test_sigterm_ends_the_fake_cleanly_and_dumps_state(tmp_path):
    d = tmp_path
    subprocess.run(
        [
            str(FAKES / "start_fake_vast.sh"),
            str(d / "url"),
            str(d / "pid"),
            "--dump-state",
            str(d / "state.json"),
        ],
        check=True,
        env=dict(os.environ, FAKE_VAST_PYTHON=sys.executable),
        timeout=30,
    )
    pid = int((d / "pid").read_text())
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if (d / "state.json").exists():
            break
        time.sleep(0.05)
    assert json.loads((d / "state.json").read_text())["created_total"] == 0


def test_start_script_leaves_the_callers_descriptors_alone(tmp_path):
    """bats reads fd 3 until every writer has closed it: the fake must not inherit it."""
    r, w = os.pipe()
    d = tmp_path
    p = subprocess.Popen(
        [
            "bash",
            "-c",
            f'{FAKES / "start_fake_vast.sh"} "$1" "$2" 3>&{w}',
            "_",
            str(d / "url"),
            str(d / "pid"),
        ],
        pass_fds=(w,),
        env=dict(os.environ, FAKE_VAST_PYTHON=sys.executable),
    )
    os.close(w)
    assert p.wait(timeout=30) == 0
    try:
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""  # EOF now: nobody (the fake included) holds the pipe
    finally:
        os.kill(int((d / "pid").read_text()), signal.SIGTERM)
        os.close(r)


def test_late_create_answers_an_error_and_lands_later(fake):
    # the create the client gave up on (an error, a timeout) still rents a box, after delay_s
    fake.faults({"op": "create", "kind": "late", "delay_s": 0.5})
    offer = str(fake.offer_id())
    p = fake.cli("create", "instance", offer, "--image", "i", "--label", "l:a", "--raw")
    assert p.returncode == 0 and p.stdout == "" and '"status_code": 500' in p.stderr
    assert fake.state()["late_pending"] == 1 or fake.state()["live"]  # in flight (or landed)
    for _ in range(100):
        if fake.state()["live"]:
            break
        time.sleep(0.1)
    assert len(fake.state()["live"]) == 1 and fake.state()["instances"][0]["label"] == "l:a"
    assert fake.state()["late_pending"] == 0  # a harness waits for this before counting boxes
