"""A fake Hugging Face Hub on loopback: the routes huggingface_hub 1.33.0 calls for hearsay publish.

    hub = FakeHub(token="t", lfs_threshold=64 * 1024).start()
    os.environ["HF_ENDPOINT"] = hub.url   # hearsay reads HF_ENDPOINT per call
    ...                                   # (the client's own constants.ENDPOINT is fixed at import)
    hub.stop()

    python tests/fakes/fake_hf_hub.py --token T     # by hand: prints its URL, Ctrl-C stops it

Standard library only. It speaks the protocol as the client source shows it (hf_api.py,
_commit_api.py, lfs.py, file_download.py, utils/_http.py of 1.33.0); the real Hub has not been
reached from here, so where the Hub's own answer could not be read off the client the fake's
shape is marked "(fake's choice)". Routes, as client call: route -> answer:

- create_repo: POST /api/repos/create {name, organization, visibility} -> 200 {url};
  409 {error, url} if it exists (the client reads url from the 409 too).
- model_info: GET /api/models/O/R[/revision/REV] -> {id, sha, private, siblings: [{rfilename}]}.
- create_branch: POST /api/models/O/R/branch/B {startingPoint?} -> 200 {}; 409 if it exists.
- create_commit, 1: POST /api/models/O/R/preupload/REV {files: [{path, sample, size}]} ->
  {files: [{path, uploadMode, shouldIgnore, oid}]}: "lfs" when size >= lfs_threshold, else
  "regular" (the Hub decides by .gitattributes and size; the threshold stands in for both).
- create_commit, 2 (lfs files only): POST /O/R.git/info/lfs/objects/batch, the git-LFS batch
  API -> transfer "basic", per object actions.upload.href (a signed storage URL) and
  actions.verify; an object already stored gets no actions (the client skips it).
- LFS basic transfer: PUT STORAGE/_storage/SHA256?sig=… with no Authorization (like S3) -> 200;
  the body may come chunked.
- LFS verify: POST /O/R.git/info/lfs/objects/verify {oid, size} -> 200 if what was PUT has that
  sha256 and size, else 422 (fake's choice).
- create_commit, 3: POST /api/models/O/R/commit/REV, NDJSON lines header {summary,
  parentCommit?}, file {path, content (base64)}, lfsFile {path, oid, size} -> {commitOid,
  commitUrl, success}; 412 if parentCommit is not the branch head (fake's choice of code).
- hf_hub_download, metadata: HEAD /O/R/resolve/REV/PATH -> regular file: 200, ETag (git blob
  sha1), X-Repo-Commit, Content-Length; LFS file: 302, Location (storage), X-Linked-Etag
  (sha256), X-Linked-Size, X-Repo-Commit.
- hf_hub_download, content: GET the same URL (regular) or the Location (LFS; the client sends
  it without Authorization) -> the bytes.
- the User-Agent builder: GET /api/agent-harnesses (no token) -> an empty registry, counted in
  `agent_registry_calls`. 1.33 fetches it from constants.ENDPOINT (HF_ENDPOINT at import, else
  huggingface.co) once a day per HF_HOME unless HF_HUB_DISABLE_TELEMETRY or HF_HUB_OFFLINE.

Errors carry the headers hf_raise_for_status reads: X-Error-Code RepoNotFound / RevisionNotFound /
EntryNotFound (404), and a 401 for a missing token (X-Error-Code RepoNotFound, as the Hub answers
for a private repo) or a wrong one (X-Error-Message "Invalid credentials in Authorization
header"). Every Hub route needs `Authorization: Bearer TOKEN`, reads included: repos are private
here. A new repo gets an initial commit holding .gitattributes, as on the Hub.

Storage lives on a second host name, http://localhost:PORT (the API is http://127.0.0.1:PORT):
the client follows a HEAD redirect only to the same host, and strips Authorization when the
download URL is on another host, as with the Hub's CDN. Signed URLs are checked by `sig`; any
Authorization header reaching storage is counted in `auth_to_storage` (must stay 0).

Xet is not implemented. In 1.33 the client *uploads* through xet whenever `is_xet_available()`:
the hf_xet package is importable (it is: requirements.lock pins it) and
`huggingface_hub.constants.HF_HUB_DISABLE_XET` is false. That constant is read from the
HF_HUB_DISABLE_XET environment variable when huggingface_hub is first imported, so tests set the
constant itself (monkeypatch) or the variable before any import. A *download* goes through xet
only when the HEAD answer carries X-Xet-Hash plus a `Link: <…>; rel="xet-auth"` (or
X-Xet-Refresh-Route) header; the fake never sends them. The xet token routes
(GET /api/models/O/R/xet-{read,write}-token/REV) answer 501 and are counted in `xet_attempts`.
Anything else answers 404 and is listed in `unknown` (must stay empty).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GITATTRIBUTES = (b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
                 b"*.bin filter=lfs diff=lfs merge=lfs -text\n")


def git_blob_sha1(data: bytes) -> str:
    """git's object id of a blob (what the Hub puts in ETag for a regular file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Entry:
    """One file in a commit: regular (bytes in Repo.blobs) or LFS (bytes in FakeHub.lfs)."""

    size: int
    blob_oid: str                 # git sha1 of the content (regular) or of the LFS pointer
    lfs_sha256: str | None = None


@dataclass
class Repo:
    private: bool
    refs: dict[str, str] = field(default_factory=dict)                # branch -> commit oid
    tags: dict[str, str] = field(default_factory=dict)                # tag -> commit oid
    commits: dict[str, dict[str, Entry]] = field(default_factory=dict)  # oid -> {path: Entry}
    blobs: dict[str, bytearray] = field(default_factory=dict)         # blob oid -> content

    def resolve(self, rev: str) -> str | None:
        """Branch, tag or full commit oid -> commit oid (None if unknown)."""
        return self.refs.get(rev) or self.tags.get(rev) or (rev if rev in self.commits else None)


class FakeHub:
    """The Hub's state in memory, served by a ThreadingHTTPServer on 127.0.0.1."""

    def __init__(self, token: str = "fake-hf-token", lfs_threshold: int = 64 * 1024):
        self.token = token
        self.lfs_threshold = lfs_threshold   # bytes: files at least this big are told "lfs"
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytearray] = {}  # sha256 -> content, once verified
        self.pending: dict[str, bytearray] = {}  # sha256 -> content PUT but not verified yet
        self.sigs: dict[str, str] = {}       # sha256 -> signature of its storage URL
        self.requests: list[str] = []        # "METHOD /path" (no headers, no query)
        self.unknown: list[str] = []
        self.xet_attempts = 0
        self.agent_registry_calls = 0
        self.auth_to_storage = 0
        self.commits_made = 0                # commits through the API (not the initial ones)
        self.damage_puts = 0                 # flip a byte of the next N storage PUTs (transit)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self.storage = f"http://localhost:{port}"

    def start(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ state helpers for tests

    def create_repo(self, repo_id: str, private: bool = True) -> Repo:
        """A new repo whose initial commit holds .gitattributes, as the Hub makes it."""
        repo = Repo(private=private)
        oid = git_blob_sha1(GITATTRIBUTES)
        repo.blobs[oid] = bytearray(GITATTRIBUTES)
        files = {".gitattributes": Entry(len(GITATTRIBUTES), oid)}
        repo.refs["main"] = self._new_commit(repo, files, "initial commit", None)
        self.repos[repo_id] = repo
        return repo

    def files(self, repo_id: str, rev: str = "main") -> dict[str, Entry]:
        repo = self.repos[repo_id]
        return repo.commits[repo.resolve(rev)]

    def content(self, repo_id: str, path: str, rev: str = "main") -> bytearray:
        """The stored bytes of a file (mutable: tests tamper with them in place)."""
        entry = self.files(repo_id, rev)[path]
        if entry.lfs_sha256:
            return self.lfs[entry.lfs_sha256]
        return self.repos[repo_id].blobs[entry.blob_oid]

    def tamper(self, repo_id: str, path: str, at: int = 0, rev: str = "main") -> None:
        """Flip one byte of a stored file, size unchanged (bit rot, or a hostile mirror)."""
        self.content(repo_id, path, rev)[at] ^= 0xFF

    def commit_file(self, repo_id: str, path: str, data: bytes, branch: str = "main") -> str:
        """Someone else's commit: `path` (inline) := `data` on `branch`; returns the commit id."""
        repo = self.repos[repo_id]
        oid = git_blob_sha1(data)
        repo.blobs[oid] = bytearray(data)
        files = {**repo.commits[repo.refs[branch]], path: Entry(len(data), oid)}
        repo.refs[branch] = self._new_commit(repo, files, f"edit {path}", repo.refs[branch])
        return repo.refs[branch]

    def _new_commit(self, repo: Repo, files: dict[str, Entry], summary: str,
                    parent: str | None) -> str:
        listing = json.dumps([parent, summary, sorted((p, e.blob_oid) for p, e in files.items()),
                              len(repo.commits)]).encode()
        oid = hashlib.sha1(listing).hexdigest()
        repo.commits[oid] = dict(files)
        return oid


def _make_handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet; hub.requests is the log
            pass

        # ---------------------------------------------------------------- plumbing

        def _send(self, code: int, body: bytes | dict | None = None, headers: dict | None = None):
            data = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
            self.send_response(code)
            hdrs = {"Content-Type": "application/json", "Content-Length": str(len(data)),
                    **(headers or {})}
            for k, v in hdrs.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _error(self, code: int, message: str, error_code: str | None = None,
                   headers: dict | None = None):
            hdrs = {"X-Error-Message": message, **(headers or {})}
            if error_code:
                hdrs["X-Error-Code"] = error_code
            self._send(code, {"error": message}, hdrs)

        def _body(self) -> bytes:
            """The request body, Content-Length or chunked (httpx streams a file object chunked)."""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()  # CRLF after each chunk
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _authorised(self) -> bool:
            got = self.headers.get("Authorization")
            if got is None:
                self._error(401, "Repository not found", "RepoNotFound")
                return False
            if got != f"Bearer {hub.token}":
                self._error(401, "Invalid credentials in Authorization header")
                return False
            return True

        def _repo(self, repo_id: str) -> Repo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "Repository not found", "RepoNotFound")
            return repo

        def _repo_at(self, repo_id: str, rev: str) -> tuple[Repo, str] | None:
            """(repo, commit id of rev), or None after answering 404 (no such repo or rev)."""
            repo = self._repo(repo_id)
            if repo is None:
                return None
            oid = repo.resolve(rev)
            if oid is None:
                self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
                return None
            return repo, oid

        def _dispatch(self):
            url = urllib.parse.urlsplit(self.path)
            parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
            query = urllib.parse.parse_qs(url.query)
            hub.requests.append(f"{self.command} {url.path}")
            host = (self.headers.get("Host") or "").split(":")[0]
            try:
                with hub.lock:
                    if parts[0] == "_storage":
                        return self._storage(host, parts, query)
                    if host == "localhost":
                        return self._error(404, "storage serves /_storage only")
                    if self.command == "GET" and parts == ["api", "agent-harnesses"]:
                        hub.agent_registry_calls += 1  # public on the Hub: no token needed
                        return self._send(200, {"standardEnvVars": [], "harnesses": {}})
                    route = self._route(parts)
                    if route is None:
                        hub.unknown.append(f"{self.command} {url.path}")
                        return self._error(404, f"fake_hf_hub does not model {url.path}")
                    if not self._authorised():
                        return
                    handler, args = route
                    return handler(*args)
            except Exception as err:  # noqa: BLE001 - a fake bug answers 500 and shows itself
                hub.unknown.append(f"{self.command} {url.path}: fake bug {err!r}")
                return self._error(500, f"fake bug: {err!r}")

        do_GET = do_HEAD = do_POST = do_PUT = _dispatch

        def _route(self, p: list[str]):
            """Path segments -> (handler, args) for the Hub routes, None if not modelled."""
            m, n = self.command, len(p)
            if m == "POST" and p == ["api", "repos", "create"]:
                return self.create_repo, ()
            if n >= 4 and p[:2] == ["api", "models"]:
                rid, rest = f"{p[2]}/{p[3]}", p[4:]
                if m == "GET" and not rest:
                    return self.model_info, (rid, "main")
                if m == "GET" and len(rest) == 2 and rest[0] == "revision":
                    return self.model_info, (rid, rest[1])
                if m == "POST" and len(rest) == 2 and rest[0] == "branch":
                    return self.create_branch, (rid, rest[1])
                if m == "POST" and len(rest) == 2 and rest[0] == "preupload":
                    return self.preupload, (rid, rest[1])
                if m == "POST" and len(rest) == 2 and rest[0] == "commit":
                    return self.commit, (rid, rest[1])
                if m == "GET" and rest and re.fullmatch(r"xet-(read|write)-token", rest[0]):
                    return self.xet_token, ()
            if n == 6 and p[1].endswith(".git") and p[2:5] == ["info", "lfs", "objects"]:
                rid = f"{p[0]}/{p[1].removesuffix('.git')}"
                if m == "POST" and p[5] == "batch":
                    return self.lfs_batch, (rid,)
                if m == "POST" and p[5] == "verify":
                    return self.lfs_verify, (rid,)
            if m in ("GET", "HEAD") and n >= 5 and p[2] == "resolve":
                return self.resolve, (f"{p[0]}/{p[1]}", p[3], "/".join(p[4:]))
            return None

        # ---------------------------------------------------------------- Hub API

        def create_repo(self):
            req = json.loads(self._body())
            rid = f"{req.get('organization') or 'fake-user'}/{req['name']}"
            if rid in hub.repos:  # the client reads "url" from this 409 too (exist_ok=True)
                msg = "You already created this model repo"
                return self._send(409, {"error": msg, "url": f"{hub.url}/{rid}"},
                                  {"X-Error-Message": msg})
            hub.create_repo(rid, private=req.get("visibility") == "private")
            self._send(200, {"url": f"{hub.url}/{rid}", "name": rid, "id": rid})

        def model_info(self, rid: str, rev: str):
            if (found := self._repo_at(rid, rev)) is None:
                return
            repo, oid = found
            siblings = [{"rfilename": path} for path in sorted(repo.commits[oid])]
            self._send(200, {"id": rid, "author": rid.split("/")[0], "sha": oid,
                             "private": repo.private, "siblings": siblings,
                             "lastModified": "2026-12-01T00:00:00.000Z"})

        def create_branch(self, rid: str, branch: str):
            req = json.loads(self._body() or b"{}")
            repo = self._repo(rid)
            if repo is None:
                return
            if branch in repo.refs:
                return self._error(409, f"Reference already exists: refs/heads/{branch}")
            start = repo.resolve(req.get("startingPoint") or "main")
            if start is None:
                return self._error(404, "Invalid startingPoint", "RevisionNotFound")
            repo.refs[branch] = start
            self._send(200, {})

        def preupload(self, rid: str, rev: str):
            req = json.loads(self._body())
            if (found := self._repo_at(rid, rev)) is None:
                return
            repo, head = found
            files = []
            for f in req["files"]:
                mode = "lfs" if f["size"] >= hub.lfs_threshold else "regular"
                have = repo.commits[head].get(f["path"])
                oid = None if have is None else (have.lfs_sha256 or have.blob_oid)
                files.append({"path": f["path"], "uploadMode": mode, "shouldIgnore": False,
                              "oid": oid})
            self._send(200, {"files": files, "commitOid": head})

        def lfs_batch(self, rid: str):
            req = json.loads(self._body())
            if self._repo(rid) is None:
                return
            assert req["operation"] == "upload" and "basic" in req["transfers"], req
            objects = []
            for obj in req["objects"]:
                oid, size = obj["oid"], obj["size"]
                if oid in hub.lfs:  # already stored: no actions, the client skips it
                    objects.append({"oid": oid, "size": size})
                    continue
                sig = hub.sigs.setdefault(oid, secrets.token_hex(8))
                objects.append({"oid": oid, "size": size, "authenticated": True, "actions": {
                    "upload": {"href": f"{hub.storage}/_storage/{oid}?sig={sig}"},
                    "verify": {"href": f"{hub.url}/{rid}.git/info/lfs/objects/verify",
                               "header": {}}}})
            self._send(200, {"transfer": "basic", "objects": objects},
                       {"Content-Type": "application/vnd.git-lfs+json"})

        def lfs_verify(self, rid: str):
            req = json.loads(self._body())
            data = hub.pending.get(req["oid"])
            if (data is None or hashlib.sha256(data).hexdigest() != req["oid"]
                    or len(data) != req["size"]):
                return self._error(422, f"object {req['oid']} was not uploaded intact")
            hub.lfs[req["oid"]] = hub.pending.pop(req["oid"])
            self._send(200, {})

        def commit(self, rid: str, rev: str):
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            repo = self._repo(rid)
            if repo is None:
                return
            if rev not in repo.refs:
                return self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            header = lines[0]["value"]
            head = repo.refs[rev]
            if header.get("parentCommit") not in (None, head):
                return self._error(412, "A commit has happened since. Please refresh and try "
                                        "again.")
            files = dict(repo.commits[head])
            for item in lines[1:]:
                key, val = item["key"], item["value"]
                if key == "file":
                    data = base64.b64decode(val["content"])
                    oid = git_blob_sha1(data)
                    repo.blobs[oid] = bytearray(data)
                    files[val["path"]] = Entry(len(data), oid)
                elif key == "lfsFile":
                    stored = hub.lfs.get(val["oid"])
                    if stored is None or len(stored) != val["size"]:
                        return self._error(400, f"LFS object {val['oid']} was not uploaded")
                    pointer = ("version https://git-lfs.github.com/spec/v1\n"
                               f"oid sha256:{val['oid']}\nsize {val['size']}\n").encode()
                    files[val["path"]] = Entry(val["size"], git_blob_sha1(pointer), val["oid"])
                elif key == "deletedFile":
                    files.pop(val["path"], None)
                else:
                    return self._error(400, f"fake_hf_hub does not model commit key {key!r}")
            repo.refs[rev] = oid = hub._new_commit(repo, files, header["summary"], head)
            hub.commits_made += 1
            self._send(200, {"success": True, "commitOid": oid,
                             "commitUrl": f"{hub.url}/{rid}/commit/{oid}", "hookOutput": ""})

        def xet_token(self):
            hub.xet_attempts += 1
            self._error(501, "fake_hf_hub does not implement xet: set HF_HUB_DISABLE_XET=1 "
                             "before huggingface_hub is imported")

        def resolve(self, rid: str, rev: str, path: str):
            if (found := self._repo_at(rid, rev)) is None:
                return
            repo, oid = found
            entry = repo.commits[oid].get(path)
            if entry is None:
                return self._error(404, f"{path} does not exist at {rev}", "EntryNotFound",
                                   {"X-Repo-Commit": oid})
            if entry.lfs_sha256:
                sha = entry.lfs_sha256
                sig = hub.sigs.setdefault(sha, secrets.token_hex(8))
                return self._send(302, b"", {
                    "Location": f"{hub.storage}/_storage/{sha}?sig={sig}",
                    "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(entry.size),
                    "ETag": f'"{entry.blob_oid}"', "X-Repo-Commit": oid})
            data = bytes(repo.blobs[entry.blob_oid])
            self._send(200, data, {"Content-Type": "application/octet-stream",
                                   "ETag": f'"{entry.blob_oid}"', "X-Repo-Commit": oid})

        # ---------------------------------------------------------------- storage (the "CDN"/S3)

        def _storage(self, host: str, parts: list[str], query: dict):
            if self.headers.get("Authorization") is not None:
                hub.auth_to_storage += 1
            sha = parts[1] if len(parts) == 2 else ""
            if host != "localhost" or query.get("sig", [""])[0] != hub.sigs.get(sha, "-"):
                return self._error(403, "bad signature")
            if self.command == "PUT":
                hub.pending[sha] = bytearray(self._body())
                if hub.damage_puts > 0:
                    hub.damage_puts -= 1
                    hub.pending[sha][0] ^= 0xFF
                return self._send(200, b"", {"ETag": f'"{sha}"'})
            if self.command == "GET" and sha in hub.lfs:
                return self._send(200, bytes(hub.lfs[sha]),
                                  {"Content-Type": "application/octet-stream"})
            self._error(404, "no such object")

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--token", default="fake-hf-token", help="the one accepted bearer token")
    ap.add_argument("--lfs-threshold", type=int, default=64 * 1024,
                    help="files of at least this many bytes are told to go by LFS")
    args = ap.parse_args(argv)
    hub = FakeHub(args.token, args.lfs_threshold)
    print(hub.url, flush=True)
    try:
        hub.server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
