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


# --------------------------------------------------------------------------- the reference


@dataclasses.dataclass(frozen=True)
class Key:
    """One documented config key: `hearsay train --print-config` and docs/CONFIG.md print these."""

    name: str
    type: str  # as a reader writes it: int, float | None, tuple[float, ...]
    default: object  # the code default (JSON-ready: tuples as lists)
    help: str  # the field's comment in the source, joined into one line ("" when it has none)


def keys(cls) -> list[Key]:
    """Every init field of the dataclass `cls`, in declaration order, with its one-line help."""
    hints = typing.get_type_hints(cls)
    helps = _field_comments(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        out.append(Key(f.name, _spell(hints[f.name]), _json_ready(default), helps.get(f.name, "")))
    return out


def _json_ready(value):
    if isinstance(value, tuple | list):
        return [_json_ready(v) for v in value]
    if dataclasses.is_dataclass(value):
        return _json_ready(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    return value


def _field_comments(cls) -> dict[str, str]:
    """{field: its comment} read from the class source: the comment at the end of the field's
    line plus the comment lines under it whose text starts in the same column (a wrapped
    comment), or, for a field line without one, the block of comment lines just above it."""
    import ast
    import inspect
    import textwrap

    lines = textwrap.dedent(inspect.getsource(cls)).splitlines()
    body = ast.parse("\n".join(lines)).body[0].body
    fields = {n.target.id: n.lineno - 1 for n in body
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}

    def text_col(line: str, at: int) -> int:  # column where a comment's text starts
        return at + 1 + len(line[at + 1:]) - len(line[at + 1:].lstrip())

    def comment_only(j: int) -> bool:
        return 0 <= j < len(lines) and lines[j].strip().startswith("#")

    out, wrapped = {}, set()  # wrapped: comment lines that continue a field's own comment
    for name, i in fields.items():
        at = _trailing_hash(lines[i])
        if at >= 0:
            parts, j = [lines[i][at + 1:].strip()], i + 1
            while comment_only(j) and text_col(lines[j], lines[j].index("#")) == text_col(
                    lines[i], at):
                parts.append(lines[j].strip()[1:].strip())
                wrapped.add(j)
                j += 1
        else:
            parts, j = [], i - 1
            while comment_only(j) and j not in wrapped:
                parts.insert(0, lines[j].strip()[1:].strip())
                j -= 1
        out[name] = " ".join(p for p in parts if p)
    return out


def _trailing_hash(line: str) -> int:
    """Column of the comment that ends a code line (None of a '#' inside a string), or -1."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return len(line) - len(line.lstrip()) + tok.start[1]
    except (tokenize.TokenError, IndentationError):
        return -1
    return -1
