"""Building the stages' frozen config dataclasses from JSON dicts (stdlib only, torch-free)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


def from_dict(cls, d: Mapping, *, what: str | None = None, error: type[Exception] = ValueError):
    """`cls(**d)`, where an unknown key is an `error` naming the known ones.

    JSON has no tuples, so top-level lists come back as tuples (frozen configs stay hashable).
    `what` names the config in the message (default: the class name).
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise error(f"unknown {what or cls.__name__} keys {unknown} (known: {sorted(known)})")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
