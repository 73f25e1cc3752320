"""What the runner's bash must still spell of an artefact (file names it copies from the store, the
ledger's header, the STATUS line's rule) is spelled as the artefact floor spells it.

Three guards: each name is spelled in exactly the bash files listed here (a rename in Python, or
a new bash reader, fails until this table and the bash agree); no bash token is a near miss of a
name (a typo such as run_meta.jsn); and the reaper's bash reading of a STATUS line gives what
hearsay.contracts.status.phase_of gives, line for line (it stays in bash: the reaper polls it).
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from pathlib import Path

import pytest

from hearsay import store
from hearsay.contracts import bundle, ledger, model_dir, pin, run_dir, status

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = (sorted((REPO / "runner").rglob("*.sh")) + [REPO / "scripts" / "rehearsal.sh"]
           + sorted((REPO / "scripts" / "lib").glob("rehearsal_*.sh")))

# the Python constant -> the bash files (repo-relative) whose code spells it
WHERE = {
    run_dir.META: {"runner/collect.sh", "runner/collect_ablation.sh", "runner/epochs.sh",
                   "runner/lib/launch_provision.sh", "scripts/lib/rehearsal_campaign.sh"},
    run_dir.WEIGHTS: {"scripts/lib/rehearsal_results.sh"},
    run_dir.CONFIG: {"runner/collect.sh", "runner/collect_ablation.sh"},
    run_dir.READOUT: {"runner/status.sh"},
    run_dir.PROGRESS: {"runner/status.sh"},
    store.MARK_SUFFIX: {"scripts/lib/rehearsal_campaign.sh"},
    pin.FINAL: {"runner/collect.sh", "scripts/lib/rehearsal_results.sh"},
    pin.ABLATION: {"runner/collect_ablation.sh", "scripts/lib/rehearsal_campaign.sh"},
    bundle.META: {"runner/bundle_put.sh", "runner/collect.sh", "runner/config.sh",
                  "runner/epochs.sh", "runner/lib/launch_steps.sh", "scripts/rehearsal.sh"},
    bundle.IDENTITY: {"runner/bundle_put.sh", "runner/lib/bundles.sh"},
    model_dir.PARITY: {"scripts/lib/rehearsal_results.sh"},
}


def code_lines(path: Path) -> list[str]:
    """The lines of a bash file that are not whole-line comments."""
    return [x for x in path.read_text().splitlines() if not x.lstrip().startswith("#")]


def spells(line: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", line) is not None


def where_spelled(name: str, scripts=SCRIPTS, root: Path = REPO) -> set[str]:
    return {p.relative_to(root).as_posix() for p in scripts
            if any(spells(x, name) for x in code_lines(p))}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_bash_spells_each_name_as_the_floor_does_and_only_where_listed(name):
    got = where_spelled(name)
    assert got == WHERE[name], (
        f"{name!r} is spelled in {sorted(got)}, the table says {sorted(WHERE[name])}: a bash "
        "file lost the floor's spelling (renamed in Python?) or a new one spells it (ask a "
        "hearsay verb instead, or add it here on purpose)")


FILE_NAMES = [n for n in WHERE if re.fullmatch(r"\w+\.\w+", n)]  # "x.json"-shaped names


def near_misses(scripts=SCRIPTS) -> list[str]:
    """Tokens shaped like a file name (x.ext) that are almost, not exactly, one of WHERE's."""
    found = []
    for p in scripts:
        for n, line in enumerate(p.read_text().splitlines(), start=1):
            for token in set(re.findall(r"\w+\.\w+", line)):
                for name in FILE_NAMES:
                    if token != name and name not in token and len(token) >= len(name) - 2 \
                            and difflib.SequenceMatcher(None, token, name).ratio() >= 0.86:
                        found.append(f"{p.name}:{n}: {token!r} ~ {name!r}")
    return found


def test_no_bash_token_is_a_near_miss_of_a_name():
    assert not near_misses(), "\n".join(near_misses())


def test_the_near_miss_scan_finds_a_typo(tmp_path):
    (tmp_path / "x.sh").write_text('jq .complete "$d/run_meta.jsn"\ncp a/final_run.json b\n')
    assert sorted(f.split(": ")[1] for f in near_misses([tmp_path / "x.sh"])) == [
        "'final_run.json' ~ 'final_runs.json'", "'run_meta.jsn' ~ 'run_meta.json'"]


def test_the_ledger_header_bash_writes_is_the_readers():
    text = (REPO / "runner" / "lib" / "ledger.sh").read_text()
    written = re.search(r"^LEDGER_HEADER='([^']*)'", text, re.M).group(1)
    assert written == ",".join(ledger.WRITTEN)
    first = re.search(r"^LEDGER_HEADER_V1='([^']*)'", text, re.M).group(1)  # older ledgers'
    assert first == ",".join(ledger.HEADER)


def bash_phase(tmp_path: Path, line: str, gen: str, reader: str = "store_status_of") -> str:
    """runner/lib/store.sh's store_status_of (or `reader`, called as READER "$(store_status_line
    fold3)" GEN for the line readers) on a store whose STATUS holds `line`."""
    (tmp_path / "line").write_text(line)
    fake = tmp_path / "fake_rclone"
    fake.write_text(f"#!/bin/sh\ncat '{tmp_path / 'line'}'\n")
    fake.chmod(0o755)
    env = {**os.environ, "RUNNER_STORE": "store:x", "RUNNER_RCLONE": str(fake),
           "RUNNER_CLI_TIMEOUT_S": "10", "RUNNER_STATE": str(tmp_path / "state"),
           "RUNNER_RCLONE_CONF": str(tmp_path / "rclone.conf")}
    script = (f'. "{REPO}/runner/lib/common.sh"; . "{REPO}/runner/lib/guard.sh"; '
              f'. "{REPO}/runner/lib/store.sh"; ' +
              ('store_status_of fold3 "$1"' if reader == "store_status_of"
               else f'{reader} "$(store_status_line fold3)" "$1"'))
    out = subprocess.run(["bash", "-c", script, "_", gen], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


LINES = ["g-7 TRAINING 1796000000\n", "g-7 DONE 1796000000\n", "g-8 DONE 1796000000\n",
         "g-7 FAIL\n", "g-7\n", "", "g-7 SCORING 1796000000\nleft over\n",
         "g-70 DONE 1796000000\n"]


@pytest.mark.parametrize("line", LINES)
def test_the_reapers_bash_reads_a_status_line_as_the_floor_does(tmp_path, line):
    assert bash_phase(tmp_path, line, "g-7") == (status.phase_of(line, "g-7") or "")


BEAT_LINES = ["g-7 SMOKE 12 beats=yes\n", "g-7 SMOKE 12 beats=no\n", "g-7 SMOKE 12\n",
              "g-8 SMOKE 12 beats=yes\n", "g-7 SMOKE beats=yes\n", "g-7 SMOKE 12 x beats=yes\n",
              "g-7  SMOKE 12 beats=yes\n", "g-7 SMOKE 12 beats=maybe\n", "g-7\n", ""]


@pytest.mark.parametrize("line", BEAT_LINES)
def test_the_judges_bash_reads_a_boxs_word_on_beating_as_the_floor_does(tmp_path, line):
    want = {True: "yes", False: "no", None: ""}[status.beats_of(line, "g-7")]
    assert bash_phase(tmp_path, line, "g-7", reader="status_beats_in") == want


# the bundle meta's fields and the fold count are hearsay's to read (`hearsay bundle info`,
# `hearsay pin keys`), never re-read or re-spelled in bash: jq on tree_sha / folds, a fold range
# such as [0-4], or a list of fold runs
META_READ = re.compile(r"jq\b[^|;]*\.(tree_sha|folds)\b|\[0-[1-8]\]|\bfold0 fold1\b")


def meta_reads(scripts=SCRIPTS) -> list[str]:
    return [f"{p.name}:{n}: {x.strip()}" for p in scripts
            for n, x in enumerate(p.read_text().splitlines(), start=1)
            if not x.lstrip().startswith("#") and META_READ.search(x)]


def test_bash_asks_hearsay_for_the_bundle_meta_and_the_fold_count():
    assert not meta_reads(), "\n".join(meta_reads())


def test_the_meta_read_scan_finds_jq_a_fold_range_and_a_fold_list(tmp_path):
    (tmp_path / "x.sh").write_text("b=$(jq -r '.tree_sha // empty' m.json)\n"
                                   "case $f in [0-4]) ;; esac\nJOBS=\"fold0 fold1 full\"\n"
                                   "# jq .tree_sha in a comment\nb=$(bundle_info m --tree-sha)\n")
    assert [f.split(": ")[0] for f in meta_reads([tmp_path / "x.sh"])] == ["x.sh:1", "x.sh:2",
                                                                            "x.sh:3"]
