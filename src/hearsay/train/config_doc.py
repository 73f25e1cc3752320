"""The train config described from its typed sections: what `hearsay train --print-config` prints
and what docs/CONFIG.md holds.

    hearsay train --print-config --fold 0 --config train.json --set train.lr_head=1e-3
    python -m hearsay.train.config_doc            # rewrite docs/CONFIG.md from the code
    python -m hearsay.train.config_doc --check    # exit 1 when docs/CONFIG.md is not current

Every key comes from the section dataclasses (hearsay.train.config.SECTIONS) through
hearsay.util.config.keys: its type annotation, its code default and its source comment. Nothing here
is written by hand, so the reference cannot drift from the code (tests/test_config_doc.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hearsay.train.config import SECTIONS
from hearsay.util import config

SHARED = "(see the key above: one comment in the source covers both)"
DOC = Path(__file__).resolve().parents[3] / "docs" / "CONFIG.md"  # in a source checkout


def _value(v) -> str:
    return json.dumps(v, sort_keys=True)  # the spelling --set and the config file take


def printed(resolved: dict) -> str:
    """--print-config's text: the job, then `section.key = value` for every key, each with its
    type, code default (marked when the resolved value differs) and help."""
    job = resolved["job"] if resolved["fold"] is None else f"{resolved['job']} {resolved['fold']}"
    lines = [f"# hearsay train: resolved config for {job}"
             f"{' (--cpu-smoke preset)' if resolved['cpu_smoke'] else ''}",
             "# section.key = value  # type; default; help  ('*' = not the default)"]
    for section, cls in SECTIONS.items():
        lines.append("")
        for key in config.keys(cls):
            value = resolved[section][key.name]
            mark = " " if _value(value) == _value(key.default) else "*"
            lines.append(f"{mark}{section}.{key.name} = {_value(value)}  # {key.type}; "
                         f"default {_value(key.default)}; {key.help or SHARED}")
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """docs/CONFIG.md: one table per section, every key with its type, default and help."""
    out = ["# The train config", "",
           "Generated from the typed config sections by `python -m hearsay.train.config_doc`; "
           "do not edit by hand (a test checks that it is current).", "",
           "Give values in `--config FILE.json` as `{\"SECTION\": {\"KEY\": VALUE}}` or on the "
           "command line as `--set SECTION.KEY=VALUE` (VALUE read as JSON). "
           "`hearsay train --print-config` (with the run's own flags) prints the resolved values. "
           "Unknown keys and values of the wrong type or range are refused before any work "
           "(exit 2).", ""]
    for section, cls in SECTIONS.items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        out += [f"## `{section}`", "", doc, "", "| key | type | default | what |",
                "|---|---|---|---|"]
        for key in config.keys(cls):
            cells = [f"`{key.name}`", f"`{key.type}`", f"`{_value(key.default)}`",
                     key.help or SHARED]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hearsay.train.config_doc",
                                 description="Write docs/CONFIG.md from the typed train config "
                                             "(exit 0), or with --check exit 1 when it differs.")
    ap.add_argument("--out", type=Path, default=DOC, help="the file (default docs/CONFIG.md)")
    ap.add_argument("--check", action="store_true",
                    help="only compare; exit 1 naming the command that rewrites it")
    args = ap.parse_args(argv)
    text = markdown()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is not current: run python -m hearsay.train.config_doc",
                  file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
