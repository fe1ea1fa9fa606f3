"""twin/plot.py: column-width figures, honest aggregation of long series, ``hpctwin plot gantt RUN``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpctwin.twin.plot import COLUMN_WIDTH_IN, draw_gantt, envelope, figure, gantt_window, metric_label, save_png
from hpctwin.twin.cli import main as cli_main
from hpctwin.twin.run import RunConfig, run
from tests.helpers import workload


def _png_size(path):
    import struct
    data = path.read_bytes() if hasattr(path, "read_bytes") else path
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_envelope_hand_checked():
    t = np.arange(8) * 10.0                      # 8 samples of 10 s: [0, 80) s
    v = np.array([1, 5, 2, 2, 0, 9, 3, 3], float)
    edges, lo, hi, mean = envelope(t, v, 4)
    assert edges.tolist() == [0, 20, 40, 60, 80]
    assert lo.tolist() == [1, 2, 0, 3] and hi.tolist() == [5, 2, 9, 3]
    assert mean.tolist() == [3, 2, 4.5, 3]


def test_envelope_conserves_the_time_average_and_every_extreme():
    rng = np.random.default_rng(0)
    t = np.arange(100_000) * 15.0
    v = rng.random(100_000)
    v[12_345] = 7.0                                # one spike must survive aggregation
    edges, lo, hi, mean = envelope(t, v, 500)      # 200 samples per bin
    assert np.nanmax(hi) == 7.0 and np.nanmin(lo) == v.min()
    assert np.mean(mean) == pytest.approx(v.mean(), rel=1e-12)
    assert np.all(lo <= mean) and np.all(mean <= hi)


def test_envelope_marks_empty_bins():
    edges, lo, hi, mean = envelope(np.array([0.0, 100.0]), np.array([1.0, 2.0]), 4, end=200.0)
    assert np.isnan(mean[1]) and np.isnan(lo[1]) and mean[0] == 1 and mean[2] == 2


def test_metric_labels_carry_units():
    assert metric_label("mean_wait_s") == "mean wait (s)"
    assert metric_label("energy_kwh") == "energy (kWh)"
    assert metric_label("peak_facility_w") == "peak facility (W)"
    assert metric_label("mean_bsld") == "mean bounded slowdown (tau = 10 s)"


def test_figures_are_column_width(tmp_path):
    fig, ax = figure(height_in=2.0)
    ax[0][0].plot([0, 1], [0, 1])
    ax[0][0].set_xlabel("time (h)")
    w, h = _png_size(save_png(fig, tmp_path / "f.png", dpi=100))
    assert 0.8 * COLUMN_WIDTH_IN * 100 < w <= COLUMN_WIDTH_IN * 100 + 5    # tight bbox trims the margins
    assert 150 < h <= 205


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("g") / "run"
    wl = workload([(1, 0, 100, 2, 200), (2, 10, 50, 4, 60), (3, 20, 300, 1, 100)])
    run(RunConfig(workload="tiny", scheduler="fcfs", nodes=4, out=str(d), quiet=True), workload=wl)
    return d


def test_gantt_bars_are_the_jobs_allocations(tiny_run):
    jobs = pd.read_csv(tiny_run / "jobs.csv")
    fig, ax = figure()
    shown, inwin, unit = draw_gantt(ax[0][0], jobs, 4, (0.0, 3600.0))
    boxes = [c.get_datalim(ax[0][0].transData) for c in ax[0][0].collections]
    bars = [(round(b.x0 * 3600), round(b.width * 3600), b.y0, b.height) for b in boxes]
    assert (shown, inwin, unit) == (3, 3, "h")
    # job 1 on units 0-1 over [0, 100) s, job 2 on 0-3 over [100, 150), job 3 on 0 over [150, 250)
    assert bars == [(0, 100, 0, 2), (100, 50, 0, 4), (150, 100, 0, 1)]
    save_png(fig)


def test_gantt_window_clips_and_counts(tiny_run):
    jobs = pd.read_csv(tiny_run / "jobs.csv")
    fig, ax = figure()
    shown, inwin, _ = draw_gantt(ax[0][0], jobs, 4, (120.0, 200.0), max_jobs=1)
    assert (shown, inwin) == (1, 2)                 # jobs 2 and 3 overlap [120, 200); only the first drawn
    save_png(fig)
    assert gantt_window(jobs, 10) == (0.0, 250.0)   # small run: the whole of it


def test_plot_gantt_cli(tiny_run, tmp_path, capsys):
    out = tmp_path / "g.png"
    assert cli_main(["plot", "gantt", str(tiny_run), "--out", str(out), "--window", "0:300"]) == 0
    assert "3 of 3 jobs in [0, 300] s" in capsys.readouterr().out
    w, _ = _png_size(out)
    assert 0.8 * COLUMN_WIDTH_IN * 300 < w <= COLUMN_WIDTH_IN * 300 + 15      # 300 dpi, column width
    assert cli_main(["plot", "gantt", str(tmp_path)]) == 2
    assert "not a finished run folder" in capsys.readouterr().err
    assert cli_main(["plot", "pie", str(tiny_run)]) == 2
    assert "unknown plot 'pie'; available: gantt" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["plot", "gantt", str(tiny_run), "--window", "5:1"])


def test_bar_plot_interval_never_below_zero(tmp_path):
    from hpctwin.experiments.tables import bar_plot
    agg = pd.DataFrame({"policy": ["a", "b"], "mean_wait_s": [50.0, 400.0], "mean_wait_s_ci95": [80.0, 10.0]})
    import matplotlib.axes
    seen = {}
    orig = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, yerr=None, **kw):
        seen["yerr"] = np.asarray(yerr)
        return orig(self, x, y, yerr=yerr, **kw)
    matplotlib.axes.Axes.errorbar = spy
    try:
        bar_plot(agg, ["policy"], "mean_wait_s", tmp_path / "b.png", title="t" * 200)
    finally:
        matplotlib.axes.Axes.errorbar = orig
    assert seen["yerr"].tolist() == [[50.0, 10.0], [80.0, 10.0]]   # lower error clipped at 0 s
    assert (tmp_path / "b.png").is_file()


def test_compare_schedulers_plot_has_no_bars_on_a_log_axis(tmp_path):
    from hpctwin.experiments.compare_schedulers import plot
    import matplotlib.pyplot as plt
    df = pd.DataFrame({"policy": ["fcfs+none", "fcfs+easy"], "log": ["L", "L"], "mean_bsld": [900.0, 3.0]})
    captured = []
    orig = plt.Figure.savefig

    def grab(self, *a, **k):
        ax = self.axes[0]
        captured.append(dict(scale=ax.get_yscale(), bars=len(ax.patches), ylim=ax.get_ylim()))
        return orig(self, *a, **k)
    plt.Figure.savefig = grab
    try:
        plot(df, tmp_path / "wide.png")
        plot(df.assign(mean_bsld=[4.0, 2.0]), tmp_path / "narrow.png")
    finally:
        plt.Figure.savefig = orig
    wide, narrow = captured
    assert wide["scale"] == "log" and wide["bars"] == 0          # 300x spread: markers on a log axis
    assert narrow["scale"] == "linear" and narrow["bars"] == 2 and narrow["ylim"][0] == 1.0


def test_gantt_colours_users_and_labels_calendar_time(tmp_path):
    """Bars are coloured by user (distinct for the busiest, grey for the rest, in a legend) and the axis
    names the window's calendar start when the log's Unix time is known."""
    from hpctwin.twin.plot import OTHER_GREY, USER_COLOURS, time_label
    n = USER_COLOURS + 3
    jobs = pd.DataFrame({"job_id": range(n), "submit": 0.0, "start": [10.0 * k for k in range(n)],
                         "end": [10.0 * k + 5 for k in range(n)], "nodes": ["0"] * n,
                         "user": list(range(n))})
    jobs.loc[0:2, "user"] = 0                      # user 0 has the most jobs: the first colour
    fig, ax = figure()
    draw_gantt(ax[0][0], jobs, 4, (0.0, 1000.0), unix_start=820454400.0)
    colours = [tuple(c.get_facecolor()[0]) for c in ax[0][0].collections]
    assert colours[0] == colours[1] == colours[2]
    assert len(set(colours)) == USER_COLOURS + 1            # USER_COLOURS distinct + grey for the rest
    from matplotlib.colors import to_rgba
    assert colours[-1] == to_rgba(OTHER_GREY)
    assert ax[0][0].get_xlabel() == "hours from 1996-01-01 00:00 UTC"
    assert "other users grey" in ax[0][0].get_legend().get_texts()[-1].get_text()
    assert time_label(86400 * 3.5, "days") == "days from day 3.50 of the log"
    save_png(fig)
