"""hearsay.contracts.folds guards: a test group stays whole through `hearsay splits make`."""

import pandas as pd

from hearsay.bundle import splits
from hearsay.contracts import folds as fo
from hearsay.demo.corpus import DemoDataConfig, manifest_rows


def test_splits_make_refuses_a_test_group_with_a_row_outside_test(tmp_path, capsys):
    # the demo layout, one row of a test group moved out of 'test': that speaker would sit in
    # the test set and in an inner (training) fold at once
    df = pd.DataFrame(manifest_rows(DemoDataConfig()))
    core_test = df[(df["fold"] == "test") & (df["train_scope"] == "core")]
    group = core_test["group"].iloc[0]
    assert (core_test["group"] == group).sum() >= 2  # the group has a row left in test
    df.loc[core_test.index[0], "fold"] = ""
    manifest = tmp_path / "manifest.csv"
    df.to_csv(manifest, index=False)
    out = tmp_path / "splits"
    code = splits.main(["make", str(manifest), "--out", str(out), "--name", "d"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"group(s) ['{group}'] have rows both in fold 'test' and outside it" in err
    assert not (out / "d.folds.json").exists() and not (out / fo.SUMS).exists()
