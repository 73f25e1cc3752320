"""The trainer's errors, each carrying its documented exit code (`hearsay train --help`).

    from hearsay.train.errors import ConfigError, EXIT_USAGE
    raise ConfigError("unknown config sections [...]")   # hearsay train exits 2
"""

from __future__ import annotations

# `hearsay train`'s exit codes (its --help lists them).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DEVICE, EXIT_NONFINITE, EXIT_TRIPWIRE = 0, 1, 2, 3, 4, 5
EXIT_STORE, EXIT_RESUME, EXIT_WEIGHTS, EXIT_RATES, EXIT_FOLD_LEAK = 6, 7, 8, 9, 10
EXIT_SHARES = 11


class TrainError(RuntimeError):
    """A run that must stop; `code` is its documented exit code."""

    code = EXIT_ERROR


class DeviceRefused(TrainError):
    code = EXIT_DEVICE


class NonFinite(TrainError):
    code = EXIT_NONFINITE


class Tripwire(TrainError):
    code = EXIT_TRIPWIRE


class ResumeRefused(TrainError):
    code = EXIT_RESUME


class ConfigError(TrainError):
    code = EXIT_USAGE


class FoldLeak(TrainError):
    """A holdout, test or validation row reached the training rows: the fold file or the
    fold protocol is broken. Raised whatever python's -O says (never an assert)."""

    code = EXIT_FOLD_LEAK


class ShareDrift(TrainError):
    """The batches' source shares of a class are (or would be) further than share_tol from the
    configured source_mix table (hearsay.train.shares)."""

    code = EXIT_SHARES
