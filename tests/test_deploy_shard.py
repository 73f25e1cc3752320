"""hearsay-score --shard K/N and hearsay-score merge: a corpus scored in parts on many machines
joins into the file one run writes, and parts that do not belong together are refused. Real
onnxruntime on a tiny exported model, real ffmpeg (test_deploy's world)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import test_deploy

from hearsay.deploy import inputs, main, shard

world = test_deploy.world  # a tiny exported model and a folder of good and broken clips
read_csv = test_deploy.read_csv


def score_parts(model: Path, clips: Path, out: Path, n: int, *extra: str) -> list[Path]:
    parts = []
    for k in range(n):
        part = out / f"part{k}.csv"
        assert main([str(clips), "-o", str(part), "--model", str(model), "--shard", f"{k}/{n}",
                     "--progress", "0", *extra]) == 0
        parts.append(part)
    return parts


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_three_shards_merged_give_the_bytes_of_one_run(world, tmp_path, fmt):
    # one window per onnxruntime call (--batch-size 1): every logit is computed alike in both
    model, _, clips, expected = world
    one = tmp_path / "one.out"
    opts = ["--format", fmt, "--batch-size", "1"]
    assert main([str(clips), "-o", str(one), "--model", str(model), "--progress", "0",
                 *opts]) == 0
    parts = score_parts(model, clips, tmp_path, 3, *opts)
    sizes = [len(json.loads(shard.record_path(p).read_text())["positions"]) for p in parts]
    assert sum(sizes) == len(expected) and all(sizes)  # every part scored some, none twice
    merged = tmp_path / "merged.out"
    assert main(["merge", "-o", str(merged), *map(str, reversed(parts))]) == 0
    assert merged.read_bytes() == one.read_bytes()  # the same rows, order, quoting, bytes


def test_three_shards_merged_give_the_rows_of_one_run_at_any_batch_size(world, tmp_path):
    # batches of other windows: a logit moves by float noise (onnxruntime sums in another
    # order), as in any two runs with other batches; every other field is the same
    model, _, clips, _ = world
    one = tmp_path / "one.csv"
    assert main([str(clips), "-o", str(one), "--model", str(model), "--progress", "0"]) == 0
    merged = tmp_path / "merged.csv"
    assert main(["merge", "-o", str(merged),
                 *map(str, score_parts(model, clips, tmp_path, 3))]) == 0
    numbers = ("score", "logit", "mean_logit")
    rows, want = read_csv(merged), read_csv(one)
    assert [r["path"] for r in rows] == [r["path"] for r in want]
    for r, w in zip(rows, want, strict=True):
        assert {k: v for k, v in r.items() if k not in numbers} == {
            k: v for k, v in w.items() if k not in numbers}
        for k in numbers:
            assert (r[k] == w[k] == "") or float(r[k]) == pytest.approx(float(w[k]), abs=1e-5)


def test_the_split_is_by_path_whatever_order_the_files_are_listed_in(world):
    _, _, clips, expected = world
    src = inputs.resolve(clips, None)
    flipped = inputs.Inputs(src.root, list(reversed(src.files)), src.skipped, src.source)
    owners = Counter()
    for k in range(4):
        _, mine, summary = shard.split(src, (k, 4))  # {row path: position}
        _, mine_flipped, _ = shard.split(flipped, (k, 4))
        assert set(mine) == set(mine_flipped)  # the same files, listed in any order
        assert summary["total"] == len(expected)
        owners.update(list(mine))
    assert set(owners) == set(expected) and set(owners.values()) == {1}  # each file once


def test_merge_refuses_parts_that_do_not_make_one_run(world, tmp_path, capsys):
    model, _, clips, _ = world
    parts = score_parts(model, clips, tmp_path, 3)
    out = str(tmp_path / "merged.csv")
    cases = {  # what is given -> what the refusal names
        "missing": ([parts[0], parts[2]], "missing [1]"),
        "twice": ([parts[0], parts[1], parts[1]], "given twice [1]"),
    }
    other = tmp_path / "other"
    other.mkdir()
    first_window = score_parts(model, clips, other, 3, "--first-window")
    cases["options"] = ([parts[0], first_window[1], parts[2]], "differ in run ['first_window'")
    llr = tmp_path / "llr"
    llr.mkdir()
    cases["of another split"] = ([*parts[:2], *score_parts(model, clips, llr, 4)[3:]],
                                 "is shard 3/4")
    for what, (given, said) in cases.items():
        assert main(["merge", "-o", out, *map(str, given)]) == 2, what
        assert said in capsys.readouterr().err, what
        assert not Path(out).exists()
    shard.record_path(parts[1]).unlink()
    assert main(["merge", "-o", out, *map(str, parts)]) == 2
    assert "no readable shard record" in capsys.readouterr().err


def test_merge_refuses_a_part_whose_rows_were_changed(world, tmp_path, capsys):
    model, _, clips, _ = world
    parts = score_parts(model, clips, tmp_path, 2)
    lines = parts[0].read_text().splitlines(keepends=True)
    parts[0].write_text("".join(lines[:-1]))  # a row lost after the run
    assert main(["merge", "-o", str(tmp_path / "m.csv"), *map(str, parts)]) == 2
    assert "the file was changed after its run" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "said"), [
    (["--shard", "3/3", "-o", "x.csv"], "give K/N with 0 <= K < N"),
    (["--shard", "1of3", "-o", "x.csv"], "give K/N with 0 <= K < N"),
    (["--shard", "0/3"], "--shard needs -o FILE"),
])
def test_a_malformed_shard_is_a_usage_error_before_any_work(world, tmp_path, capsys, args, said,
                                                            monkeypatch):
    model, _, clips, _ = world
    monkeypatch.chdir(tmp_path)
    assert main([str(clips), "--model", str(model), *args]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
