"""`hearsay <command> …`: one entry point, one module per stage.

Each command lives in its own module as `main(argv: list[str]) -> int` with its own argparse, so
tests call the library functions directly and `hearsay X --help` is the module's own. Modules are
imported only when their command runs (torch is slow to import and the scorer has none).

Exit codes common to every command: 0 success, 2 usage error, 141 stdout closed by its reader
(`hearsay ... | head`: it ends quietly, as a shell reports a SIGPIPE); each command documents the
rest in its --help.
"""

from __future__ import annotations

import importlib
import os
import select
import sys

from hearsay.contracts.model_dir import ONNX, PARITY  # stdlib only: the folder's file names

EXIT_OK, EXIT_USAGE = 0, 2  # common to every command (module docstring)
EXIT_CLOSED = 141  # stdout closed by its reader: 128 + SIGPIPE, as hearsay-score and a shell say

# command -> (module, one-line summary). Keep in pipeline order: `hearsay --help` prints it.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("hearsay.demo", "run every stage on the embedded synthetic demo corpus"),
    "demo-data": ("hearsay.demo.corpus", "write the synthetic two-class demo corpus + manifest"),
    "manifest-import": ("hearsay.bundle.manifest_import", "ASVspoof 2019 LA / In-the-Wild / MLAAD "
                        "metadata -> a manifest"),
    "splits": ("hearsay.bundle.splits", "make / verify fold files pinned in splits/SHA256SUMS"),
    "bundle": ("hearsay.bundle.build", "manifest -> trimmed 16 kHz FLAC bundle with codec copies "
               "or their recipe (`hearsay bundle codecs BUNDLE` makes them; `hearsay bundle "
               "info BUNDLE`: its tree-sha and fold count)"),
    "train": ("hearsay.train", "fine-tune the detector (CUDA; --cpu-smoke for a tiny CPU run)"),
    "pilot-epochs": ("hearsay.evaluate.pilot",
                     "the pilot's fold-4 readouts -> the finals' epoch count"),
    "score": ("hearsay.evaluate.score", "score a bundle split with a checkpoint -> CSV"),
    "score-run": ("hearsay.evaluate.score_run",
                  "a trained run scores its own rows on its box (+ parity B logits)"),
    "metrics": ("hearsay.evaluate.metrics_cli",
                "EER, minDCF, actDCF, AUC, Cllr (+ breakdowns) of a score CSV"),
    "corpus-probe": ("hearsay.evaluate.corpus_probe",
                     "is a corpus separable from its peers on trivial features? (+ the drop "
                     "rule from two recipes' runs, the decision file)"),
    "compare": ("hearsay.evaluate.compare", "rank recipes on their inner-fold runs (the ablation)"),
    "bar": ("hearsay.evaluate.bar",
            "an earlier detector's scores + meta.json -> the gate's bar folder"),
    "assemble": ("hearsay.evaluate.assemble",
                 "pinned fold + full runs -> score file, meta.json, report"),
    "export": ("hearsay.export.onnx_export", f"checkpoint -> {ONNX} (+ int8) with {PARITY}"),
    "parity": ("hearsay.export.parity", "box or GPU bf16 logits vs CPU onnxruntime fp32"),
    "publish": ("hearsay.publish", "upload / download a checkpoint, verifying every sha256"),
    "run": ("hearsay.contracts.run_dir", "is a run dir complete, and which run is it? (the "
            "runner asks)"),
    "pin": ("hearsay.contracts.pin", "write / check a pin file (final_runs.json, "
            "ablation_runs.json)"),
    "ledger": ("hearsay.contracts.ledger", "sum the rental ledger (open rentals, unknown costs)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items())
    return (f"usage: hearsay <command> [options]\n\ncommands:\n{rows}\n\n"
            "`hearsay <command> --help` for each command's options and exit codes.\n"
            f"Every command exits {EXIT_OK} on success, {EXIT_USAGE} on a usage error and "
            f"{EXIT_CLOSED} when its\nstdout is closed by its reader (`hearsay ... | head`).")


def main(argv: list[str] | None = None) -> int:
    """Run one command; a closed stdout (`| head`) ends it quietly with EXIT_CLOSED."""
    try:
        try:
            return _dispatch(sys.argv[1:] if argv is None else argv)
        except SystemExit as done:  # argparse's --help: its write error was dropped (argparse
            # ignores OSError on a help text over the 8 KiB buffer), then it exits 0
            if done.code in (0, None) and _stdout_closed():
                raise BrokenPipeError("stdout closed during --help") from None
            raise
        finally:  # flushed here, not at exit: a closed pipe is caught below, not printed
            sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # another pipe (a child process's): an error of the command, not `| head`
        try:  # nothing more is flushed at exit (that would print "Exception ignored ...")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_CLOSED


def _stdout_closed() -> bool:
    """Is fd 1 a pipe or socket whose reader has gone? (poll reports POLLERR/POLLHUP on it)"""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # no fd (a test's capture), no poll
        return False


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return EXIT_OK
    if argv[0] == "--version":
        from hearsay import __version__

        print(__version__)
        return EXIT_OK
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"hearsay: unknown command {name!r} (one of: {', '.join(COMMANDS)})",
              file=sys.stderr)
        return EXIT_USAGE
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
