"""Mutation score per module from mutmut's results in mutants/ (after `make mutate`).

    python scripts/mutation_score.py            # every mutated module
    python scripts/mutation_score.py gate select

Per module: mutants checked, killed (a test failed, timed out or crashed), survived (every test
passed), no tests (no selected test reaches the function), and the score = killed / checked.
Mutants not yet checked (a run limited to other modules) are counted apart, never as killed.
Reads mutmut's own result files (mutants/**/*.py.meta, {"exit_code_by_key": {name: code}});
the exit codes are mutmut's (mutmut.stats.status_by_exit_code): 1 and 3 killed, 0 survived,
5 and 33 no tests, None not checked, timeouts and signals counted as killed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SURVIVED, NO_TESTS, UNCHECKED = {0}, {5, 33}, {None, 2, 34}


def scores(root: Path = Path("mutants")) -> dict[str, dict]:
    out = {}
    for meta in sorted(root.rglob("*.py.meta")):
        codes = list(json.loads(meta.read_text())["exit_code_by_key"].values())
        module = meta.relative_to(root).as_posix().removeprefix("src/").removesuffix(".py.meta")
        checked = [c for c in codes if c not in UNCHECKED]
        survived = sum(c in SURVIVED for c in checked)
        no_tests = sum(c in NO_TESTS for c in checked)
        killed = len(checked) - survived - no_tests
        out[module.replace("/", ".")] = {
            "mutants": len(codes), "checked": len(checked), "killed": killed,
            "survived": survived, "no_tests": no_tests, "unchecked": len(codes) - len(checked),
            "score": killed / len(checked) if checked else None}
    return out


def main(argv: list[str]) -> int:
    rows = scores()
    if not rows:
        print("mutation_score: no mutants/ here (run `make mutate` first)", file=sys.stderr)
        return 3
    print(f"{'module':32} {'mutants':>7} {'checked':>7} {'killed':>6} {'survived':>8} "
          f"{'no tests':>8} {'score':>6}")
    for name, r in rows.items():
        if argv and not any(name.endswith(a) for a in argv):
            continue
        score = "-" if r["score"] is None else f"{100 * r['score']:.1f}%"
        print(f"{name:32} {r['mutants']:7} {r['checked']:7} {r['killed']:6} {r['survived']:8} "
              f"{r['no_tests']:8} {score:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
