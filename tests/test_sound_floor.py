"""The sound floor (hearsay.sound): the torch-free signal code every stage shares. It imports no
stage (train, evaluate, bundle, export, deploy, publish, demo, cli), so a stage can use it without
pulling another stage in; read from the source as tests/test_layout.py reads the import graph."""

from __future__ import annotations

from test_layout import import_graph, modules

STAGES = ("hearsay.train", "hearsay.evaluate", "hearsay.bundle", "hearsay.export",
          "hearsay.deploy", "hearsay.publish", "hearsay.demo", "hearsay.cli")


def stage_imports(graph: dict[str, set[str]], floor: str) -> dict[str, list[str]]:
    """{module of the floor: [the stage modules it imports]} for the modules that import one."""
    out = {}
    for name, deps in graph.items():
        if name == floor or name.startswith(floor + "."):
            bad = sorted(d for d in deps if d == "hearsay.cli" or d.startswith(STAGES))
            if bad:
                out[name] = bad
    return out


def test_the_sound_floor_imports_no_stage():
    found = stage_imports(import_graph(modules()), "hearsay.sound")
    assert found == {}, (f"hearsay.sound imports a stage: {found} (move what both need into the "
                         "floor, or the code into the stage)")


def test_the_check_sees_a_stage_import_of_the_floor():
    graph = {"hearsay.sound.example": {"hearsay.sound.audio", "hearsay.train.rates"},
             "hearsay.sound.audio": {"hearsay.util.config"}, "hearsay.train.rates": set()}
    assert stage_imports(graph, "hearsay.sound") == {
        "hearsay.sound.example": ["hearsay.train.rates"]}


def test_the_augment_facade_is_gone_and_the_example_is_built_in_the_floor():
    mods = modules()
    assert not any(m == "hearsay.augment" or m.startswith("hearsay.augment.") for m in mods)
    assert "hearsay.sound.example" in mods
    graph = import_graph(mods)
    # the trainer's batches build every example through it (both augmentation paths)
    assert "hearsay.sound.example" in graph["hearsay.train.data"]
