"""Shared fixtures. Expensive ones are session-scoped and built once; tests must not modify them
(copy first: shutil.copytree(bundle.root, tmp_path / "b")).

* `small_demo_config` - a DemoDataConfig for a ~36-clip synthetic corpus of 1-3 s clips
  (5 inner groups = one per fold, 1 holdout group, 1 test group, 4 extra rows, no bad files).
* `demo_corpus`  -> Path of its manifest.csv (audio under the same folder).
* `demo_splits`  -> Path of its pinned fold file splits/demo.folds.json (+ SHA256SUMS beside it).
* `demo_bundle`  -> hearsay.bundle.Bundle built from both, with every codec copy (2 workers).
* `checkpoint`   -> a fresh flat checkpoint folder (1 MiB weights + config) for publish tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hearsay.demo.corpus import DemoDataConfig

SMALL_DEMO = DemoDataConfig(inner_groups=5, per_group=2, holdout_groups=1, test_groups=1,
                            extra_rows=4, min_s=1.0, max_s=3.0, bad_files=False)
SMALL_DEMO_SPLITS = {"holdout_families": ["phq"], "family_exclusion": {"0": ["smear"]}}


@pytest.fixture(scope="session")
def small_demo_config() -> DemoDataConfig:
    return SMALL_DEMO


@pytest.fixture(scope="session")
def small_demo_splits() -> dict:
    return SMALL_DEMO_SPLITS


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory):
    from hearsay.demo.corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("demo") / "corpus", SMALL_DEMO)


@pytest.fixture(scope="session")
def demo_splits(demo_corpus):
    from hearsay.contracts.folds import SplitsConfig, write_folds
    from hearsay.contracts.manifest import read_manifest

    cfg = SplitsConfig.from_dict(SMALL_DEMO_SPLITS)
    return write_folds(read_manifest(demo_corpus), cfg, demo_corpus.parent.parent / "splits",
                       "demo")


@pytest.fixture(scope="session")
def demo_bundle(demo_corpus, demo_splits):
    from hearsay.bundle.build import BundleConfig, build_bundle
    from hearsay.contracts.bundle import load_bundle

    out = demo_corpus.parent.parent / "bundle"
    build_bundle(demo_corpus, out, demo_splits, BundleConfig(workers=2), progress=False)
    return load_bundle(out)


# What `hearsay publish` tests publish (tests/publish/).
@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A flat checkpoint folder: binary weights + config (contents made in code)."""
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4096)  # 1 MiB, binary
    (folder / "config.json").write_text('{"model": {"hidden_size": 32}}\n')
    return folder
