"""Building the stages' frozen config dataclasses from JSON dicts, strictly typed (torch-free).

    cfg = config.from_dict(TrainConfig, {"lr_head": 5e-4}, what="train")
    config.from_dict(TrainConfig, {"lr_head": "5e-4"})    # ValueError: train.lr_head: '5e-4' ...
    config.from_dict(TrainConfig, {"lr_hed": 5e-4})       # ValueError: ... did you mean 'lr_head'?

Every value is checked against its field's annotation by pydantic in strict mode (a string is not
a number, "false" is not a boolean, 1 is not a boolean, 3 is a float), then against the class's
`RANGES` (key -> annotated_types bounds, e.g. {"epochs": (Ge(1),)}), before the dataclass is
built: so its `__post_init__` sees only well-typed values. The fields, their defaults and their
one-line help stay on the dataclass; this module is the one place that judges a config's types.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Mapping


def from_dict(cls, d: Mapping, *, what: str | None = None, error: type[Exception] = ValueError):
    """`cls(**d)`, where an unknown key or a value of the wrong type or range is an `error`
    naming the key (and, for an unknown key, the nearest known one).

    JSON has no tuples, so top-level lists come back as tuples (frozen configs stay hashable).
    `what` names the config in the message (default: the class name). The values handed to
    `cls` are the given ones (3 stays 3 for a float field), so a config's hash is unchanged.
    """
    what = what or cls.__name__
    if not isinstance(d, Mapping):
        raise error(f"{what}: a JSON object {{KEY: VALUE, ...}} is needed, not {d!r}")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(d) - known)
    if unknown:
        raise error(f"unknown {what} keys {unknown}{did_you_mean(unknown, known)} "
                    f"(known: {sorted(known)})")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    adapters = _adapters(cls)
    for key, value in values.items():
        problem = _check(adapters[key], value)
        if problem:
            raise error(f"{what}.{key} = {value!r}: {problem} (expected "
                        f"{_spell(typing.get_type_hints(cls)[key])})")
    return cls(**values)


def did_you_mean(unknown: list[str], known) -> str:
    """' (did you mean 'lr_head'?)' for the unknown keys that have a close known one, else ''."""
    hints = [f"{u!r} -> {m[0]!r}" for u in unknown
             if (m := difflib.get_close_matches(u, sorted(known), n=1, cutoff=0.6))]
    if not hints:
        return ""
    if len(hints) == 1:
        return f" (did you mean {hints[0].split(' -> ')[1]}?)"
    return f" (did you mean: {', '.join(hints)}?)"


def _check(adapter, value) -> str | None:
    """pydantic's first complaint about `value` (strict), or None when it fits."""
    from pydantic import ValidationError

    try:
        adapter.validate_python(value, strict=True)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        return first["msg"][0].lower() + first["msg"][1:]
    return None


@functools.cache
def _adapters(cls) -> dict:
    """{field: pydantic TypeAdapter of Annotated[its type, *cls.RANGES[field]]} (built once)."""
    from pydantic import TypeAdapter

    hints = {k: v for k, v in typing.get_type_hints(cls).items()
             if k in {f.name for f in dataclasses.fields(cls) if f.init}}
    ranges = getattr(cls, "RANGES", {})
    bad = sorted(set(ranges) - set(hints))
    assert not bad, f"{cls.__name__}.RANGES names no field {bad}"  # a code bug, not a user's
    return {name: TypeAdapter(typing.Annotated[hint, *ranges[name]] if name in ranges else hint)
            for name, hint in hints.items()}


def _spell(hint) -> str:
    """int, float, bool, str | None, tuple[float, ...]: the type as a reader writes it."""
    return getattr(hint, "__name__", None) if isinstance(hint, type) else str(hint).replace(
        "typing.", "")


def parse_sets(items: list[str], sections) -> dict:
    """`--set SECTION.KEY=VALUE` items -> {section: {key: value}}: VALUE is read as JSON (5e-4,
    false, null, [1, 2], "x") and, when it is not JSON, as the string itself. ValueError names
    a malformed item or an unknown section (with the nearest one); unknown keys are the
    config's own check."""
    out: dict = {}
    for item in items:
        name, eq, raw = item.partition("=")
        section, dot, key = name.strip().partition(".")
        if not eq or not dot or not key:
            raise ValueError(f"--set {item!r}: give SECTION.KEY=VALUE, e.g. "
                             "--set train.lr_head=5e-4")
        if section not in sections:
            raise ValueError(f"--set {item!r}: unknown section {section!r}"
                             f"{did_you_mean([section], sections)} (known: {sorted(sections)})")
        import json

        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(section, {})[key] = value
    return out
