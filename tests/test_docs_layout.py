"""The docs that mirror the code: docs/DESIGN.md's layout tree names exactly the modules under
src/hearsay, and docs/INTERFACES.md opens with one section per artefact module of
hearsay.contracts, in the package's order, each naming its module."""

from __future__ import annotations

import re
from pathlib import Path

from test_layout import SRC, modules

DOCS = Path(__file__).resolve().parents[1] / "docs"

# hearsay.contracts' modules in their order; a tuple is one INTERFACES section naming several
CONTRACT_SECTIONS = [("manifest",), ("folds", "protocol"), ("bundle", "codec_recipe"), ("run_dir",),
                     ("score_file",), ("pin",), ("model_dir",), ("parity_b",), ("ledger",),
                     ("status",), ("event_log",)]


def tree_modules(design: str) -> set[str]:
    """Dotted module names the "Where things are" tree of DESIGN.md names. A line `src/hearsay/`
    or `  NAME/` opens a package; its text (with the indented lines after it) is an optional
    description ending in a colon, then module names; notes in parentheses are skipped;
    `__init__` names the package itself."""
    block = design.split("## Where things are", 1)[1].split("```", 2)[1]
    texts: dict[str, str] = {}
    pkg = None
    for line in block.splitlines():
        if m := re.match(r"(src/hearsay/|  ([a-z_]+)/)\s+(.*)$", line):
            pkg = "hearsay" + (f".{m.group(2)}" if m.group(2) else "")
            texts[pkg] = m.group(3)
        elif pkg and line.startswith("   ") and line.strip():
            texts[pkg] += " " + line.strip()
        else:
            pkg = None
    named = set()
    for pkg, text in texts.items():
        while (stripped := re.sub(r"\([^()]*\)", "", text)) != text:
            text = stripped
        names = text.split(":", 1)[1] if ":" in text else text
        for name in names.split():
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), (
                f"DESIGN.md tree, {pkg}: {name!r} is not a module name (put prose before the "
                "colon or in parentheses)")
            named.add(pkg if name == "__init__" else f"{pkg}.{name}")
    return named


def test_the_design_tree_names_every_module_and_no_other():
    named = tree_modules((DOCS / "DESIGN.md").read_text())
    real = set(modules())
    assert not real - named, (f"modules missing from docs/DESIGN.md's tree: {sorted(real - named)}"
                              " (add each to its package's line)")
    assert not named - real, (f"docs/DESIGN.md's tree names modules that do not exist: "
                              f"{sorted(named - real)} (remove or rename them)")


def test_the_tree_reader_sees_notes_continuations_and_packages():
    design = ("## Where things are\n\n```\n"
              "src/hearsay/   floors (any stage: may import): __init__ cli (the\n"
              "               command) store\n"
              "  sound/       the sound floor: __init__ audio\n"
              "  demo/        corpus\n"
              "runner/ container/ (not modules)\n```\n")
    assert tree_modules(design) == {"hearsay", "hearsay.cli", "hearsay.store", "hearsay.sound",
                                    "hearsay.sound.audio", "hearsay.demo.corpus"}


def interfaces_headings() -> list[str]:
    return re.findall(r"(?m)^## (.*)$", (DOCS / "INTERFACES.md").read_text())


def test_interfaces_opens_with_the_contract_sections_in_the_package_order():
    heads = interfaces_headings()
    for i, names in enumerate(CONTRACT_SECTIONS):
        for name in names:
            assert f"`hearsay.contracts.{name}`" in heads[i], (
                f"docs/INTERFACES.md section {i + 1} ({heads[i]!r}) should name "
                f"`hearsay.contracts.{name}`: the first sections follow {CONTRACT_SECTIONS}")
    later = [h for h in heads[len(CONTRACT_SECTIONS):] if "hearsay.contracts." in h]
    assert not later, f"contract sections after the floor's (move them up, in order): {later}"


def test_every_contract_module_has_its_section():
    listed = {name for names in CONTRACT_SECTIONS for name in names}
    real = {p.stem for p in (SRC / "hearsay" / "contracts").glob("*.py")} - {"__init__"}
    assert not real - listed, ("hearsay.contracts modules without a docs/INTERFACES.md section "
                               f"(add one, and to CONTRACT_SECTIONS): {sorted(real - listed)}")
