"""The publish remotes without a client library: a local folder and a GitHub release, and the
errors every remote raises (hearsay.publish.hf raises them too).

    from hearsay.publish.remotes import FolderRemote
    FolderRemote(Path("/mnt/releases/demo")).upload_all([("model.onnx", path), ...])
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path


class RemoteError(Exception):
    """The remote answered an error or cannot be reached (exit 3)."""


class VerifyError(Exception):
    """What came back is not what was published (exit 1)."""


# --------------------------------------------------------------------------- backends


class OneByOne:
    """Backends without commits: files go up one at a time, SHA256SUMS last (the caller's order)."""

    def upload_all(self, files: list[tuple[str, Path]]) -> None:
        for name, path in files:
            self.upload(name, path)


class FolderRemote(OneByOne):
    """A local folder as a release: files copied in, read back from it."""

    def __init__(self, root: Path):
        self.root = root

    def upload(self, name: str, path: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, self.root / name)

    def check_empty(self) -> None:
        if self.root.exists() and any(self.root.iterdir()):
            raise RemoteError(f"{self.root} is not empty (a release is immutable: use a new one)")

    def download(self, name: str, dest: Path) -> None:
        src = self.root / name
        if not src.is_file():
            raise VerifyError(f"{src} is missing from the release")
        shutil.copyfile(src, dest)


def _origin(url: str) -> tuple[str, str]:
    """(scheme, host:port) of a URL: what "the same host" means for the token."""
    u = urllib.parse.urlsplit(url)
    return u.scheme.lower(), (u.netloc.rpartition("@")[2]).lower()


class _TokenStaysHome(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, except that a redirect to another host loses the Authorization
    header: GitHub answers an asset download with a 302 to a pre-signed storage URL, and urllib
    would otherwise copy the token onto the request to that host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_TokenStaysHome)


@dataclass
class GitHubRemote(OneByOne):
    """A GitHub release, through the REST API (urllib; no client library). The token goes only
    to the API host and to the upload host the API names; never along a redirect elsewhere."""

    owner: str
    repo: str
    tag: str
    api: str = "https://api.github.com"
    token: str | None = None

    def _request(self, method: str, url: str, body: bytes | None = None,
                 headers: dict | None = None, ok_404: bool = False):
        home = {_origin(self.api), *getattr(self, "_upload_origins", ())}
        auth = self.token and _origin(url) in home
        req = urllib.request.Request(url, data=body, method=method, headers={
            "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
            **({"Authorization": f"Bearer {self.token}"} if auth else {}),
            **(headers or {})})
        try:
            with _OPENER.open(req, timeout=120) as resp:
                return resp.read()
        except urllib.error.HTTPError as err:
            if ok_404 and err.code == 404:
                return None
            detail = err.read()[:300].decode("utf-8", "replace")
            hint = " (set GITHUB_TOKEN with contents:write)" if err.code in (401, 403) else ""
            raise RemoteError(f"{method} {url}: HTTP {err.code} {detail}{hint}") from None
        except urllib.error.URLError as err:
            raise RemoteError(f"{method} {url}: {err.reason}") from None

    def _base(self) -> str:
        return f"{self.api.rstrip('/')}/repos/{self.owner}/{self.repo}"

    def release(self, create: bool = False) -> dict:
        raw = self._request("GET", f"{self._base()}/releases/tags/{self.tag}", ok_404=True)
        if raw is not None:
            return json.loads(raw)
        if not create:
            raise RemoteError(f"no release {self.tag} in {self.owner}/{self.repo}")
        body = json.dumps({"tag_name": self.tag, "name": self.tag, "draft": False,
                           "prerelease": True, "body": "hearsay checkpoint"}).encode()
        return json.loads(self._request("POST", f"{self._base()}/releases", body,
                                        {"Content-Type": "application/json"}))

    def check_empty(self) -> None:
        self._rel = self.release(create=True)
        if self._rel.get("assets"):
            raise RemoteError(f"release {self.tag} already has assets (a checkpoint release is "
                              "immutable: publish under a new tag)")

    def upload(self, name: str, path: Path) -> None:
        rel = getattr(self, "_rel", None) or self.release(create=True)
        url = rel["upload_url"].split("{")[0] + "?" + urllib.parse.urlencode({"name": name})
        self._upload_origins = {_origin(url)}  # uploads.github.com: named by the API itself
        self._request("POST", url, path.read_bytes(),
                      {"Content-Type": "application/octet-stream"})

    def download(self, name: str, dest: Path) -> None:
        assets = {a["name"]: a for a in self.release().get("assets", [])}
        if name not in assets:
            raise VerifyError(f"{name} is missing from release {self.tag}")
        data = self._request("GET", assets[name]["url"],
                             headers={"Accept": "application/octet-stream"})
        dest.write_bytes(data)
