"""hearsay score-run --overlap / --no-overlap: the flag reaches every fed scoring of the run
(hearsay.evaluate.score.run_fed) and the files are byte for byte the same either way."""

import pytest
from fakes.fake_runs import make_bundle, make_run

from hearsay.evaluate import score, score_run

RUN_FED = score.run_fed  # the real one, spied on below


@pytest.fixture
def full_run(tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path / "bundle", n_per_fold=2, n_holdout=4, n_test=4, n_probe=4)
    run = make_run(tmp_path / "full", job="full", seed=9)
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify=False: bundle)
    return tmp_path, bundle, run


def _scored(tmp_path, bundle, run, monkeypatch, flag: list[str]) -> tuple[dict, list]:
    """({file name: bytes}, [overlap of each run_fed call]) of one score-run."""
    seen = []

    def spy(det, fed, cfg, overlap=False):
        seen.append(overlap)
        return RUN_FED(det, fed, cfg, overlap)

    monkeypatch.setattr(score, "run_fed", spy)
    out = tmp_path / f"scores{'-'.join(flag)}"
    argv = ["--run", str(run), "--bundle", str(bundle.root), "--out", str(out), *flag]
    assert score_run.main(argv) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}, seen


def test_overlap_flag_reaches_every_fed_scoring_and_the_files_are_bit_equal(full_run,
                                                                              monkeypatch):
    tmp_path, bundle, run = full_run
    default, seen_default = _scored(tmp_path, bundle, run, monkeypatch, [])
    plain, seen_plain = _scored(tmp_path, bundle, run, monkeypatch, ["--no-overlap"])
    fed, seen_fed = _scored(tmp_path, bundle, run, monkeypatch, ["--overlap"])
    # one per fed file or more: holdout, augmented holdout, the codec panel (one per codec
    # copy), whole clips, test, probe (the test-length crops are made in memory, not fed)
    assert len(seen_fed) >= 6 and all(seen_fed)
    assert seen_default == seen_plain == [False] * len(seen_fed)  # off by default
    assert len(default) == 14 and default == plain == fed  # 7 files + their sidecars


def test_help_names_the_flag_and_its_default(capsys):
    with pytest.raises(SystemExit):
        score_run.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--overlap, --no-overlap" in text and "default off" in text
