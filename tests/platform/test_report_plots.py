"""Plots exist and are not blank; curve alignment numbers; TensorBoard side-by-side logdir."""

from __future__ import annotations

import numpy as np
import pytest
from test_compare_support import write_synthetic_run

from contrastlab.experiments import report as rp
from contrastlab.experiments import results as rs
from contrastlab.experiments.plots import aggregate_curve, choose_tag, curve_tags, is_metric_tag, mean_band


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


def test_the_aggregate_panel_is_titled_with_the_curve_it_draws(tmp_path, monkeypatch):
    """New-user trial: simclr smoke draws train/loss (its primary metric is measured once) and the aggregate panel
    was titled "eval/linear_top1 over 1 task" above an axis "IQM of train/loss"; so was a --curve choice."""
    from matplotlib.figure import Figure

    from contrastlab.experiments import plots

    for seed in (1, 2):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": 0.5}, curve=[0.1, 0.2, 0.4])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    saved, real_savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: saved.append(fig) or real_savefig(fig, *a, **k))
    plots.plot_aggregate(groups, tmp_path / "aggregate.png", tags={"toy": "train/loss"})
    plots.plot_aggregate(groups, tmp_path / "aggregate2.png")
    titles = [(fig.axes[0].get_title(), fig.axes[0].get_ylabel()) for fig in saved]
    assert titles == [("train/loss over 1 task", "IQM of train/loss"), ("eval/score over 1 task", "IQM of eval/score")]


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
    assert set(paths) == {
        "results.csv", "summary.csv", "results.md", "curves.png", "aggregate.png", "final.png", "tensorboard"
    }
    for name in ("curves.png", "aggregate.png", "final.png"):
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
    assert len(rs.find_run_dirs([tmp_path])) == 7
    assert again["results.csv"].read_text().count("\n") == 8


def test_curve_falls_back_from_a_once_logged_primary_metric() -> None:
    from contrastlab.experiments.plots import choose_tag

    points = {"eval/linear_top1": 1, "eval/knn_top1": 5, "train/loss": 20}
    assert choose_tag(points, "eval/linear_top1", points) == "eval/knn_top1"
    points = {"eval/linear_top1": 1, "train/loss": 20}
    assert choose_tag(points, "eval/linear_top1", points) == "train/loss"
    points = {"eval/episode_return": 4, "train/loss": 20}
    assert choose_tag(points, "eval/episode_return", points) == "eval/episode_return"


def _write_curl_like_run(root, loss, seed, returns):
    """A run with the tags the curl plugin logs: every eval metric with the ``_vs_env_frames`` suffix."""
    import json

    from contrastlab.plugins.curl.task import FRAMES, CurlTask

    primary = CurlTask.primary_metric
    run = write_synthetic_run(
        root, plugin="curl", loss=loss, seed=seed, primary=primary, final={primary: returns[-1], f"{primary}_std": 9.0}
    )
    with open(run / "metrics.jsonl", "w") as fh:
        for i, ret in enumerate(returns):
            frames = i * 10_000
            row = {"step": frames, "wall_time": float(i), f"{primary}{FRAMES}": ret, f"{primary}_std{FRAMES}": 9.0}
            fh.write(json.dumps(row) + "\n")
            train = {"step": frames, f"train/critic_loss{FRAMES}": 1.0, f"train/alpha{FRAMES}": 0.1}
            fh.write(json.dumps(train) + "\n")
    return primary + FRAMES


def test_curl_report_draws_the_return_not_its_std(tmp_path, monkeypatch):
    """Regression: the curve drawn for curl is eval/episode_return_vs_env_frames (the primary metric), not the
    alphabetically first eval tag eval/episode_return_std_vs_env_frames."""
    import matplotlib.axes

    for loss, lift in (("infonce", 0.0), ("dcl", 50.0)):
        for seed in (1, 2, 3):
            returns = [100.0 + lift + 60.0 * i + seed for i in range(11)]
            expected = _write_curl_like_run(tmp_path, loss, seed, returns)
    assert expected == "eval/episode_return_vs_env_frames"
    drawn = []
    original = matplotlib.axes.Axes.plot

    def spy(self, *args, **kwargs):
        drawn.append((self.get_figure().get_suptitle(), list(args[1])))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    paths = rp.build_report([tmp_path], tmp_path / "report")
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path / "runs"])])
    assert curve_tags(groups) == {"curl": expected}
    curves = [y for title, y in drawn if title.startswith("learning curves")]
    assert len(curves) == 2 and all(min(y) > 100 for y in curves)  # returns, never the std (9.0)
    assert sorted(round(y[-1]) for y in curves) == [702, 752]  # mean over seeds 1..3 of the last return
    aggregate = [y for title, y in drawn if title.startswith("aggregate")]
    assert len(aggregate) == 2 and all(min(y) > 100 for y in aggregate)
    assert f"`{expected}`" in paths["results.md"].read_text()


def test_primary_tag_matching():
    assert is_metric_tag("eval/episode_return_vs_env_frames", "eval/episode_return")
    assert not is_metric_tag("eval/episode_return_std_vs_env_frames", "eval/episode_return")
    assert is_metric_tag("eval/top1", "top1") and not is_metric_tag("eval/top1", "eval/top5")
    tags = ["eval/episode_return_std_vs_env_frames", "eval/episode_return_vs_env_frames", "train/loss_vs_env_frames"]
    points = dict.fromkeys(tags, 11)
    assert choose_tag(tags, "eval/episode_return", points) == "eval/episode_return_vs_env_frames"
    assert choose_tag(tags, "eval/episode_return") == "eval/episode_return_vs_env_frames"
    # a primary logged twice (start and end of a tiny run) is still its own curve
    points["eval/episode_return_vs_env_frames"] = 2
    assert choose_tag(tags, "eval/episode_return", points) == "eval/episode_return_vs_env_frames"
    # without the primary, a dispersion tag is never the fallback
    assert choose_tag(["eval/x_std", "train/loss"], "eval/missing") == "train/loss"


def test_aggregate_curve_is_iqm_over_tasks_and_seeds():
    flat = [(0, 0.0), (10, 1.0)]
    tasks = [[[(0, 0.0), (10, 10.0)], [(0, 2.0), (10, 12.0)]], [[(0, 4.0), (10, 14.0)], [(0, 100.0), (10, 110.0)]]]
    steps, est, lo, hi = aggregate_curve(tasks)
    assert steps.tolist() == [0, 10]
    assert est.tolist() == pytest.approx([3.0, 13.0])  # IQM of {0, 2, 4, 100}: mean of 2 and 4
    assert (lo <= est).all() and (est <= hi).all()
    steps, est, lo, hi = aggregate_curve([[flat]])
    assert est.tolist() == [0.0, 1.0] and np.isnan(lo).all()  # one run: no interval
    assert len(aggregate_curve([[[]]])[0]) == 0


def test_a_crashed_seed_neither_cuts_nor_shifts_the_curves(tmp_path, monkeypatch):
    """Curves were drawn from every run, completed or not: seeds are aligned on the steps they all cover, so a
    seed that crashed at step 20 cut the completed seeds' curves to steps 10-20, and its values entered the mean
    (and the aggregate IQM). The tables count the completed seeds only; so do the curves now."""
    from contrastlab.experiments import plots

    good = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    for seed in (1, 2):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": 0.6}, curve=good)
    write_synthetic_run(tmp_path, loss="a", seed=3, status="failed", error="boom", curve=[5.0, 5.0])
    write_synthetic_run(tmp_path, loss="b", seed=1, status="failed", error="boom", curve=[0.3, 0.2])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert [len(plots.curve_runs(g)) for g in groups] == [2, 1]  # b: nothing completed, what it logged is shown
    drawn: dict[str, tuple] = {}
    monkeypatch.setattr(plots, "mean_band", lambda curves: drawn.setdefault(str(len(drawn)), mean_band(curves)))
    plots.plot_curves(groups, tmp_path / "curves.png")
    steps, mean, _ = drawn["0"]
    assert steps.tolist() == [10, 20, 30, 40, 50, 60] and mean == pytest.approx(good)
    seen: list = []
    monkeypatch.setattr(plots, "aggregate_curve", lambda tasks: seen.append(tasks) or aggregate_curve(tasks))
    plots.plot_aggregate(groups, tmp_path / "aggregate.png")
    assert [len(runs) for tasks in seen for runs in tasks] == [2]  # a's two completed seeds; b never completed


def test_final_png_title_names_the_tables_interval_and_fits_one_panel(tmp_path, monkeypatch):
    """final.png's whisker is the main table's Student-t interval; its title said "bootstrap" and, with one task
    panel, ran off both edges of the figure."""
    from matplotlib.figure import Figure

    saved = []
    real_savefig = Figure.savefig

    def keep(fig, path, *args, **kwargs):
        saved.append((fig, str(path)))
        return real_savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    for loss, final in (("infonce", (0.70, 0.72)), ("dcl", (0.74, 0.78))):
        for seed, value in zip((1, 2), final, strict=True):
            write_synthetic_run(tmp_path, loss=loss, seed=seed, curve=[value] * 4, final={"score": value})
    rp.build_report([tmp_path / "runs"], tmp_path / "report")
    (fig,) = [f for f, path in saved if path.endswith("final.png")]
    title = fig._suptitle
    assert "t-interval" in title.get_text() and "bootstrap" not in title.get_text()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box, frame = title.get_window_extent(FigureCanvasAgg(fig).get_renderer()), fig.bbox
    assert box.x0 >= frame.x0 and box.x1 <= frame.x1, (box, frame)


def test_a_final_only_primary_falls_back_to_the_plugins_own_loss_curve():
    """pu measures test/accuracy once, at the end, and logs its contrastive loss as ``pretrain/loss`` (no
    ``train/loss``, no ``eval/`` curve): curves.png showed one dot per configuration instead of that curve."""
    tags = ["pretrain/loss", "pretrain/labeled_per_batch", "classifier/risk", "test/accuracy", "test/f1"]
    points = {"pretrain/loss": 20, "pretrain/labeled_per_batch": 20, "classifier/risk": 10, "test/accuracy": 1,
              "test/f1": 1}
    assert choose_tag(tags, "test/accuracy", points) == "pretrain/loss"
    assert choose_tag(tags[:3], "test/accuracy") == "pretrain/loss"  # without point counts, when nothing carries it
    points["train/loss"] = 5  # train/loss still comes first where there is one
    assert choose_tag([*tags, "train/loss"], "test/accuracy", points) == "train/loss"


def test_the_x_axis_says_environment_frames_for_rl_curves():
    """RL plugins log against environment frames (``..._vs_env_frames``); every other curve is per step."""
    from contrastlab.experiments.plots import _xlabel

    assert _xlabel("eval/episode_return_vs_env_frames") == "environment frames"
    assert _xlabel("train/loss") == "step"
    assert _xlabel(None) == "step"


def _figures_saved(monkeypatch) -> list:
    """Every matplotlib figure saved from now on, in order."""
    from matplotlib.figure import Figure

    saved, real_savefig = [], Figure.savefig

    def keep(fig, path, *args, **kwargs):
        saved.append(fig)
        return real_savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved


def _panel_texts(ax) -> tuple[list[str] | None, list[str]]:
    """A panel's legend entries (``None`` without a legend) and its free texts."""
    legend = ax.get_legend()
    return ([t.get_text() for t in legend.get_texts()] if legend else None), [t.get_text() for t in ax.texts]


def test_a_panel_says_when_it_has_no_curve_and_labels_the_seeds_it_averages(tmp_path, monkeypatch):
    """A task whose runs logged no curve gets "no curves logged" instead of an empty frame; a drawn curve is
    labelled with its configuration and seed count. The aggregate panel draws a configuration only with curves in
    every task, and says so when none has."""
    from contrastlab.experiments import plots

    for seed in (1, 2):
        write_synthetic_run(tmp_path, plugin="toy", loss="a", seed=seed, final={"score": 0.5}, curve=[0.1, 0.2, 0.4])
    write_synthetic_run(tmp_path, plugin="other", loss="a", seed=1, final={"score": 0.5})  # logged nothing
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    by_row = {g.row: g for g in groups}
    saved = _figures_saved(monkeypatch)
    plots.plot_curves([by_row["toy"], by_row["other"]], tmp_path / "curves.png")
    plots.plot_aggregate([by_row["toy"], by_row["other"]], tmp_path / "aggregate.png")
    plots.plot_aggregate([by_row["toy"]], tmp_path / "aggregate_toy.png")
    curves, aggregate, aggregate_toy = saved
    assert _panel_texts(curves.axes[0]) == (["a (n=2)"], [])
    assert _panel_texts(curves.axes[1]) == (None, ["no curves logged"])
    assert _panel_texts(aggregate.axes[0]) == (None, ["no curves in every task"])
    assert _panel_texts(aggregate_toy.axes[0]) == (["a"], [])


@pytest.mark.parametrize(("tasks", "size"), [(1, (5.5, 4.0)), (3, (16.5, 4.0)), (4, (16.5, 8.0)), (7, (16.5, 12.0))])
def test_task_panels_fill_rows_of_at_most_three(tasks, size):
    """One panel per task, three to a row: a single task is one panel wide, not three."""
    from types import SimpleNamespace

    from contrastlab.experiments import plots

    groups = [SimpleNamespace(row=f"task{k}", column="a") for k in range(tasks)]
    fig, axes, rows, _ = plots._panels(groups, "title")
    assert tuple(fig.get_size_inches()) == pytest.approx(size)
    assert sum(ax.get_visible() for ax in axes) == tasks and rows == [f"task{k}" for k in range(tasks)]
    plots._pyplot().close(fig)


def test_seeds_that_meet_at_one_step_are_averaged_there_only():
    """Two seeds whose logged ranges share a single step are compared at that step, not extrapolated over both."""
    steps, mean, std = mean_band([[(0, 0.0), (10, 1.0)], [(10, 3.0), (20, 5.0)]])
    assert steps.tolist() == [10] and mean.tolist() == [2.0] and std == pytest.approx([np.sqrt(2.0)])


def test_no_primary_metric_matches_no_tag():
    """A plugin without a primary metric (``""``) names no curve: the fallbacks choose it."""
    assert not is_metric_tag("eval/top1", "")
    assert choose_tag(["eval/x_std", "train/loss"], "") == "train/loss"


def test_aggregate_curve_keeps_only_the_steps_every_curve_covers():
    """Curves logged over different ranges are compared where all of them have values; a single shared step is
    still a point."""
    steps, est, _, _ = aggregate_curve([[[(0, 0.0), (10, 10.0)]], [[(5, 6.0), (20, 21.0)]]])
    assert steps.tolist() == [5, 10] and est.tolist() == pytest.approx([5.5, 10.5])  # (5 + 6) / 2, (10 + 11) / 2
    steps, est, _, _ = aggregate_curve([[[(0, 1.0), (10, 3.0)]], [[(10, 5.0), (20, 7.0)]]])
    assert steps.tolist() == [10] and est.tolist() == pytest.approx([4.0])


def test_the_band_of_a_learning_curve_is_the_mean_plus_minus_the_std_over_seeds(tmp_path, monkeypatch):
    import matplotlib.axes

    from contrastlab.experiments import plots

    for seed, curve in ((1, [0.1, 0.3, 0.5]), (2, [0.3, 0.3, 0.9])):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": curve[-1]}, curve=curve)
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    bands, real_fill = [], matplotlib.axes.Axes.fill_between

    def spy(self, x, low, high, *args, **kwargs):
        bands.append((list(x), list(low), list(high)))
        return real_fill(self, x, low, high, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between", spy)
    plots.plot_curves(groups, tmp_path / "curves.png")
    ((x, low, high),) = bands
    mean, std = np.array([0.2, 0.3, 0.7]), np.array([0.1, 0.0, 0.2]) * np.sqrt(2)  # sample std of two values
    assert x == [10, 20, 30] and low == pytest.approx(mean - std) and high == pytest.approx(mean + std)


def test_final_png_marks_a_failed_configuration_and_the_metrics_direction(tmp_path, monkeypatch):
    """A configuration with no completed seed is written "failed" in place of its bar; the y-axis arrow says
    whether higher or lower is better."""
    import json

    from contrastlab.experiments import plots

    for seed, value in ((1, 0.4), (2, 0.6)):
        run = write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": value}, curve=[value] * 3)
        summary = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps({**summary, "higher_is_better": False}))
    write_synthetic_run(tmp_path, loss="b", seed=1, status="failed", error="boom")
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert [g.column for g in groups] == ["a", "b"]
    saved = _figures_saved(monkeypatch)
    plots.plot_final(groups, tmp_path / "final.png")
    (ax,) = [ax for ax in saved[0].axes if ax.get_visible()]
    assert [t.get_text() for t in ax.texts] == ["failed"] and ax.texts[0].get_position()[0] == 1  # b's slot
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([0.5])  # a's mean; none for b
    assert ax.get_ylabel() == "score ↓"


def test_the_aggregate_band_is_drawn_when_there_is_one(tmp_path, monkeypatch):
    """Two seeds give a bootstrap band around the IQM curve; one seed has none (a NaN band is not drawn)."""
    import matplotlib.axes

    from contrastlab.experiments import plots

    for seed, curve in ((1, [0.1, 0.3, 0.5]), (2, [0.3, 0.3, 0.9])):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": curve[-1]}, curve=curve)
    write_synthetic_run(tmp_path, loss="b", seed=1, final={"score": 0.5}, curve=[0.2, 0.4, 0.5])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    bands, real_fill = [], matplotlib.axes.Axes.fill_between

    def spy(self, x, low, high, *args, **kwargs):
        bands.append((list(x), np.asarray(low), np.asarray(high)))
        return real_fill(self, x, low, high, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between", spy)
    plots.plot_aggregate(groups, tmp_path / "aggregate.png")
    ((x, low, high),) = bands  # a's band only
    assert x == [10, 20, 30] and (low <= np.array([0.2, 0.3, 0.7]) + 1e-9).all()
    assert (high >= np.array([0.2, 0.3, 0.7]) - 1e-9).all() and (high > low).any()


def test_each_configuration_has_its_own_colour(tmp_path, monkeypatch):
    from contrastlab.experiments import plots

    for loss in ("a", "b", "c"):
        for seed in (1, 2):
            write_synthetic_run(tmp_path, loss=loss, seed=seed, final={"score": 0.5}, curve=[0.1, 0.2 + seed, 0.4])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    saved = _figures_saved(monkeypatch)
    plots.plot_curves(groups, tmp_path / "curves.png")
    plots.plot_aggregate(groups, tmp_path / "aggregate.png")
    for fig in saved:
        colours = [tuple(line.get_color()) for line in fig.axes[0].get_lines()]
        assert len(colours) == 3 and len(set(colours)) == 3, colours


def test_the_last_fallback_curve_is_the_first_tag():
    """Neither the primary metric, an eval/ tag nor a loss: the first other tag; only dispersion tags: the first."""
    assert choose_tag(["train/lr", "train/x"], "m") == "train/lr"
    assert choose_tag(["eval/b_std", "eval/a_std"], "m") == "eval/a_std"
