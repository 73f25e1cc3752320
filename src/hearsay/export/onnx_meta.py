"""The model folder's facts inside each shipped ONNX graph (metadata_props), for runtimes and
tools that see only the .onnx file:

    hearsay.format            hearsay-detector-onnx (format.json's "format")
    hearsay.format_version    1 (format.json's "format_version")
    hearsay.front_end         front_end.json's content (JSON): how inputs are prepared
    hearsay.checkpoint_sha256 the checkpoint's weights sha256 (absent for a model built in code)
    hearsay.thresholds        the names in thresholds.json, comma-separated (absent without one)

    onnxruntime.InferenceSession("model.onnx").get_modelmeta().custom_metadata_map

Only metadata_props change: the graph (nodes, weights, inputs, outputs) is the one parity A and
the int8 gate judged, byte for byte (stamp() checks it). Written before SHA256SUMS, so the
identity covers it. The folder's files stay the authority: hearsay-score reads front_end.json
and thresholds.json, never these copies.
"""

from __future__ import annotations

import json
from pathlib import Path

PREFIX = "hearsay."


def props(fmt: str, version: int, front: dict, checkpoint_sha256: str | None,
          thresholds: dict | None) -> dict[str, str]:
    """The metadata_props of a shipped graph (module docstring); never a made-up value."""
    out = {"hearsay.format": fmt, "hearsay.format_version": str(version),
           "hearsay.front_end": json.dumps(front, sort_keys=True)}
    if checkpoint_sha256:
        out["hearsay.checkpoint_sha256"] = checkpoint_sha256
    if thresholds is not None:
        out["hearsay.thresholds"] = ",".join(sorted(thresholds.get("thresholds", {})))
    return out


def stamp(path: Path, values: dict[str, str]) -> None:
    """Set `values` as metadata_props of the graph at `path` (earlier hearsay.* entries
    replaced, others kept); RuntimeError if the graph itself would change."""
    import onnx

    model = onnx.load(str(path))
    graph = model.graph.SerializeToString()
    kept = [(p.key, p.value) for p in model.metadata_props if not p.key.startswith(PREFIX)]
    del model.metadata_props[:]
    for key, value in [*kept, *sorted(values.items())]:
        model.metadata_props.add(key=key, value=value)
    if model.graph.SerializeToString() != graph:
        raise RuntimeError(f"{path}: writing metadata would change the graph")
    onnx.save(model, str(path))


def read(path: Path) -> dict[str, str]:
    """The hearsay.* metadata_props of the graph at `path`."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props if p.key.startswith(PREFIX)}
