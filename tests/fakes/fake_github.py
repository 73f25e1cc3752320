"""A fake GitHub releases API on loopback, for hearsay.publish's gh:// remote.

Two hosts, as on GitHub: the API on 127.0.0.1 (api.github.com) answers an asset download with a
302 to a pre-signed URL on the storage host 127.0.0.2 (objects.githubusercontent.com). Storage,
like S3 with a pre-signed URL, refuses a request that also carries an Authorization header, and
records every header it was sent (`storage_auth`), so a token leaked along the redirect shows.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "test-token"
API_HOST, STORAGE_HOST = "127.0.0.1", "127.0.0.2"  # two hosts on loopback


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, code, body=b"", ctype="application/json", headers=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


class FakeGitHub:
    """Releases and assets in memory: {tag: release}, {asset id: bytes}."""

    def __init__(self):
        self.releases: dict[str, dict] = {}
        self.blobs: dict[int, bytes] = {}
        self.requests: list[str] = []  # "METHOD /path" on the API host
        self.storage_auth: list[str | None] = []  # Authorization of each storage request
        fake = self

        class Storage(_Handler):
            def do_GET(self):
                fake.storage_auth.append(self.headers.get("Authorization"))
                parts = urllib.parse.urlparse(self.path).path.strip("/").split("/")
                if self.headers.get("Authorization"):
                    return self._send(400, b"<Error>Only one auth mechanism allowed</Error>",
                                      "application/xml")
                if parts[:1] == ["storage"] and int(parts[1]) in fake.blobs:
                    return self._send(200, fake.blobs[int(parts[1])], "application/octet-stream")
                self._send(404, b"<Error>NoSuchKey</Error>", "application/xml")

        class Api(_Handler):
            def _authorised(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, b'{"message": "Bad credentials"}')
                    return False
                return True

            def do_GET(self):
                fake.requests.append(f"GET {self.path}")
                if not self._authorised():
                    return
                parts = urllib.parse.urlparse(self.path).path.strip("/").split("/")
                if parts[3:5] == ["releases", "tags"]:
                    rel = fake.releases.get(parts[5])
                    if rel is None:
                        return self._send(404, b'{"message": "Not Found"}')
                    return self._send(200, json.dumps(rel).encode())
                if parts[3:5] == ["releases", "assets"]:
                    assert self.headers.get("Accept") == "application/octet-stream"
                    return self._send(302, headers={
                        "Location": f"{fake.storage_url}/storage/{parts[5]}?X-Amz-Signature=s"})
                self._send(404, b'{"message": "Not Found"}')

            def do_POST(self):
                fake.requests.append(f"POST {self.path}")
                if not self._authorised():
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                url = urllib.parse.urlparse(self.path)
                parts = url.path.strip("/").split("/")
                if parts[0] == "repos" and parts[3:] == ["releases"]:
                    req = json.loads(body)
                    rid = len(fake.releases) + 1
                    rel = {"id": rid, "tag_name": req["tag_name"], "assets": [],
                           "upload_url": f"{fake.url}/uploads/repos/{parts[1]}/{parts[2]}/"
                                         f"releases/{rid}/assets{{?name,label}}"}
                    fake.releases[req["tag_name"]] = rel
                    return self._send(201, json.dumps(rel).encode())
                if parts[0] == "uploads":
                    name = urllib.parse.parse_qs(url.query)["name"][0]
                    rel = next(r for r in fake.releases.values() if r["id"] == int(parts[5]))
                    aid = len(fake.blobs) + 1
                    fake.blobs[aid] = body
                    asset = {"id": aid, "name": name, "size": len(body),
                             "url": f"{fake.url}/repos/{parts[2]}/{parts[3]}/releases/assets/{aid}"}
                    rel["assets"].append(asset)
                    return self._send(201, json.dumps(asset).encode())
                self._send(404, b'{"message": "Not Found"}')

        self.server = ThreadingHTTPServer((API_HOST, 0), Api)
        self.storage = ThreadingHTTPServer((STORAGE_HOST, 0), Storage)
        self.url = f"http://{API_HOST}:{self.server.server_address[1]}"
        self.storage_url = f"http://{STORAGE_HOST}:{self.storage.server_address[1]}"
        for srv in (self.server, self.storage):
            threading.Thread(target=srv.serve_forever, daemon=True).start()

    def shutdown(self) -> None:
        self.server.shutdown()
        self.storage.shutdown()

    def asset_id(self, tag: str, name: str) -> int:
        return next(a["id"] for a in self.releases[tag]["assets"] if a["name"] == name)
