"""The Nix flake, checked offline: parse, evaluate against a recording nixpkgs stand-in, lock pins.

nixpkgs cannot be downloaded here, so `nix build` cannot run. What can be checked is checked:
every .nix file parses (`nix-instantiate --parse`, Debian's nix-bin); flake.nix evaluates with its
nixpkgs input replaced by tests/nix/nixpkgs (a stand-in that records what each function was given
and rejects unknown attributes/arguments), and the records say what the image holds; flake.lock
carries the pins of ../shared/DESIGN.md. Also scripts/check_versions.py.

    .venv/bin/pytest -q tests/test_nix_flake.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT.parent / "shared" / "DESIGN.md"
NIXPKGS_PIN = {  # ../shared/DESIGN.md, "Pinned facts for the Nix image"
    "rev": "8fd9daa3db09ced9700431c5b7ad0e8ba199b575",
    "narHash": "sha256-Ti+ZBvW6yrWWAg2szExVTwCd4qOJ3KlVr1tFHfyfi8Q=",
    "lastModified": 1778430510,
}
WEIGHTS_REV = "1a640f32ac3e39899438a2931f9924c02f080a54"
WEIGHTS_SHA = "d5e490574712ad0a6736923b9ed11d4cd51c78609c36205f704fc4e87b11d2e0"
ENCODERS = {"libmp3lame", "libopus", "aac", "libopencore_amrnb", "pcm_mulaw"}
REV = "0123456789abcdef0123456789abcdef01234567"
NIX_ENV = {**os.environ, "NIX_CONFIG": "build-users-group ="}  # no nixbld group needed to evaluate
# Evaluation never touches a store (paths are recorded with toString): a dummy store lets a non-root
# user without /nix/var run these tests too.
NO_STORE = ["--store", "dummy://"]


@pytest.fixture(scope="module")
def nix() -> str:
    exe = shutil.which("nix-instantiate")
    if exe is None:
        pytest.skip("nix-instantiate not found: install Debian's nix-bin (scripts/system-deps.sh) "
                    "to run the offline flake checks")
    return exe


def evaluate(nix: str, repo: Path = ROOT, rev: str = REV) -> dict:
    """tests/nix/eval-flake.nix over `repo`: the flake's outputs as plain data."""
    expr = f'import {ROOT}/tests/nix/eval-flake.nix {{ repo = {repo}; rev = "{rev}"; }}'
    proc = subprocess.run([nix, *NO_STORE, "--eval", "--strict", "--json", "-E", expr], env=NIX_ENV,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def flake(nix) -> dict:
    return evaluate(nix)


@pytest.fixture(scope="module")
def image(flake) -> dict:
    return flake["packages"]["trainer-image"]


def env_of(image: dict) -> dict[str, str]:
    return dict(e.split("=", 1) for e in image["config"]["Env"])


def content(image: dict, name: str) -> dict:
    found = [c for c in image["contents"] if c["name"] == name]
    assert found, f"{name} not in the image; have {[c['name'] for c in image['contents']]}"
    return found[0]


# --- parse + lock --------------------------------------------------------------------------------

def test_every_nix_file_parses(nix):
    files = [ROOT / "flake.nix", *sorted((ROOT / "nix").glob("*.nix")),
             *sorted((ROOT / "tests" / "nix").rglob("*.nix"))]
    assert len(files) >= 7
    for f in files:
        proc = subprocess.run([nix, *NO_STORE, "--parse", str(f)], env=NIX_ENV,
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{f}: {proc.stderr}"


def test_flake_lock_pins_the_designs_nixpkgs():
    lock = json.loads((ROOT / "flake.lock").read_text())
    assert lock["version"] == 7 and lock["root"] == "root"
    assert lock["nodes"]["root"] == {"inputs": {"nixpkgs": "nixpkgs"}}
    assert set(lock["nodes"]) == {"root", "nixpkgs"}, "one input only"
    node = lock["nodes"]["nixpkgs"]
    assert node["locked"] == {**NIXPKGS_PIN, "owner": "NixOS", "repo": "nixpkgs", "type": "github"}
    assert node["original"] == {"owner": "NixOS", "ref": "nixos-25.11", "repo": "nixpkgs",
                                "type": "github"}


def test_test_pins_agree_with_design_doc():
    if not DESIGN.exists():
        pytest.skip(f"{DESIGN} not present in this checkout; the pins above are copied from it")
    text = DESIGN.read_text()
    for value in [NIXPKGS_PIN["rev"], NIXPKGS_PIN["narHash"], str(NIXPKGS_PIN["lastModified"]),
                  WEIGHTS_REV, WEIGHTS_SHA]:
        assert value in text


def test_flake_has_one_nixpkgs_input_on_the_release_branch(flake):
    assert flake["inputs"] == {"nixpkgs": {"url": "github:NixOS/nixpkgs/nixos-25.11"}}


def test_flake_outputs_are_named_for_what_people_type(flake):
    assert flake["outputNames"] == {k: ["x86_64-linux"]
                                    for k in ["apps", "checks", "devShells", "packages"]}
    assert {"trainer-image", "default", "python", "push-trainer-image"} <= set(flake["packages"])
    assert flake["packages"]["default"] == flake["packages"]["trainer-image"]
    assert set(flake["apps"]) == {"push-trainer-image"}
    assert set(flake["checks"]) == {"ffmpeg-encoders"}


# --- the image -----------------------------------------------------------------------------------

def test_image_command_is_the_box_entry(image):
    assert image["_standin"] == "dockerTools.buildLayeredImage"
    assert image["imageName"] == "hearsay-trainer"
    assert image["config"]["Cmd"] == ["/opt/hearsay/runner/box/entry.sh"]
    assert "Entrypoint" not in image["config"]


def test_image_env_finds_the_driver_and_stays_offline(image):
    env = env_of(image)
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    dirs = env["LD_LIBRARY_PATH"].split(":")
    assert {"/usr/lib/x86_64-linux-gnu", "/usr/lib64"} <= set(dirs)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["HEARSAY_WEIGHTS_DIR"] == "/opt/hearsay/weights/xls-r-300m"
    assert env["HEARSAY_WEIGHTS_SHA256"] == WEIGHTS_SHA
    assert env["HEARSAY_GIT_SHA"] == REV
    assert env["HEARSAY_VERSION"] == tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["version"]
    assert env["HEARSAY_FFMPEG"] == content(image, "ffmpeg-headless")["_path"] + "/bin/ffmpeg"
    cacert = content(image, "nss-cacert")["_path"]
    assert env["SSL_CERT_FILE"] == cacert + "/etc/ssl/certs/ca-bundle.crt"
    assert "/bin" in env["PATH"].split(":")


def test_image_labels_carry_revision_and_weights_sha(image):
    labels = image["config"]["Labels"]
    assert labels["org.opencontainers.image.revision"] == REV
    assert labels["io.hearsay.weights.sha256"] == WEIGHTS_SHA
    assert labels["io.hearsay.weights.revision"] == WEIGHTS_REV
    assert labels["io.hearsay.nixpkgs.rev"] == NIXPKGS_PIN["rev"]
    assert image["imageTag"] == REV[:12]


def test_image_holds_the_tools_and_a_writable_tmp(image):
    names = {c["name"] for c in image["contents"]}
    assert {"python3-env", "ffmpeg-headless", "rclone", "curl", "bash-interactive", "coreutils",
            "gnugrep", "gnused", "nss-cacert", "vastai", "fake-nss", "hearsay-box-scripts",
            "xls-r-300m-weights"} <= names
    assert "mkdir -p tmp root" in image["extraCommands"]
    assert "chmod 1777 tmp" in image["extraCommands"]
    assert env_of(image)["HOME"] == "/root"


def test_image_weights_are_a_pinned_fetch_at_the_load_path(image):
    tree = content(image, "xls-r-300m-weights")
    fetched = tree["env"]["passthru"]["pytorchModelBin"]
    assert fetched["_standin"] == "fetchurl"
    assert fetched["sha256"] == WEIGHTS_SHA
    assert fetched["url"] == ("https://huggingface.co/facebook/wav2vec2-xls-r-300m/resolve/"
                              f"{WEIGHTS_REV}/pytorch_model.bin")
    assert (f"ln -s {fetched['_path']} \"$out/opt/hearsay/weights/xls-r-300m/pytorch_model.bin\""
            in tree["script"])


def test_image_ffmpeg_is_headless_with_the_five_encoders(image, flake):
    ff = content(image, "ffmpeg-headless")
    assert ff["_standin"] == "ffmpeg-headless.override"
    # Stated explicitly, not left to nixpkgs' defaults (AMR-NB is off by default in headless).
    assert ff["given"] == {"withOpencoreAmrnb": True, "withVersion3": True, "withMp3lame": True,
                           "withOpus": True}
    assert ENCODERS <= set(ff["encoders"])
    check = flake["checks"]["ffmpeg-encoders"]["script"]
    assert check.startswith(ff["_path"] + "/bin/ffmpeg -hide_banner -encoders")
    assert set(re.search(r"for enc in ([^;]+);", check).group(1).split()) == ENCODERS


def test_image_python_is_cuda_torch_bin_and_pyprojects_deps(image, flake):
    pyenv = content(image, "python3-env")
    [hearsay] = pyenv["packages"]
    assert hearsay["_standin"] == "buildPythonPackage" and hearsay["pname"] == "hearsay"
    by_name = {d["pname"]: d for d in hearsay["dependencies"]}
    assert by_name["torch"]["attr"] == "torch-bin" and by_name["torch"]["cudaSupport"] is True
    assert by_name["torchaudio"]["attr"] == "torchaudio-bin"
    # What `nix eval .#python.pkgs.torch.version` (scripts/check_versions.py --nix) reads:
    assert flake["torch"]["attr"] == "torch-bin"
    # The names are pyproject's (runtime + "train" extra), minus what the image provides otherwise.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["train"]
    want = [re.match(r"[A-Za-z0-9._-]+", r).group(0).lower().replace("_", "-") for r in reqs]
    assert [d["attr"] for d in hearsay["dependencies"]] == [
        {"torch": "torch-bin", "torchaudio": "torchaudio-bin"}.get(n, n)
        for n in want if n != "imageio-ffmpeg"]
    assert sorted(hearsay["pythonRelaxDeps"]) == sorted(
        re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in reqs if "==" in r)


def test_image_hearsay_is_built_from_this_tree(image):
    src = content(image, "python3-env")["packages"][0]["src"]
    assert src["root"] == str(ROOT)
    assert {f["path"] for f in src["files"]} == {
        str(ROOT / p) for p in ["pyproject.toml", "README.md", "src", "export"]}
    assert all(f["exists"] for f in src["files"])


def test_image_carries_the_box_entry_and_smoke_check(image):
    box = content(image, "hearsay-box-scripts")
    paths = {f["path"]: f["exists"] for f in box["env"]["passthru"]["src"]["files"]}
    assert set(paths) == {str(ROOT / p) for p in ["runner/box", "runner/lib", "container/trainer"]}
    assert 'cp -r' in box["script"] and '"$out/opt/hearsay/"' in box["script"]
    assert "patchShebangs" in box["script"]


def test_box_entry_and_smoke_check_exist_in_the_tree():
    # The image's command; runner/box/entry.sh is the runner's, it runs the smoke check first.
    for rel in ["runner/box/entry.sh", "container/trainer/smoke_check.sh"]:
        path = ROOT / rel
        assert path.is_file(), f"{rel} is missing: the trainer image cannot run without it"
        assert os.access(path, os.X_OK), f"{rel} is not executable"


def test_dirty_tree_gets_a_dirty_tag_and_revision(nix):
    image = evaluate(nix, rev="")["packages"]["trainer-image"]
    assert image["imageTag"] == "dirty"
    assert env_of(image)["HEARSAY_GIT_SHA"].endswith("-dirty")


# --- dev shell, push app -------------------------------------------------------------------------

def test_dev_shell_has_the_images_python_deps_and_tools(flake, image):
    shell = flake["devShell"]
    pyenv = shell["packages"][0]
    hearsay = content(image, "python3-env")["packages"][0]
    assert [p["_path"] for p in pyenv["packages"]] == [
        d["_path"] for d in hearsay["dependencies"]] + [pyenv["packages"][-1]["_path"]]
    assert pyenv["packages"][-1]["pname"] == "pytest"
    names = {p["name"] for p in shell["packages"]}
    assert {"ffmpeg-headless", "rclone", "skopeo", "shellcheck", "bats"} <= names
    assert shell["env"]["HEARSAY_FFMPEG"] == env_of(image)["HEARSAY_FFMPEG"]
    assert 'PYTHONPATH="$PWD/src:$PWD' in shell["shellHook"]  # hearsay from the checkout


def test_push_app_copies_the_image_and_records_its_digest(flake, image, tmp_path):
    push = flake["packages"]["push-trainer-image"]
    assert flake["apps"]["push-trainer-image"] == {
        "type": "app", "program": push["_path"] + "/bin/push-trainer-image"}
    assert f'"docker-archive:{image["_path"]}"' in push["text"]
    assert "--digestfile" in push["text"]
    assert {p["name"] for p in push["runtimeInputs"]} == {"skopeo", "coreutils"}
    shellcheck = shutil.which("shellcheck",
                              path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if shellcheck:  # writeShellApplication shellchecks its text at build time; do it now
        script = tmp_path / "push.sh"
        script.write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + push["text"])
        proc = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


# --- the stand-in bites --------------------------------------------------------------------------

def _copy_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ["flake.nix", "flake.lock", "pyproject.toml", "README.md"]:
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "nix", repo / "nix")
    return repo


@pytest.mark.parametrize(("file", "old", "new", "error"), [
    ("nix/ffmpeg.nix", "withOpencoreAmrnb", "withOpencoreAmrNb",
     "unexpected argument 'withOpencoreAmrNb'"),
    ("nix/trainer-image.nix", "buildLayeredImage", "buildLayerdImage",
     "attribute 'buildLayerdImage' missing"),
    ("nix/trainer-image.nix", "Cmd =", "cmd =", "unknown OCI config key(s): cmd"),
    ("nix/python.nix", "prev.torch-bin", "prev.torch_bin", "attribute 'torch_bin' missing"),
    ("flake.nix", "allowUnfree = true;", "", "unfree license"),
    ("nix/weights.nix", "inherit sha256;", "", "no valid sha256/hash given"),
    ("nix/ffmpeg.nix", "withVersion3 = true;", "withVersion3 = false;", "--enable-version3"),
])
def test_a_typo_or_a_dropped_setting_fails_evaluation(nix, tmp_path, file, old, new, error):
    repo = _copy_repo(tmp_path)
    path = repo / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(RuntimeError, match=re.escape(error)):
        evaluate(nix, repo=repo)


# --- scripts/check_versions.py -------------------------------------------------------------------

def check_versions(*args: str, lock: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "check_versions.py"), *args]
    if lock is not None:
        cmd += ["--lock", str(lock)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "requirements.lock"
    path.write_text("numpy==2.4.6\ntorch==2.11.0\ntorchaudio==2.11.0\ntransformers==5.17.0\n")
    return path


def test_check_versions_passes_within_the_same_minor(lock):
    proc = check_versions("--image", "torch=2.11.1", "--image", "torchaudio=2.11.0", lock=lock)
    assert proc.returncode == 0, proc.stderr
    assert "torch: image 2.11.1, lock 2.11.0: same minor" in proc.stdout


def test_check_versions_fails_across_minors(lock):
    proc = check_versions("--image", "torch=2.9.0", "--image", "torchaudio=2.11.0", lock=lock)
    assert proc.returncode == 1
    assert "torch: image 2.9.0, lock 2.11.0: DIFFERENT minor" in proc.stdout


def test_check_versions_reports_ungated_packages_without_failing(lock):
    proc = check_versions("--image", "torch=2.11.0", "--image", "transformers=4.57.1", lock=lock)
    assert proc.returncode == 0
    assert "transformers: image 4.57.1, lock 5.17.0: different minor (not gated)" in proc.stdout


@pytest.mark.parametrize("images", [["torch=standin"], ["torch="],
                                    ["torch=2.11.0", "scipy=1.2.3"]])  # scipy: not in the lock
def test_check_versions_cannot_measure_is_not_a_pass(lock, images):
    args = [a for image in images for a in ("--image", image)]
    assert check_versions(*args, lock=lock).returncode == 3


def test_check_versions_needs_torch(lock):
    assert check_versions("--image", "torchaudio=2.11.0", lock=lock).returncode == 2


def test_check_versions_reads_the_real_lock():
    proc = check_versions("--image", "torch=" + _lock_version("torch"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _lock_version(name: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.lower().startswith(name + "=="):
            return line.split("==", 1)[1]
    raise AssertionError(f"{name} not in requirements.lock")
