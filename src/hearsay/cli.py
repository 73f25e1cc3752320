"""`hearsay <command> …`: one entry point, one module per stage.

Each command lives in its own module as `main(argv: list[str]) -> int` with its own argparse, so
tests call the library functions directly and `hearsay X --help` is the module's own. Modules are
imported only when their command runs (torch is slow to import and the scorer has none).

Exit codes common to every command: 0 success, 2 usage error; each command documents the rest
in its --help.
"""

from __future__ import annotations

import importlib
import sys

from hearsay.contracts.model_dir import ONNX, PARITY  # stdlib only: the folder's file names

EXIT_OK, EXIT_USAGE = 0, 2  # common to every command (module docstring)

# command -> (module, one-line summary). Keep in pipeline order: `hearsay --help` prints it.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("hearsay.demo", "run every stage on the embedded synthetic demo corpus"),
    "demo-data": ("hearsay.demo.corpus", "write the synthetic two-class demo corpus + manifest"),
    "manifest-import": ("hearsay.manifest_import", "ASVspoof 2019 LA / In-the-Wild / MLAAD "
                        "metadata -> a manifest"),
    "splits": ("hearsay.bundle.splits", "make / verify fold files pinned in splits/SHA256SUMS"),
    "bundle": ("hearsay.bundle.build", "manifest -> trimmed 16 kHz FLAC bundle with codec copies "
               "or their recipe (`hearsay bundle codecs BUNDLE` makes them)"),
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
            "`hearsay <command> --help` for each command's options and exit codes.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
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
