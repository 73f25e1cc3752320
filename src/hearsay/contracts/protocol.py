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

The rules, once: the model of fold k trains on the inner folds other than k (plus extra rows),
validates on k and scores k; the pilot trains on folds 0-3 and validates on fold 4 (it is never
scored or pinned); the full model trains on every inner fold and scores holdout and test.
Holdout and test rows never train any model (hearsay.contracts.folds.check_no_holdout_leak holds
the bundle
to it). Stdlib only (split_rows is handed a pandas frame).
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
PILOT_VALIDATION_FOLD = INNER_FOLDS[-1]  # the pilot trains on 0-3 and validates on "4"

# score split -> the manifest folds whose rows it holds (core rows only: hearsay.evaluate.score)
SPLITS = {"inner_oof": INNER_FOLDS, "holdout": ("holdout",), "test": ("test",)}


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


def validation_fold(job: str, fold: int | None = None) -> str | None:
    """The manifest fold a job validates on (its family-exclusion key too): fold k -> "k",
    the pilot -> "4", the full model -> None (no validation split)."""
    if job == "pilot":
        return PILOT_VALIDATION_FOLD
    return None if job == "full" else run_key(job, fold)[4:]


def exclusion_key(job: str, fold: int | None = None) -> str:
    """The key of a fold file's family_exclusion for a job: "0".."4" or "full"."""
    return validation_fold(job, fold) or "full"


def scorer_of(split: str, fold: str | None = None) -> str:
    """The run that scores a row of `split` (inner rows: their own fold k -> "fold{k}")."""
    if split == "inner_oof":
        if str(fold) not in INNER_FOLDS:
            raise ValueError(f"inner row with fold {fold!r}: one of {', '.join(INNER_FOLDS)}")
        return f"fold{fold}"
    if split in ("holdout", "test"):
        return "full"
    raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")


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
