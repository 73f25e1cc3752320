"""`hf://OWNER/REPO[@REVISION]`: hearsay publish's Hugging Face Hub backend (huggingface_hub).

    export HF_TOKEN=…      # never on a command line; hearsay never prints it
    hearsay publish upload runs/full/final --to hf://acme/hearsay-ckpt@ckpt-2026-11-30
    hearsay publish download hf://acme/hearsay-ckpt@COMMIT --dest ckpt/ --sums-sha256 HEX

The URI is the client's own `hf://[TYPE/]ID[@REVISION][/PATH]` grammar narrowed to a model repo
and no path: OWNER/REPO, then optionally @REVISION (letters, digits, `._+-`; no `/`).

Upload: REVISION is a branch (default `main`). The repo is created private if missing (a public
repo is refused); a branch other than main is created from main's head if missing, so keep main
empty when you publish each checkpoint to its own branch. A branch that already holds any file
besides the Hub's initial `.gitattributes` is refused: a published checkpoint is immutable. Every
file and SHA256SUMS go up in ONE commit whose parent is the head that was checked empty (a commit
that lands in between makes ours fail with 412 instead of mixing two checkpoints). The commit id
is printed on stderr: download from `hf://OWNER/REPO@COMMIT` to pin it.

Download: REVISION is a branch, tag or full commit id (default `main`), resolved once to a commit
so every file comes from that one commit. Each file goes through hf_hub_download into a scratch
cache inside DEST.partial and is moved out of it; `hearsay.publish.download` then checks every
sha256 against SHA256SUMS before DEST.partial becomes DEST.

Token: $HF_TOKEN, required (repos are private), handed to the client as an argument. Endpoint:
$HF_ENDPOINT (default https://huggingface.co), read at each call (the client's own copy of it is
fixed when huggingface_hub is imported; this one is not).

`hearsay publish` sets HF_HUB_DISABLE_TELEMETRY=1 (unless already set) before importing the
client: otherwise 1.33 fetches $HF_ENDPOINT/api/agent-harnesses (once a day, cached in $HF_HOME)
to build its User-Agent, a call the publication does not need.

Transport is the client's choice per file: "regular" (base64 inside the commit) or "lfs", as the
Hub's preupload answer says. An "lfs" file goes through xet when hf_xet is importable (the lock
pins it) unless HF_HUB_DISABLE_XET=1 was set before the process started; else through the git-LFS
batch API ("basic" transfer: a PUT to a signed URL, then verify). tests/test_publish_hf.py runs the
real client against tests/fakes/fake_hf_hub.py with xet disabled: the regular and LFS paths are
tested; xet and the real Hub have not been reached yet.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import (
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    XetDownloadError,
)

from hearsay.publish.remotes import RemoteError, VerifyError

DEFAULT_ENDPOINT = "https://huggingface.co"
URI = re.compile(r"hf://([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)(?:@([\w.+-]+))?")
REPO_TYPE_PREFIXES = {"models", "datasets", "spaces", "buckets", "kernels"}
HUB_FILES = {".gitattributes"}  # what the Hub puts in a new repo: not a publication
# What the client raises for a failed call: HTTP errors (HfHubHTTPError is an OSError), transport
# errors, hf_xet's ConnectionError, "Error while uploading" (RuntimeError), malformed answers.
CLIENT_ERRORS = (OSError, httpx.HTTPError, RuntimeError, ValueError, XetDownloadError)


@contextmanager
def hub_errors(uri: str):
    """Client exceptions -> RemoteError (exit 3), one line, with the fix for auth failures."""
    try:
        yield
    except CLIENT_ERRORS as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        text, cause = (" ".join(str(e).split()) for e in (err, err.__cause__ or ""))
        if cause and cause not in text:  # "Error while uploading X" wraps the HTTP error
            text += f" ({cause})"
        text = re.sub(r" For more information check: \S+", "", text)[:400]  # httpx's MDN link
        hint = ""
        if status in (401, 403) or isinstance(err, RepositoryNotFoundError):
            hint = (" (check HF_TOKEN: a token with write access to the repo's owner to upload, "
                    "read access to download; and the OWNER/REPO spelling)")
        raise RemoteError(f"{uri}: {type(err).__name__}: {text}{hint}") from None


@dataclass
class HubRemote:
    """A model repo on the Hub (or on $HF_ENDPOINT) as a publication."""

    repo_id: str
    revision: str | None = None   # None: main
    token: str = field(default="", repr=False)
    endpoint: str = DEFAULT_ENDPOINT
    _parent: str | None = field(default=None, repr=False)  # head checked empty (upload)
    _commit: str | None = field(default=None, repr=False)  # commit every download reads

    @classmethod
    def from_uri(cls, uri: str) -> HubRemote:
        m = URI.fullmatch(uri)
        if not m or m.group(1) in REPO_TYPE_PREFIXES:
            raise ValueError(f"{uri!r}: want hf://OWNER/REPO or hf://OWNER/REPO@REVISION "
                             "(a model repo; no type prefix, no path inside the repo)")
        token = os.environ.get("HF_TOKEN", "")
        if not token:
            raise RemoteError("HF_TOKEN is not set: export a Hugging Face token as HF_TOKEN (write "
                              "access to upload, read access to download; never pass it as an "
                              "argument)")
        endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
        return cls(f"{m.group(1)}/{m.group(2)}", m.group(3), token, endpoint.rstrip("/"))

    @property
    def uri(self) -> str:
        return f"hf://{self.repo_id}" + (f"@{self.revision}" if self.revision else "")

    @property
    def branch(self) -> str:
        return self.revision or "main"

    def _api(self) -> HfApi:
        return HfApi(endpoint=self.endpoint, token=self.token, library_name="hearsay")

    # ---------------------------------------------------------------------- upload

    def check_empty(self) -> None:
        """Create the private repo (and branch) if missing; refuse a public or non-empty one."""
        if re.fullmatch(r"[0-9a-f]{40}", self.branch):
            raise ValueError(f"{self.uri}: upload takes a branch name after @, not a commit id")
        api = self._api()
        with hub_errors(self.uri):
            api.create_repo(self.repo_id, private=True, exist_ok=True)
            if self.branch != "main":
                api.create_branch(self.repo_id, branch=self.branch, exist_ok=True)
            info = api.model_info(self.repo_id, revision=self.branch)
        if not info.private:
            raise RemoteError(f"{self.repo_id} is public: hearsay publishes checkpoints to private "
                              "repos only (make it private in its settings, or use a new name)")
        held = sorted(s.rfilename for s in info.siblings or [] if s.rfilename not in HUB_FILES)
        if held:
            raise RemoteError(f"{self.uri} already holds {', '.join(held[:4])}"
                              f"{' …' if len(held) > 4 else ''} (a published checkpoint is "
                              "immutable: publish to a new branch or repo)")
        self._parent = info.sha

    def upload_all(self, files: list[tuple[str, Path]]) -> None:
        """Every (name, path) in one commit on top of the head check_empty saw."""
        assert self._parent is not None, "check_empty() first: it pins the parent commit"
        ops = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path))
               for name, path in files]
        with hub_errors(self.uri):
            info = self._api().create_commit(
                self.repo_id, ops, revision=self.branch, parent_commit=self._parent,
                commit_message=f"hearsay publish: {len(files) - 1} files + SHA256SUMS")
        print(f"hearsay publish: commit {info.oid} on {self.uri}; pin downloads with "
              f"hf://{self.repo_id}@{info.oid}", file=sys.stderr)

    # ---------------------------------------------------------------------- download

    def download(self, name: str, dest: Path) -> None:
        """One file of the pinned commit -> dest (not verified here: publish.download does it)."""
        if self._commit is None:
            with hub_errors(self.uri):
                self._commit = self._api().model_info(self.repo_id, revision=self.branch).sha
        # Scratch cache beside dest (inside DEST.partial): same filesystem, so the move is a rename.
        with tempfile.TemporaryDirectory(prefix=".hf-cache-", dir=dest.parent) as cache:
            with hub_errors(self.uri):
                try:
                    got = hf_hub_download(self.repo_id, name, revision=self._commit,
                                          cache_dir=cache, token=self.token,
                                          endpoint=self.endpoint)
                except RemoteEntryNotFoundError:  # VerifyError is not a client error: passes
                    raise VerifyError(f"{name} is missing from {self.uri} "
                                      f"(commit {self._commit})") from None
            os.replace(os.path.realpath(got), dest)  # the blob, not the snapshot's symlink
