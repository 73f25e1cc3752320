"""`hearsay publish upload|download`: put a checkpoint somewhere private, get it back verified.

    hearsay publish upload runs/full/final --to gh://ORG/REPO@ckpt-2026-11-30
    hearsay publish download gh://ORG/REPO@ckpt-2026-11-30 --dest ckpt/ --sums-sha256 HEX
    hearsay publish upload demo_out/export --to /mnt/releases/demo-2026-11-30    # a folder
    hearsay publish upload runs/full/final --to hf://ORG/REPO@ckpt-2026-11-30   # HF_TOKEN set

A published checkpoint is a flat folder of files plus SHA256SUMS (sha256sum's format) made at
upload. `upload` prints the sha256 of that SHA256SUMS: pin it, and `download --sums-sha256` refuses
a release whose manifest is not the pinned one. `download` fetches SHA256SUMS, then every file it
lists into DEST.partial/, checks each sha256, and only then renames DEST.partial to DEST:
nothing unverified is ever at DEST. Without --sums-sha256 the files are checked only against the
release's own SHA256SUMS (damage in transit, not a release whose files and SHA256SUMS were both
replaced): the download says so on stderr and exits 4, never 0.

Remotes (--to / REMOTE):
  gh://OWNER/REPO@TAG  a GitHub release (private when the repository is); token from
                       $GITHUB_TOKEN, API root $GITHUB_API_URL (default https://api.github.com).
                       The token goes to the API host (and the upload host it names) only,
                       never along a redirect to another host (asset storage).
                       A release that already has assets is refused: a checkpoint is immutable.
  PATH or file://PATH  a local folder "release" (a mounted share, a bucket mirror).
  hf://OWNER/REPO[@REVISION]
                       a private Hugging Face Hub model repo (hearsay.publish.hf): token from
                       $HF_TOKEN (required), endpoint $HF_ENDPOINT (default
                       https://huggingface.co). Upload: REVISION is a branch (default main),
                       everything goes up in one commit, a public repo or a branch already
                       holding files is refused; the commit id is printed (download from
                       hf://OWNER/REPO@COMMIT to pin it). Download: a branch, tag or commit.
                       Big files go by xet (hf_xet is installed) unless HF_HUB_DISABLE_XET=1
                       (then git-LFS); only the LFS path is tested, against a fake Hub.

Exit codes: 0 done (and verified against the pinned --sums-sha256), 1 verification failed (sha
mismatch, file missing from the release, manifest not the pinned one), 2 usage, 3 remote error
(not found, auth or no token, HTTP failure, release not empty, public hf:// repo), 4 downloaded
without --sums-sha256: consistent with the release's own SHA256SUMS, NOT verified against a pin.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from hearsay.publish.remotes import FolderRemote, GitHubRemote, RemoteError, VerifyError
from hearsay.util import hashing
from hearsay.util.hashing import SUMS, sha256_file

REMOTES = "gh://OWNER/REPO@TAG, hf://OWNER/REPO[@REVISION], file://PATH or PATH"
EXIT_OK, EXIT_VERIFY, EXIT_USAGE, EXIT_REMOTE, EXIT_UNPINNED = 0, 1, 2, 3, 4  # module docstring


def parse_sums(text: str) -> dict[str, str]:
    """SHA256SUMS text (it came over the network) -> {name: hex}; names must be flat and safe."""
    try:
        return hashing.parse_sums(text, source=SUMS)
    except hashing.SumsError as e:
        raise VerifyError(str(e)) from None


def make_sums(folder: Path) -> str:
    """SHA256SUMS for every file in `folder` (flat; sub-folders refused)."""
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder (publish takes a flat folder of files)")
    sums = {}
    for path in sorted(folder.iterdir()):
        if path.name == SUMS:
            continue
        if not path.is_file() or not hashing.SAFE_NAME.fullmatch(path.name):
            raise ValueError(f"{path}: publish takes a flat folder of plainly named files "
                             "(move sub-folders out or publish them separately)")
        sums[path.name] = sha256_file(path)
    if not sums:
        raise ValueError(f"{folder} has no files to publish")
    return hashing.format_sums(sums)


def remote_for(uri: str):
    """Remote URI -> backend (see the module docstring)."""
    if uri.startswith("gh://"):
        m = re.fullmatch(r"gh://([\w.-]+)/([\w.-]+)@([\w.+-]+)", uri)
        if not m:
            raise ValueError(f"{uri!r}: want gh://OWNER/REPO@TAG")
        return GitHubRemote(*m.groups(), api=os.environ.get("GITHUB_API_URL",
                                                            "https://api.github.com"),
                            token=os.environ.get("GITHUB_TOKEN"))
    if uri.startswith("hf://"):
        # huggingface_hub 1.33 otherwise fetches $HF_ENDPOINT/api/agent-harnesses for its
        # User-Agent; read once, at its import (still on if something imported it earlier).
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        from hearsay.publish.hf import HubRemote  # imports huggingface_hub: only when asked for

        return HubRemote.from_uri(uri)
    if "://" in uri and not uri.startswith("file://"):
        raise ValueError(f"{uri!r}: unknown remote ({REMOTES})")
    return FolderRemote(Path(uri.removeprefix("file://")))


# --------------------------------------------------------------------------- library calls


def upload(folder: Path, uri: str) -> str:
    """Publish every file of `folder` + SHA256SUMS; returns the sha256 of SHA256SUMS."""
    sums_text = make_sums(folder)
    remote = remote_for(uri)
    remote.check_empty()
    with tempfile.TemporaryDirectory(prefix="hearsay-publish-") as tmp:
        staging = Path(tmp) / SUMS
        staging.write_text(sums_text)
        files = [(name, folder / name) for name in parse_sums(sums_text)]
        # SHA256SUMS last: a release with its manifest is a complete one (hf://: one commit)
        remote.upload_all(files + [(SUMS, staging)])
    return hashlib.sha256(sums_text.encode()).hexdigest()


def download(uri: str, dest: Path, sums_sha256: str | None = None) -> dict[str, str]:
    """Fetch and verify into DEST.partial, then rename to `dest`; returns {name: sha256}."""
    if dest.exists():
        raise ValueError(f"{dest} exists (download into a new folder)")
    remote = remote_for(uri)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        remote.download(SUMS, partial / SUMS)
        got = sha256_file(partial / SUMS)
        if sums_sha256 and got != sums_sha256:
            raise VerifyError(f"{SUMS} of {uri} has sha256 {got}, not the pinned {sums_sha256}")
        sums = parse_sums((partial / SUMS).read_text())
        for name, want in sums.items():
            remote.download(name, partial / name)
            have = sha256_file(partial / name)
            if have != want:
                raise VerifyError(f"{name}: sha256 {have} does not match {SUMS} ({want})")
        os.replace(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return sums


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay publish", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    up = sub.add_parser("upload", help="publish a flat folder (checkpoint or model folder)")
    up.add_argument("folder", type=Path)
    up.add_argument("--to", required=True, help=REMOTES)
    down = sub.add_parser(
        "download", help="fetch a release and verify every sha256",
        description="Fetch a release into DEST (via DEST.partial) and verify every sha256. Exit "
                    "codes: 0 verified against --sums-sha256, 1 verification failed, 2 usage, "
                    "3 remote error, 4 downloaded without --sums-sha256 (matches the release's "
                    "own SHA256SUMS only: NOT verified against a pin).")
    down.add_argument("remote", help=REMOTES)
    down.add_argument("--dest", type=Path, required=True, help="new folder to create")
    down.add_argument("--sums-sha256", help="pinned sha256 of the release's SHA256SUMS (what "
                      "upload printed); without it nothing is verified against a pin (exit 4)")
    args = ap.parse_args(argv)
    try:
        if args.verb == "upload":
            digest = upload(args.folder, args.to)
            print(f"published {args.folder} -> {args.to}; SHA256SUMS sha256 {digest} (pin it)")
        else:
            sums = download(args.remote, args.dest, args.sums_sha256)
            if not args.sums_sha256:
                got = sha256_file(args.dest / SUMS)
                print(f"downloaded {len(sums)} files from {args.remote} -> {args.dest}: they match "
                      f"the release's own {SUMS} (sha256 {got}), NOT verified against a pin")
                print(f"hearsay publish: WARNING: nothing was verified against a pin: a release "
                      f"whose files and {SUMS} were both replaced passes this check (pass "
                      f"--sums-sha256 with the digest upload printed); exit {EXIT_UNPINNED}",
                      file=sys.stderr)
                return EXIT_UNPINNED
            print(f"downloaded {len(sums)} files from {args.remote} -> {args.dest}, all verified "
                  f"against the pinned {SUMS} sha256")
    except ValueError as err:
        print(f"hearsay publish: {err}", file=sys.stderr)
        return EXIT_USAGE
    except VerifyError as err:
        print(f"hearsay publish: verification failed: {err}", file=sys.stderr)
        return EXIT_VERIFY
    except RemoteError as err:
        print(f"hearsay publish: remote error: {err}", file=sys.stderr)
        return EXIT_REMOTE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
