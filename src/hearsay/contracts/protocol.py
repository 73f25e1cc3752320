"""The fold protocol: which run trains on which rows and which run scores them (docs/INTERFACES.md,
"Fold files" and "Pin file"). Every stage that names a run or a split takes it from here.

    from hearsay.contracts.protocol import RUN_KEYS, SPLITS, run_job, run_key, scorer_of
    run_keys(n)                   # ("fold0", ..., "fold<n-1>", "full"): the runs of a campaign
                                  # whose fold file has n_folds n (hearsay.contracts.folds)
    RUN_KEYS                      # run_keys(5): every key a run may have
    run_job("fold3")              # ("fold", 3)      run_job("full") -> ("full", None)
    run_key("fold", 3)            # "fold3"
    SPLITS["inner_oof"]           # ("0", ..., "4"): the manifest folds each score split holds
    scorer_of("inner_oof", "2")   # "fold2": an inner row is scored by the model that did not
                                  # train on it; holdout and test rows by the full model
    split_rows(manifest, "inner_oof", fold=2)   # the core rows a split (or one inner fold) holds
    check_fold(3, n_folds)        # 3, or FoldOutside: the fold models are 0..n_folds-1, n_folds
                                  # the bundle's (hearsay.contracts.bundle; `hearsay bundle info`)

The rules, once: the model of fold k trains on the inner folds other than k (plus extra rows),
validates on k and scores k; the pilot trains on every inner fold but the last and validates on
the last, n_folds-1 (it is never scored or pinned); the full model trains on every inner fold
and scores holdout and test. Holdout and test rows never train any model (hearsay.contracts.folds.
check_no_holdout_leak holds the bundle to it). Stdlib only (split_rows is handed a pandas frame).
"""

from __future__ import annotations

from hearsay.contracts.manifest import INNER_FOLDS

N_FOLDS = len(INNER_FOLDS)  # the most fold models a fold file may ask for (its n_folds: 2..5)


def fold_keys(n_folds: int = N_FOLDS) -> tuple[str, ...]:
    """("fold0", ..., "fold<n-1>"): the fold models of a campaign whose fold file has n_folds."""
    if not 1 <= int(n_folds) <= N_FOLDS:
        raise ValueError(f"n_folds {n_folds} must be 1..{N_FOLDS}")
    return tuple(f"fold{k}" for k in range(int(n_folds)))


def run_keys(n_folds: int = N_FOLDS) -> tuple[str, ...]:
    """fold_keys(n_folds) + ("full",): the runs a campaign pins (collect brings them back)."""
    return fold_keys(n_folds) + ("full",)


RUN_KEYS = run_keys()  # the widest campaign (n_folds 5); a campaign's own: run_keys(n)
FOLD_KEYS = fold_keys()


class FoldOutside(ValueError):
    """A fold the campaign's fold file has no model for (it is not 0..n_folds-1)."""


def check_fold(fold, n_folds: int) -> int:
    """`fold` as an int when it is one of the fold models of a campaign whose fold file has
    n_folds (0..n_folds-1); FoldOutside, naming them, otherwise (a word, a negative number, or
    one past the last: fold 3 of a 3-fold bundle)."""
    n = int(n_folds)
    try:
        k = int(str(fold), 10)
    except ValueError:
        k = None
    if k is None or not 0 <= k < n:
        raise FoldOutside(f"fold {fold} is not one of this bundle's folds 0..{n - 1} (its fold "
                          f"file has n_folds {n}): pick one of them, or build the bundle from a "
                          f"fold file with more folds (hearsay splits make, hearsay bundle)")
    return k

# score split -> the manifest folds whose rows it holds (core rows only: hearsay.evaluate.score)
# (probe: the probe set, scored by every run into its own file, never exported: probe_set)
SPLITS = {"inner_oof": INNER_FOLDS, "holdout": ("holdout",), "test": ("test",),
          "probe": ("probe",)}
EXPORTED = ("inner_oof", "holdout", "test")  # the splits of the assembled score file, in order


def run_key(job: str, fold: int | None = None) -> str:
    """("fold", 3) -> "fold3"; ("full", None) -> "full"."""
    if job == "full":
        return "full"
    if job == "fold" and fold is not None and 0 <= int(fold) < N_FOLDS:
        return f"fold{int(fold)}"
    raise ValueError(f"no campaign run for job {job!r} fold {fold!r} "
                     f"(fold 0..{N_FOLDS - 1} or full)")


def run_job(key: str) -> tuple[str, int | None]:
    """"fold3" -> ("fold", 3); "full" -> ("full", None)."""
    if key not in RUN_KEYS:
        raise ValueError(f"run {key!r} is not one of {', '.join(RUN_KEYS)}")
    return ("full", None) if key == "full" else ("fold", int(key[4:]))


def validation_fold(job: str, fold: int | None = None, n_folds: int = N_FOLDS) -> str | None:
    """The manifest fold a job validates on (its family-exclusion key too), n_folds the fold
    file's: fold k -> "k" (FoldOutside unless k < n_folds), the pilot -> the last inner fold,
    str(n_folds - 1), the full model -> None (no validation split)."""
    if job == "pilot":
        return str(int(n_folds) - 1)
    if job == "fold" and fold is not None:
        check_fold(fold, n_folds)
    return None if job == "full" else run_key(job, fold)[4:]


def exclusion_key(job: str, fold: int | None = None, n_folds: int = N_FOLDS) -> str:
    """The key of a fold file's family_exclusion for a job: "0".."<n_folds-1>" or "full"."""
    return validation_fold(job, fold, n_folds) or "full"


def scorer_of(split: str, fold: str | None = None) -> str:
    """The run that scores a row of `split` (inner rows: their own fold k -> "fold{k}")."""
    if split == "inner_oof":
        if str(fold) not in INNER_FOLDS:
            raise ValueError(f"inner row with fold {fold!r}: one of {', '.join(INNER_FOLDS)}")
        return f"fold{fold}"
    if split in ("holdout", "test"):
        return "full"
    raise ValueError(f"split {split!r}: one of {', '.join(EXPORTED)}")


def split_rows(manifest, split: str, fold: int | None = None):
    """Core rows of `split` (fold K only with `fold`), in manifest order. Extra rows never.
    ValueError names the splits when `split` is none of them."""
    if split not in SPLITS:
        raise ValueError(f"--split {split!r}: one of {', '.join(SPLITS)}")
    folds = manifest["fold"].astype(str)
    keep = folds.isin(SPLITS[split])
    if fold is not None:
        if split != "inner_oof":
            raise ValueError("--fold only applies to --split inner_oof")
        keep &= folds == str(fold)
    if "train_scope" in manifest.columns:
        keep &= manifest["train_scope"].astype(str) != "extra"
    return manifest[keep]
