"""hearsay.evaluate.report_record: what the runs recorded, as the report states it; report_plots'
legends and curves."""

import json

import numpy as np
import pytest

from hearsay.evaluate import report_plots, report_record


def run(tmp_path, name, model=None, train=None, augment=None):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model": model or {}, "train": train or {},
                                               "augment": augment or {}}))
    return {"dir": str(d)}


def test_backbone_frozen_and_trained_parameters_come_from_the_run_or_say_not_recorded(tmp_path):
    pin = {"runs": {"a": run(tmp_path, "a", {"train_top": 0, "keep_layers": 12}),
                    "b": run(tmp_path, "b", {"train_top": 4, "keep_layers": 12}),
                    "c": {"dir": str(tmp_path / "gone")}}}
    metas = {"a": {"trainable_backbone_params": 1234567,
                   "layer_weights": {"weights": [0.25, 0.75], "verdict": "not applicable"}},
             "b": {}, "c": {}}
    rec = report_record.training_record(pin, metas)
    assert rec["a"]["backbone"] == "whole backbone frozen"
    assert rec["a"]["trainable_params"] == 1234567 and rec["a"]["layer_weights"] == [0.25, 0.75]
    assert rec["b"]["backbone"] == "top 4 of 12 transformer layers trained (CNN frozen)"
    assert rec["b"]["trainable_params"] == "not recorded"
    assert rec["b"]["layer_weights"] == "not recorded"
    assert rec["c"]["backbone"] == "not recorded"  # no config: never a guess
    md = "\n".join(report_record.markdown(rec))
    assert "| a | whole backbone frozen | 1,234,567 |" in md
    assert "| b | top 4 of 12 transformer layers trained (CNN frozen) | not recorded |" in md
    assert "Learned layer weights (plot below): a: not applicable; b: not recorded" in md


def test_every_readout_is_read_against_the_tripwire_bound_at_its_boundary(tmp_path):
    pin = {"runs": {"f": run(tmp_path, "f", train={"tripwire_auc": 0.5})}}
    val = [{"step": 10, "auc": 0.5001}, {"step": 20, "auc": 0.5}, {"step": 30, "auc": 0.4999}]
    metas = {"f": {"tripwire": "abort when AUC <= 0.5", "history": {"loss": [], "val": val}}}
    t = report_record.training_record(pin, metas)["f"]["tripwire"]
    assert [r["tripped"] for r in t["readouts"]] == [False, True, True]
    md = "\n".join(report_record.markdown(report_record.training_record(pin, metas)))
    assert ("- f: abort when AUC <= 0.5; readouts: step 10: AUC 0.500, step 20: AUC 0.500 "
            "TRIPPED, step 30: AUC 0.500 TRIPPED") in md


def test_configured_and_realised_source_mix_and_pooled_augmentation_rates(tmp_path):
    table = {"bonafide": {"s1": 0.5, "s2": 0.5}, "spoof": {"s1": 1.0}}
    pin = {"runs": {k: run(tmp_path, k, train={"source_mix": table}, augment={"p_aug": 0.65})
                    for k in ("x", "y")}}
    rates = {"x": {"all": {"bonafide": {"n": 100, "augmented": 0.6, "types": {"reverb": 0.1}},
                           "spoof": {"n": 100, "augmented": 0.7, "types": {"reverb": 0.2}}}},
             "y": {"all": {"bonafide": {"n": 300, "augmented": 0.2, "types": {"reverb": 0.0}},
                           "spoof": {"n": 100, "augmented": 0.7, "types": {"reverb": 0.2}}}}}
    metas = {k: {"rates": rates[k], "source_mix": {
        "mix": table, "realised": {"bonafide": {"s1": 0.52, "s2": 0.48}, "spoof": {"s1": 1.0}},
        "status": "within"}} for k in ("x", "y")}
    rec = report_record.training_record(pin, metas)
    pooled = report_record.pooled_rates(rec)["all"]
    assert pooled["bonafide"]["n"] == 400
    assert pooled["bonafide"]["augmented"] == pytest.approx((60 + 60) / 400)  # weighted by n
    md = "\n".join(report_record.markdown(rec) + report_record.caveat_lines(rec, None))
    assert ("| x | not recorded | not recorded | bonafide: s1 50.0%, s2 50.0%; spoof: s1 100.0% "
            "| bonafide: s1 52.0%, s2 48.0%; spoof: s1 100.0% (within) |") in md
    assert "| all | bonafide | 400 | 30.0% |" in md and "p_aug configured 0.65" in md
    # reverb over both classes of both runs: (10 + 20 + 0 + 20) / 600 clips
    assert "reverb is simulated (exponential-decay impulse responses, realised on 8.3%" in md


def test_a_recipe_chosen_on_the_inner_folds_gets_the_selection_bias_caveat():
    with_choice = "\n".join(report_record.caveat_lines({}, {"chosen": "core+extra",
                                                            "n_clips": 900}))
    assert 'Recipe-selection bias: the recipe "core+extra" was chosen on the pooled ' \
           "inner-fold scores of 900 clips" in with_choice
    assert "optimistic" in with_choice and "Physical replay is not covered" in with_choice
    tie = "\n".join(report_record.caveat_lines({}, {"chosen": None, "n_clips": 900}))
    assert "Recipe-selection bias" not in tie and "no recipe comparison was recorded" in tie


def test_spend_lines_give_the_cost_per_job_and_name_the_ledger_without_its_folder():
    lines = "\n".join(report_record.spend_lines({
        "total_usd": 4.0, "status": "complete", "note": "every rental closed",
        "source": "/somewhere/deep/docs/ledger.csv", "by_job": {"full": 1.0, "fold": 3.0}}))
    assert "$4.00 (complete; every rental closed; from the ledger ledger.csv)" in lines
    assert "| fold | 3.00 |\n| full | 1.00 |" in lines and "/somewhere" not in lines


def capture(monkeypatch):
    figs = []
    monkeypatch.setattr(report_plots, "_save", lambda fig, path: figs.append(fig) or path)
    return figs


def test_det_legend_sits_outside_the_curves(monkeypatch, tmp_path):
    figs = capture(monkeypatch)
    rng = np.random.default_rng(0)
    y = np.arange(200) % 2 == 1
    curves = {f"set {i}": (rng.normal(size=200) + y, y) for i in range(5)}
    report_plots.plot_det(curves, tmp_path / "det.png")
    fig = figs[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    box, legend = ax.get_window_extent(), ax.get_legend().get_window_extent()
    assert legend.x0 >= box.x1  # right of the axes: it covers no curve
    assert len(ax.get_legend().get_texts()) == 6  # five sets + chance


def test_training_curves_need_a_recorded_loss(monkeypatch, tmp_path):
    figs = capture(monkeypatch)
    assert report_plots.plot_curves({"full": {"loss": [], "val": []}, "x": None},
                                    tmp_path / "t.png") is None
    hist = {"loss": list(np.linspace(1, 0.2, 300)),
            "val": [{"step": 100, "auc": 0.8, "min_dcf": 0.5}]}
    assert report_plots.plot_curves({"fold0": hist}, tmp_path / "t.png") == tmp_path / "t.png"
    loss_ax, auc_ax, _ = figs[0].axes
    assert len(loss_ax.lines) == 2 and list(auc_ax.lines[0].get_xdata()) == [100]


def test_the_loss_line_is_centred_and_keeps_every_step():
    y = np.arange(10.0)
    assert report_plots.smooth(y, 3).tolist() == [0.5, 1, 2, 3, 4, 5, 6, 7, 8, 8.5]  # no lag
    assert report_plots.smooth_window(5) == 1 and report_plots.smooth_window(300) == 31
    assert report_plots.smooth_window(10_000) == report_plots.SMOOTH_STEPS


def test_every_histogram_panel_draws_the_one_threshold_it_is_given(monkeypatch, tmp_path):
    figs = capture(monkeypatch)
    y = np.arange(40) % 2 == 1
    sets = {"out-of-fold": (np.linspace(-2, 2, 40), y), "holdout": (np.linspace(5, 9, 40), y)}
    report_plots.plot_hist(sets, tmp_path / "h.png", 0.25)
    for ax in figs[0].axes:
        assert [tuple(line.get_xdata()) for line in ax.lines] == [(0.25, 0.25)]
        assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_the_codec_readout_legend_sits_outside_the_bars(monkeypatch, tmp_path):
    import matplotlib.pyplot as plt

    from hearsay.evaluate import readouts

    figs = []
    monkeypatch.setattr(plt, "close", figs.append)
    row = {"eer": 0.6, "min_dcf": 1.0}
    codec = {"n_clips": 18, "rows": {c: row for c in ("clean", "mp3", "opus")}}
    assert readouts.plot_codecs(codec, tmp_path / "c.png") == tmp_path / "c.png"
    ax = figs[0].axes[0]
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
