"""Stage-to-stage imports of the hearsay package, read from the source with the import graph of
tests/test_layout.py (ast, nothing imported; function-level imports count).

    PYTHONPATH=src python scripts/stage_imports.py [--src SRC] [--excused]

Stages: bundle, train, evaluate, export, deploy, publish, demo (a sub-package or a module of
that name under hearsay, with everything below it). Floors: every other module under hearsay.
A module-to-module edge A -> B is
  a stage-to-stage import  when A and B lie in two different stages, A not in demo (the demo
                           runs every stage: it may import them);
  a floor-to-stage import  when A is a floor module other than hearsay.cli (which dispatches to
                           the stages) and B lies in a stage.
Prints every such edge (with --excused also the demo's and cli's), then the two counts:
"stage-to-stage imports N" and "floor-to-stage imports M". Exit codes: 0 counted (the script
measures; the layout test judges), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
# the one import-graph reader and the one list of stages (the layout test judges with them)
from test_layout import STAGES, import_graph, modules  # noqa: E402

MAY_IMPORT_STAGES = ("hearsay.cli", "hearsay.demo")  # and what lies below them


def stage_of(name: str) -> str | None:
    """'hearsay.train.loop' -> 'train'; a floor module -> None."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def excused(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in MAY_IMPORT_STAGES)


def classify(graph: dict[str, set[str]]) -> dict[str, list[tuple[str, str]]]:
    """{"stage": [...], "floor": [...], "excused": [...]}: the edges into a stage that leave
    their own stage, sorted."""
    out: dict[str, list[tuple[str, str]]] = {"stage": [], "floor": [], "excused": []}
    for a in sorted(graph):
        for b in sorted(graph[a]):
            sa, sb = stage_of(a), stage_of(b)
            if sb is None or sa == sb:
                continue
            kind = "excused" if excused(a) else "stage" if sa is not None else "floor"
            out[kind].append((a, b))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="the folder holding hearsay/ (default: this checkout's src)")
    ap.add_argument("--excused", action="store_true",
                    help="also list the demo's and cli's imports of stages")
    args = ap.parse_args(argv)
    if not (args.src / "hearsay").is_dir():
        ap.error(f"{args.src} holds no hearsay/ package (pass --src SRC)")
    edges = classify(import_graph(modules(args.src)))
    kinds = [("stage", "stage-to-stage"), ("floor", "floor-to-stage")]
    if args.excused:
        kinds.append(("excused", "cli/demo-to-stage (allowed)"))
    for kind, title in kinds:
        print(f"{title}:")
        for a, b in edges[kind]:
            print(f"    {a} -> {b}")
    print(f"stage-to-stage imports {len(edges['stage'])}")
    print(f"floor-to-stage imports {len(edges['floor'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
