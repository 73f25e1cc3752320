"""The model folder's description files: thresholds.json, format.json and README.md (the card).

    hearsay export onnx runs/full --out export/ --meta models/<stamp>/meta.json

`hearsay export onnx` calls these after parity A held; all three are listed in SHA256SUMS (the
folder's identity: a decision read from thresholds.json is the folder's own).

  thresholds.json  meta.json's "decision" (hearsay.metrics.calibration: the out-of-fold minDCF,
                   EER and false-alarm-rate thresholds on the logit, each with the set it came
                   from, and the affine logit -> LLR calibration), with "default": "min_dcf" and the
                   sha256 of the meta.json it was copied from. Written only with --meta; a
                   meta.json of another checkpoint (its full run's weights sha256 is not this
                   checkpoint's) or one without "decision" is refused (MetaError).
  format.json      names the format: FORMAT, the inputs and output, the front end file, every
                   graph with the operator domains it uses (read from the graph: "portable" =
                   standard ONNX operators only, loadable by any ONNX runtime), the score rule,
                   and raw_audio: how front_end.onnx takes decoded audio (raw_audio()).
  README.md        the model card: Hub YAML front matter (front_matter: library, tags, metrics,
                   datasets, license), then data, recipe, metrics with intervals, the gate
                   verdict, thresholds, intended use and limits, written from meta.json (without
                   --meta it says that no campaign record was given and leaves those parts out).
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.contracts import model_dir
from hearsay.engines.cpu_engine import INSTALL_SCORER
from hearsay.util.hashing import sha256_file

FORMAT = "hearsay-detector-onnx"
FORMAT_VERSION = 1
STANDARD_DOMAINS = ("", "ai.onnx")  # the default ONNX operator set (either spelling)
# Named placeholders of the card's front matter: no licence has been chosen for the weights, and
# meta.json does not record the training corpora's names yet. Neither is a Hub identifier, so
# whoever publishes the folder must replace them (tests/export/test_model_card.py reads them).
LICENSE_PLACEHOLDER = "LICENSE-NOT-CHOSEN"
DATASETS_PLACEHOLDER = "DATASETS-NOT-RECORDED"
CARD_TAGS = ("audio-classification", "audio-deepfake-detection", "anti-spoofing", "speech",
             "onnx", "hearsay")
CARD_METRICS = ("eer", "min_dcf", "auc", "cllr")  # the columns of the card's metrics table


class MetaError(Exception):
    """meta.json unusable for this export (missing, another checkpoint, no "decision")."""


def read_meta(path: Path, checkpoint_sha256: str | None) -> dict:
    """meta.json after checking that it describes this checkpoint (when its sha256 is known)."""
    path = Path(path)
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise MetaError(f"cannot read {path}: {err} (pass models/<stamp>/meta.json, written by "
                        "`hearsay assemble`)") from None
    if not isinstance(meta.get("decision"), dict):
        raise MetaError(f"{path} has no \"decision\" (thresholds + calibration): it was "
                        "assembled by an older hearsay; run `hearsay assemble` again")
    full = ((meta.get("identity") or {}).get("runs") or {}).get("full") or {}
    if checkpoint_sha256 is not None and full.get("weights_sha256") != checkpoint_sha256:
        raise MetaError(f"{path} describes the full run with weights sha256 "
                        f"{full.get('weights_sha256')}, not this checkpoint's {checkpoint_sha256}"
                        " (pass the meta.json of the campaign that pinned this checkpoint)")
    return {**meta, "_sha256": sha256_file(path), "_checked": checkpoint_sha256 is not None}


def thresholds_file(meta: dict) -> dict:
    """thresholds.json's content from a read_meta() dict."""
    return {"format": f"{FORMAT}/thresholds", "format_version": FORMAT_VERSION,
            "default": "min_dcf", **meta["decision"],
            "from": {"campaign": meta.get("name"), "stamp": meta.get("stamp"),
                     "meta_json_sha256": meta["_sha256"],
                     "checkpoint_checked": meta["_checked"]}}


def graph_domains(path: Path) -> list[str]:
    """The operator domains a graph's nodes use ("" = standard ONNX), sorted."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return sorted({n.domain for n in model.graph.node})


def config_file(folder: Path, graphs: list[str], front: dict, has_thresholds: bool) -> dict:
    """format.json's content: the format and how to call the graphs in `folder`."""
    described = {}
    for name in graphs:
        domains = graph_domains(Path(folder) / name)
        described[name] = {"domains": domains,
                           "portable": all(d in STANDARD_DOMAINS for d in domains)}
    return {"format": FORMAT, "format_version": FORMAT_VERSION,
            "task": "speech deepfake detection: synthetic (spoof) vs bona fide speech",
            "inputs": {"input_values": "float32 (batch, samples): 16 kHz mono, prepared by "
                       "hearsay.sound.audio.prepare with front_end.json (trim, band-limit, cap, "
                       "zero-mean unit-variance over the valid samples), zero-padded",
                       "attention_mask": "int64 (batch, samples): 1 on valid samples, 0 on "
                       "padding"},
            "outputs": {"logits": "float32 (batch,): high = synthetic; score = sigmoid(logit)"},
            "sample_rate": front["sample_rate"], "front_end": model_dir.FRONT_END,
            "graphs": described,
            "thresholds": model_dir.THRESHOLDS if has_thresholds else None,
            "decision_rule": "synthetic when logit >= threshold (thresholds.json names them)",
            "raw_audio": raw_audio(Path(folder)),
            "scorer": f"hearsay-score CLIPS_DIR --model THIS_FOLDER ({INSTALL_SCORER})"}


def raw_audio(folder: Path) -> dict | None:
    """format.json's recipe for a runtime fed decoded audio (hearsay.export.raw_graph), or None
    when the folder has no front_end.onnx."""
    if not (folder / model_dir.FRONT_END_GRAPH).is_file():
        return None
    return {"graph": model_dir.FRONT_END_GRAPH,
            "inputs": {"audio": "float32 (batch, samples): decoded 16 kHz mono, trimmed, then "
                       "capped at front_end.json max_s seconds, zero-padded",
                       "attention_mask": "int64 (batch, samples): 1 on valid samples"},
            "outputs": {"prepared": "the input_values of the model graphs",
                        "mask": "their attention_mask"},
            "inside": "band-limit (FIR low-pass at cutoff_hz), then zero mean and unit "
                      "variance over the valid samples",
            "trim": "frames of 400 samples every 160 (25 ms / 10 ms); frames quieter than the "
                    "loudest by front_end.json top_db (frame RMS, dB) are silence; cut the "
                    "silent frames at both ends (reference: hearsay.sound.audio.trim_silence)",
            "windows": "for a file longer than max_s: windows of max_s every 4 s inside the "
                       "trimmed span, each through both graphs, score = the highest window "
                       "(reference: hearsay.sound.windows; hearsay-score --hop-s)",
            "chain": f"{model_dir.FRONT_END_GRAPH} then a model graph (onnx.compose."
                     "merge_models makes one: hearsay.export.raw_graph.raw_model)"}


def _f(v, spec=".4f") -> str:
    try:
        return format(float(v), spec)
    except (TypeError, ValueError):
        return "undefined"


def _metric_lines(meta: dict) -> list[str]:
    boot = ((meta.get("uncertainty") or {}).get("bootstrap")) or {}
    lines = ["| set | bona fide | synthetic | EER | minDCF 0.3 | AUC | Cllr |",
             "|---|---|---|---|---|---|---|"]
    for name, m in (meta.get("metrics") or {}).items():
        ci = boot.get(name) or {}
        eer, dcf = _f(m.get("eer")), _f(m.get("min_dcf"))
        if ci.get("eer"):
            eer += f" ({_f(ci['eer'][0])} - {_f(ci['eer'][1])})"
        if ci.get("min_dcf"):
            dcf += f" ({_f(ci['min_dcf'][0])} - {_f(ci['min_dcf'][1])})"
        lines.append(f"| {name} | {m.get('n_bonafide')} | {m.get('n_spoof')} | {eer} | {dcf} "
                     f"| {_f(m.get('auc'))} | {_f(m.get('cllr'))} |")
    level = next(iter(boot.values()), {}).get("level")
    if level:
        lines += ["", f"In brackets: {100 * level:g}% stratified bootstrap intervals (the clips' "
                  "spread only, not the training's)."]
    return lines


def front_matter(meta: dict | None) -> str:
    """The card's YAML front matter, the part the Hub and huggingface_hub.ModelCard read.

    datasets: meta.json's "datasets" (a list of names) when it has one, else the placeholder.
    Written by hand (flat keys, quoted strings) so the card needs no YAML library to write."""
    named = (meta or {}).get("datasets")
    datasets = ([str(d) for d in named] if isinstance(named, list) and named
                else [DATASETS_PLACEHOLDER])

    def items(values) -> list[str]:
        return [f"- {json.dumps(v)}" for v in values]  # a JSON string is a YAML string

    return "\n".join(["---", "library_name: onnx", "pipeline_tag: audio-classification",
                      f"license: {json.dumps(LICENSE_PLACEHOLDER)}",
                      "tags:", *items(CARD_TAGS), "metrics:", *items(CARD_METRICS),
                      "datasets:", *items(datasets), "---", ""])


def card(meta: dict | None, config: dict, parity_a: dict | None) -> str:
    """README.md of the model folder (markdown after the Hub's YAML front matter)."""
    ports = [g for g, d in config["graphs"].items() if d["portable"]]
    graphs = [f"`{g}` (" + ("standard ONNX operators" if d["portable"] else
                           "uses " + ", ".join(x for x in d["domains"] if x)) + ")"
              for g, d in config["graphs"].items()]
    lines = [front_matter(meta),
             f"# hearsay speech-deepfake detector{': ' + meta['name'] if meta else ''}", "",
             f"Format `{FORMAT}` version {FORMAT_VERSION} (format.json). Every file here is "
             "listed in SHA256SUMS; its sha256 is this folder's identity, named in every row "
             "hearsay-score writes.", "",
             "## Use", "",
             f"    {INSTALL_SCORER}",
             "    hearsay-score clips/ -o scores.csv --model THIS_FOLDER", "",
             "One row per file: `logit` (high = synthetic), `score` = sigmoid(logit), `decision` "
             "at thresholds.json's minDCF threshold (`--threshold NAME|VALUE`), `llr` with "
             f"`--llr`. Graphs: {', '.join(graphs)}"
             + (f"; `{ports[0]}` loads in any ONNX runtime." if ports else "."),
             f"Parity A (PyTorch fp32 vs onnxruntime fp32): max |delta logit| "
             f"{_f((parity_a or {}).get('max_abs_dlogit'), '.2e')}.", ""]
    if meta is None:
        return "\n".join(lines + ["No campaign record (meta.json) was given at export: data, "
                                  "metrics, gate and thresholds are unknown for this folder.",
                                  ""])
    g, dec = meta.get("gate") or {}, meta["decision"]
    t, c, s = dec["thresholds"], dec["calibration"], dec["set"]
    ids = meta.get("identity") or {}
    lines += [*(meta.get("opening") or ["## What was run", ""]),
              "## Recipe and identity", "",
              f"- bundle tree-sha `{ids.get('bundle_tree_sha')}`; base weights sha256 "
              f"{', '.join(f'`{x}`' for x in ids.get('base_weights_sha') or [])}",
              *[f"- {k}: config `{r.get('config_hash')}`, weights `{r.get('weights_sha256')}`, "
                f"{r.get('steps')} steps" for k, r in (ids.get("runs") or {}).items()],
              f"- campaign `{meta.get('stamp')}`, meta.json sha256 `{meta['_sha256']}`", "",
              "## Metrics", "", *_metric_lines(meta), "",
              f"## Gate: {g.get('outcome', 'not recorded')}", "", str(g.get("why") or ""), "",
              "## Thresholds (thresholds.json)", "",
              f"On the logit, chosen on the {s['name']} scores ({s['n_bonafide']} bona fide + "
              f"{s['n_spoof']} synthetic clips, each scored by a model that never trained on it):",
              "", "| name | logit | miss rate | false-alarm rate |", "|---|---|---|---|",
              *[f"| {k} | {_f(v['value'])} | {_f(v['p_miss'])} | {_f(v['p_fa'])} |"
                for k, v in t.items()], "",
              f"Calibration: {c['formula']} with a = {_f(c['a'])}, b = {_f(c['b'])} (Cllr "
              f"{_f(c['cllr_before'])} -> {_f(c['cllr_after'])} bits on that set).", "",
              "## Intended use and limits", "",
              "- Intended: screening recordings for synthetic (TTS / voice-conversion) speech, "
              "with a person reviewing what it flags; a threshold is a trade-off between the "
              "miss and false-alarm rates above, on clips like the training data.",
              "- The thresholds were set on first-window scores of clips (the first 8 s after "
              "trimming); hearsay-score's default takes the highest window of a long file, which "
              "rises a little with length: set thresholds on long files for long files.",
              "- Not trained or tested on physical replay (audio played through a loudspeaker "
              "and re-recorded): no claim is made about it.",
              "- Room acoustics in training are simulated (exponential-decay reverb), not "
              "recorded rooms; the augmentations cover codecs, noise, band-limits and clipping "
              "only as simulated.",
              "- Generators and speakers unlike the training data may score anywhere: the "
              "holdout rows above (a generator family never in training) show how far it "
              "carries.", ""]
    return "\n".join(lines)
