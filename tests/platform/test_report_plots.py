"""Plots exist and are not blank; curve alignment numbers; TensorBoard side-by-side logdir."""

from __future__ import annotations

import numpy as np
import pytest
from test_compare_support import write_synthetic_run

from contrastlab.platform import report as rp
from contrastlab.platform.report_plots import choose_tag, mean_band


def _image_stats(path):
    import matplotlib.image as mpimg

    img = mpimg.imread(path)[..., :3]  # [H, W, 3] in [0, 1]
    non_white = float((img.min(axis=-1) < 0.9).mean())
    colours = len(np.unique((img * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    return img.shape, non_white, colours


def test_mean_band_aligns_seeds():
    a = [(0, 0.0), (10, 1.0), (20, 2.0)]
    b = [(5, 1.0), (15, 3.0), (25, 5.0)]  # overlap is [5, 20]
    steps, mean, std = mean_band([a, b])
    assert steps.tolist() == [5, 10, 15, 20]
    a_i = np.array([0.5, 1.0, 1.5, 2.0])
    b_i = np.array([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx((a_i + b_i) / 2)
    assert std == pytest.approx(np.abs(a_i - b_i) / np.sqrt(2))  # sample std of two values
    steps, mean, std = mean_band([a])
    assert steps.tolist() == [0, 10, 20] and std.tolist() == [0, 0, 0]
    assert len(mean_band([[], []])[0]) == 0


def test_choose_tag():
    tags = ["train/loss", "eval/top1", "train/top1", "eval/knn"]
    assert choose_tag(tags, "top1") == "eval/top1"
    assert choose_tag(tags, "eval/knn") == "eval/knn"
    assert choose_tag(tags, "missing") == "eval/knn"
    assert choose_tag(["train/loss", "train/lr"], "x") == "train/loss"
    assert choose_tag([], "x") is None


def test_build_report_outputs(tmp_path):
    rng = np.random.default_rng(0)
    for loss, lift in (("infonce", 0.0), ("dcl", 0.1)):
        for seed in (1, 2, 3):
            curve = list(0.3 + lift + np.linspace(0, 0.4, 8) + rng.normal(0, 0.02, 8))
            over = ["--set loss.tau_plus=0.1"] if loss == "dcl" else []
            write_synthetic_run(
                tmp_path, loss=loss, seed=seed, overrides=over, curve=curve, final={"score": curve[-1]}, events=True
            )
    write_synthetic_run(tmp_path, loss="hcl", seed=1, status="failed", error="boom")
    out = tmp_path / "report"
    paths = rp.build_report([tmp_path / "runs"], out)
    assert set(paths) == {"results.csv", "results.md", "curves.png", "final.png", "tensorboard"}
    for name in ("curves.png", "final.png"):
        shape, non_white, colours = _image_stats(paths[name])
        assert shape[0] > 200 and shape[1] > 200
        assert non_white > 0.02, f"{name} looks blank"
        assert colours > 20, f"{name} has too few colours to hold curves/bars"
    assert "failed: boom" in paths["results.md"].read_text()

    # TensorBoard: the runs appear side by side under task/configuration/seed.
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(paths["tensorboard"]))
    mux.Reload()
    runs = sorted(mux.Runs())
    assert runs == [f"toy/{c}/s{s}" for c in ("dcl_tau_plus=0.1", "infonce") for s in (1, 2, 3)]
    values = [e.value for e in mux.Scalars("toy/infonce/s1", "eval/score")]
    assert len(values) == 8

    # Rebuilding from the report directory itself does not count the TensorBoard links twice.
    again = rp.build_report([tmp_path], tmp_path / "report2")
    assert len(rp.find_run_dirs([tmp_path])) == 7
    assert again["results.csv"].read_text().count("\n") == 8


def test_curve_falls_back_from_a_once_logged_primary_metric() -> None:
    from contrastlab.platform.report_plots import choose_tag

    points = {"eval/linear_top1": 1, "eval/knn_top1": 5, "train/loss": 20}
    assert choose_tag(points, "eval/linear_top1", points) == "eval/knn_top1"
    points = {"eval/linear_top1": 1, "train/loss": 20}
    assert choose_tag(points, "eval/linear_top1", points) == "train/loss"
    points = {"eval/episode_return": 4, "train/loss": 20}
    assert choose_tag(points, "eval/episode_return", points) == "eval/episode_return"
