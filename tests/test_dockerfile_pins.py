"""Static checks on container/score/Dockerfile that need no container engine (they run in CI even
where podman is missing): the default base is pinned by digest, and the image is non-root."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[1] / "container/score/Dockerfile"


def default_base() -> str:
    m = re.search(r"^ARG BASE=(\S+)$", DOCKERFILE.read_text(), flags=re.M)
    assert m, "container/score/Dockerfile has no `ARG BASE=` default"
    return m.group(1)


def test_default_base_is_a_python311_slim_image_pinned_by_a_real_digest_shape():
    base = default_base()
    # name:tag@sha256:<64 lowercase hex>: a tag alone can move; a digest cannot
    assert re.fullmatch(r"[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}", base), base
    # the context's wheels are cp311 (requirements.lock was made under python 3.11)
    assert ":3.11" in base and "bookworm" in base, base


def test_every_stage_starts_from_the_pinned_base_and_the_image_runs_as_non_root():
    text = DOCKERFILE.read_text()
    froms = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert froms and all(f == "${BASE}" for f in froms), froms
    users = re.findall(r"^USER (\S+)", text, flags=re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root"), users
