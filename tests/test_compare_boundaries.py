"""hearsay.evaluate.compare's refusals at their edges: a later recipe that scored extra clips (not
only
fewer), and rows of the test split (not only the holdout)."""

import numpy as np
import pandas as pd
import pytest

from hearsay.evaluate import compare


def recipe(paths, split="inner_oof", seed=0):
    z = np.random.default_rng(seed).normal(size=len(paths))
    return pd.DataFrame({"path": paths, "fold": "0", "split": split, "logit": z})


PATHS = [f"c{i}" for i in range(10)]
KEY = pd.DataFrame({"path": [*PATHS, "extra0"], "label": ["bonafide", "spoof"] * 5 + ["spoof"]})


@pytest.mark.parametrize("later", [PATHS + ["extra0"], PATHS[:-1], PATHS[:-1] + ["extra0"]])
def test_compare_refuses_a_later_recipe_that_scored_other_clips(later):
    recipes = {"first": recipe(PATHS), "second": recipe(PATHS, seed=1),
               "later": recipe(later, seed=2)}
    with pytest.raises(compare.CompareRefused, match="first and later score different clips"):
        compare.compare(recipes, KEY)


def test_compare_ranks_recipes_that_scored_the_same_clips_in_any_order():
    d = compare.compare({"a": recipe(PATHS), "b": recipe(PATHS[::-1], seed=1)}, KEY)
    assert d["n_clips"] == 10


@pytest.mark.parametrize("split", ["test", "holdout"])
def test_compare_refuses_rows_of_the_test_or_holdout_split(tmp_path, split):
    rows = pd.concat([recipe(PATHS), recipe(["t0"], split=split)], ignore_index=True)
    rows.to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(compare.CompareRefused, match=rf"1 row\(s\) of split \['{split}'\]"):
        compare.recipe_scores("r", [tmp_path / "r.csv"])
    recipe(PATHS).to_csv(tmp_path / "ok.csv", index=False)
    assert len(compare.recipe_scores("ok", [tmp_path / "ok.csv"])) == 10
