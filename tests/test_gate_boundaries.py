"""hearsay.evaluate.gate at its boundaries: a probe clip exactly at the threshold, and runs whose
shortcut measurements are missing in any way."""

import numpy as np
import pandas as pd
import pytest
from test_gate import GOOD_SHORTCUTS, campaign

from hearsay import metrics
from hearsay.evaluate import gate


def test_a_probe_clip_exactly_at_the_threshold_counts_as_a_false_alarm():
    oof, _, key = campaign(2.0, 2.0)
    j = metrics.join(oof, key)
    _, thr = metrics.min_dcf_reading(j["rank"], j["is_spoof"], *metrics.READING_OF_RECORD)
    below = np.nextafter(thr, -np.inf)
    probe = pd.DataFrame({"path": ["at", "below", "far"], "logit": [thr, below, thr - 5.0]})
    rec = gate.probe_reading(oof, key, probe, None)
    assert rec["threshold"] == thr
    assert rec["false_alarm_rate"] == pytest.approx(1 / 3)  # "at" only
    just_above = pd.DataFrame({"path": ["a", "b"], "logit": [below, below]})
    assert gate.probe_reading(oof, key, just_above, None)["false_alarm_rate"] == 0.0


NO_AUC = [
    {},  # no stream_shortcuts at all
    {"stream_shortcuts": None},
    {"stream_shortcuts": {"per_source": {}}},
    {"stream_shortcuts": {"per_source": {"all": {}}}},  # a source without its AUCs
    {"stream_shortcuts": {"per_source": {"all": {"auc": {}}}}},
    {"stream_shortcuts": {"per_source": {"all": {"auc": None}}}},
    {"stream_shortcuts": {"per_source": {"all": {"auc": {"peak": None}}}}},
]


@pytest.mark.parametrize("meta", NO_AUC)
def test_a_run_without_shortcut_measurements_never_passes_the_shortcut_check(meta):
    alone = gate.shortcut_check({"full": meta})
    assert alone["outcome"] == "not measured" and alone["unmeasured"][0].startswith("full")
    beside = gate.shortcut_check({"fold0": GOOD_SHORTCUTS, "full": meta})
    assert beside["outcome"] == "not measured"


def test_no_run_at_all_is_not_measured_and_a_measured_run_passes():
    assert gate.shortcut_check({})["outcome"] == "not measured"
    assert gate.shortcut_check({"fold0": GOOD_SHORTCUTS})["outcome"] == "pass"


def test_a_one_class_source_is_named_apart_never_unmeasured_but_a_one_class_pool_is():
    book = {"n_bonafide": 18, "n_spoof": 0, "auc": {"peak": None, "duration_s": None}}
    meta = {"stream_shortcuts": {"per_source": {**GOOD_SHORTCUTS["stream_shortcuts"]["per_source"],
                                                "audiobook": book}}}
    s = gate.shortcut_check({"fold0": meta, "full": meta})
    assert s["outcome"] == "pass" and s["unmeasured"] == []
    assert s["single_class"] == ["fold0/audiobook", "full/audiobook"]
    assert s["why"].endswith("(audiobook: one class only in the training stream, no AUC within "
                             "it; read in the pooled one)")
    few = {**book, "n_spoof": 6}                            # both classes, too few: unmeasured
    meta["stream_shortcuts"]["per_source"]["audiobook"] = few
    assert gate.shortcut_check({"full": meta})["outcome"] == "not measured"
    pool = {"stream_shortcuts": {"per_source": {"all": book, "audiobook": book}}}
    assert gate.shortcut_check({"full": pool})["outcome"] == "not measured"
