"""`hpctwin view RUN` (twin/view.py): an interactive, self-contained HTML view of a run.

The unit tests check what is drawn (rectangles, rows, colour groups, time axis) and the errors; the
browser tests open the page in a real headless Chromium (tests/browser/chromium.py; skipped with the
reason when chromium, chromedriver or selenium are missing) and check that it loads with no console
error and no network request, draws every started job, regroups the colours, and shows a job's
details on hover.
"""
from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpctwin.twin.runfolder import MARKER, is_run_folder
from hpctwin.twin.view import (OTHER_GREY, PALETTE, TimeAxis, ViewError, build_html, colour_modes, default_mode,
                               gantt_of, main, unit_ranges)
from tests.browser import chromium

bokeh = pytest.importorskip("bokeh", reason="bokeh is a dependency of hpctwin view (pip install -e .)")


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """A real 500-job synthetic run with power (utilisation, queue and power panels)."""
    from hpctwin.twin.run import RunConfig, run
    d = tmp_path_factory.mktemp("view") / "run"
    run(RunConfig(workload="synthetic:jobs=500", scheduler="easy", power=True, out=str(d)))
    return d


@pytest.fixture(scope="module")
def small_view(small_run) -> Path:
    """``hpctwin view RUN`` written once: RUN/view.html."""
    assert main([str(small_run)]) == 0
    return small_run / "view.html"


def write_run(folder: Path, rows: list[dict], summary: dict | None = None) -> Path:
    """A minimal finished run folder: jobs.csv from ``rows``, summary.json, the marker."""
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "jobs.csv", index=False)
    s = {"jobs_simulated": len(rows), "machine_units": 8, "workload": "tiny", "scheduler": "fcfs"}
    s.update(summary or {})
    (folder / "summary.json").write_text(json.dumps(s))
    (folder / MARKER).write_text(json.dumps({"hpctwin_run": 1, "files": ["jobs.csv", "summary.json"]}) + "\n")
    return folder


def job(job_id, submit, start, end, procs, nodes=None, state="COMPLETED", user=1):
    row = {"job_id": job_id, "submit": submit, "start": start, "end": end, "procs": procs, "state": state,
           "user": user}
    if nodes is not None:
        row["nodes"] = nodes
    return row


TINY = [job(1, 0, 0, 10, 3, "0-1,4"), job(2, 0, None, None, 2, "", "PENDING"), job(3, 1, 5, 8, 2, "2-3", user=2),
        job(4, 2, 20, 30, 2, "0-1", "TIMEOUT")]


# ------------------------------------------------------------------------------------------ drawing
def test_unit_ranges_parse_sort_and_merge():
    assert unit_ranges("0-3,8") == [(0, 3), (8, 8)]
    assert unit_ranges(" 4-7 , 0-3 ") == [(0, 7)]            # adjacent ranges are one rectangle
    assert unit_ranges("5") == [(5, 5)]
    assert unit_ranges("2-6,4-9,12") == [(2, 9), (12, 12)]   # overlap merged
    for bad, msg in (("3-1", "LO <= HI"), ("a", "not a unit id"), ("1,,2", "empty part"), ("-2", "not a unit id"),
                     ("1-x", "not a unit id")):
        with pytest.raises(ValueError, match=msg):
            unit_ranges(bad)


def test_gantt_rectangles_follow_the_nodes_ranges(tmp_path):
    run = write_run(tmp_path / "r", TINY)
    jobs = pd.read_csv(run / "jobs.csv")
    g = gantt_of(jobs, 8, run / "jobs.csv")
    assert g.by_units and g.started == 3 and g.never_started == 1
    assert g.rows.tolist() == [0, 2, 3]                      # start order: jobs 1, 3, 4
    assert g.lo.tolist() == [0, 4, 2, 0] and g.hi.tolist() == [1, 4, 3, 1]
    assert g.owner.tolist() == [0, 0, 1, 2] and g.n_rects.tolist() == [2, 1, 1]
    cut = gantt_of(jobs, 8, run / "jobs.csv", max_jobs=2)
    assert cut.rows.tolist() == [0, 2] and cut.started == 3 and len(cut.lo) == 3


def test_gantt_without_placements_draws_one_row_per_job(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "nodes"} for r in TINY]
    run = write_run(tmp_path / "r", rows)
    g = gantt_of(pd.read_csv(run / "jobs.csv"), 8, run / "jobs.csv")
    assert not g.by_units and g.rows.tolist() == [0, 2, 3] and g.lo.tolist() == [0, 1, 2] == g.hi.tolist()


@pytest.mark.parametrize("change, message", [
    ({"nodes": "0-8"}, r"jobs\.csv:2: field 'nodes': unit 8 is outside the machine of 8 units"),
    ({"nodes": "x-1"}, r"jobs\.csv:2: field 'nodes': 'x-1' is not a unit id or a range LO-HI"),
    ({"nodes": ""}, r"jobs\.csv:2: field 'nodes': empty for a job that ran \(1 such rows"),
    ({"end": None}, r"jobs\.csv:2: field 'end': empty for a job that started at 0 s \(1 such rows\)"),
    ({"end": -5}, r"jobs\.csv:2: field 'end': -5 s, before its start for a job that started at 0 s"),
])
def test_gantt_refuses_inconsistent_jobs(tmp_path, change, message):
    rows = [dict(TINY[0], **change)] + TINY[1:]
    run = write_run(tmp_path / "r", rows)
    with pytest.raises(ViewError, match=message):
        gantt_of(pd.read_csv(run / "jobs.csv"), 8, run / "jobs.csv")


def test_colour_by_user_gives_the_top_users_distinct_colours_and_greys_the_rest():
    # 25 users with 25, 24, ..., 1 jobs: the 19 most frequent get the palette, 6 users (21 jobs) are grey
    users = np.repeat(np.arange(25), np.arange(25, 0, -1))
    drawn = pd.DataFrame({"user": users, "state": "COMPLETED", "procs": 1})
    m = colour_modes(drawn)["user"]
    assert len(PALETTE) == 19 and len(set(PALETTE)) == 19 and OTHER_GREY not in PALETTE
    assert m["colours"] == list(PALETTE) + [OTHER_GREY]
    assert m["names"][0] == "user 0 (25 jobs)" and m["names"][18] == "user 18 (7 jobs)"
    assert m["names"][19] == "other users, grey (6 users, 21 jobs)"
    assert m["codes"][:25].tolist() == [0] * 25 and set(m["codes"][users >= 19].tolist()) == {19}
    assert default_mode(colour_modes(drawn)) == "user"


def test_colour_by_state_and_size():
    drawn = pd.DataFrame({"user": -1, "state": ["TIMEOUT", "COMPLETED", "NODE_FAIL", "COMPLETED"],
                          "procs": [1, 3, 64, 5000]})
    modes = colour_modes(drawn)
    assert modes["state"]["names"] == ["COMPLETED (2)", "TIMEOUT (1)", "NODE_FAIL (1)"]
    assert modes["state"]["codes"].tolist() == [1, 0, 2, 0]
    assert modes["size"]["names"] == ["1 unit (1)", "2-4 units (1)", "17-64 units (1)", ">4096 units (1)"]
    assert modes["user"]["names"] == ["user unknown (-1) (4 jobs)"]
    assert default_mode(modes) == "size"                    # one (unknown) user: colour by size instead


def test_time_axis_hours_or_dates():
    assert TimeAxis.of({}).x(np.array([7200.0])).tolist() == [2.0]
    assert not TimeAxis.of({"unix_start_time": None}).is_date
    assert not TimeAxis.of({"unix_start_time": True}).is_date
    dates = TimeAxis.of({"unix_start_time": 835823160})
    assert dates.is_date and dates.x(np.array([60.0])).tolist() == [(835823160 + 60) * 1000.0]
    assert "unix time 835823160 s" in dates.title


# ------------------------------------------------------------------------------------------ command
def test_view_writes_a_self_contained_page(small_run, small_view, capsys):
    text = small_view.read_text()
    assert not re.search(r"<script[^>]*\bsrc=|<link\b", text)          # BokehJS inline, nothing fetched
    assert "Run view: lublin(jobs=500" in text and "all 500 jobs that started" in text
    import h5py
    with h5py.File(small_run / "timeseries.h5") as h5:
        n = len(h5["time"])
    assert n > 4000 and f"utilisation: {n:,} samples in 4,000 bins of" in text
    assert "facility power: " in text and "queue length: " in text
    assert is_run_folder(small_run)                # view.html is a run-folder file: --force still replaces it
    assert small_view.stat().st_size < 5e6


def test_view_refuses_to_overwrite_without_force(small_run, small_view, capsys):
    before = small_view.stat().st_mtime_ns
    assert main([str(small_run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"hpctwin view: error: --out {os.path.abspath(small_view)}: exists; pass --force to replace it, or choose " \
                  "another --out"
    assert small_view.stat().st_mtime_ns == before
    assert main([str(small_run), "--force"]) == 0
    assert "view: " in capsys.readouterr().out
    for target in ("jobs.csv", "summary.json"):
        assert main([str(small_run), "--out", str(small_run / target), "--force"]) == 2
        assert "is the file this command reads" in capsys.readouterr().err


def test_view_max_jobs_and_other_out(small_run, tmp_path, capsys):
    out = tmp_path / "v.html"
    assert main([str(small_run), "--out", str(out), "--max-jobs", "40"]) == 0
    assert capsys.readouterr().out.startswith(f"view: {out} (40 of 500 jobs drawn, ")
    assert "the first 40 of 500 started jobs" in out.read_text()
    with pytest.raises(SystemExit):
        main([str(small_run), "--max-jobs", "0"])
    assert "expected a positive whole number of jobs, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("damage, names", [
    (lambda d: (d / "jobs.csv").write_bytes((d / "jobs.csv").read_bytes()[:-7]), "jobs.csv: truncated"),
    (lambda d: (d / "timeseries.h5").write_bytes(b"not hdf5"), "timeseries.h5: not a readable HDF5 file"),
    (lambda d: (d / "summary.json").write_text("{"), "summary.json:1: not valid JSON"),
    (lambda d: (d / MARKER).unlink(), "not a finished run folder"),
])
def test_damaged_run_folder_is_one_line_naming_the_file(small_run, tmp_path, capsys, damage, names):
    import shutil
    d = tmp_path / "copy"
    shutil.copytree(small_run, d)
    (d / "view.html").unlink(missing_ok=True)
    damage(d)
    assert main([str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hpctwin view: error: ") and names in err
    assert not (d / "view.html").exists()
    assert main([str(tmp_path / "nope")]) == 2
    assert "nope: no such folder" in capsys.readouterr().err


def test_bad_nodes_is_one_line_naming_line_and_field(tmp_path, capsys):
    run = write_run(tmp_path / "r", [dict(TINY[0], nodes="0-99")] + TINY[1:])
    assert main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "jobs.csv:2: field 'nodes': unit 99 is outside the machine of 8 units" in err


def test_text_from_the_run_is_escaped(tmp_path):
    evil = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
    run = write_run(tmp_path / "r", TINY, {"workload": evil, "scheduler": evil})
    text, facts = build_html(run)
    assert "<img src=x" not in text and "<script>alert" not in text and "</script><script>alert" not in text
    assert facts["drawn"] == 3 and facts["never_started"] == 1


@pytest.mark.skipif(chromium.missing() is not None, reason=f"no headless browser: {chromium.missing()}")
@pytest.mark.slow
def test_text_from_the_run_shows_as_text_in_the_browser(tmp_path):
    evil = "<img src=x onerror=alert(1)>"
    run = write_run(tmp_path / "r", TINY, {"workload": evil, "scheduler": "s</script><b>"})
    assert main([str(run)]) == 0
    with chromium.headless_chromium() as d:
        open_view(d, run / "view.html", timeout_s=20)
        shown = d.execute_script(TEXT_JS)
        assert "Run view: <img src=x onerror=alert(1)> / s</script><b>" in shown
        assert "3 jobs that started; 1 never started" in shown
        assert chromium.severe(d.get_log("browser")) == [] and chromium.external_requests(d) == []


# ------------------------------------------------------------------------------------------ browser
needs_browser = pytest.mark.skipif(chromium.missing() is not None, reason=f"no headless browser: {chromium.missing()}")

#: distinct drawn jobs (their ids) and rectangles over the Gantt's data sources, as the page holds them
COUNT_JS = """
const doc = Bokeh.documents[0], jobs = doc.get_model_by_name("gantt-jobs").data, ids = new Set();
let rects = 0;
for (const m of doc.all_models) {
  if (!m.name || !m.name.startsWith("gantt-rects-")) continue;
  rects += m.data.jk.length;
  for (const k of m.data.jk) ids.add(jobs.job_id[k]);
}
const legend = doc.get_model_by_name("gantt-legend");
return {ids: [...ids], rects: rects, title: legend.title,
        labels: legend.items.filter(i => i.visible).map(i => i.label.value)};
"""
READY_JS = """
const doc = window.Bokeh && Bokeh.documents[0], gantt = doc && doc.get_model_by_name("gantt");
return !!(gantt && doc.is_idle && Bokeh.index.find_one(gantt));"""
#: the text the page shows, inside BokehJS's shadow roots too
TEXT_JS = """
function text(root) {
  let t = "";
  for (const e of root.querySelectorAll("*")) if (e.shadowRoot) t += " " + e.shadowRoot.textContent + text(e.shadowRoot);
  return t;
}
return text(document);"""


def open_view(driver, path: Path, timeout_s: float) -> float:
    """Open ``path`` and wait until BokehJS has built the document; returns the seconds it took."""
    t0 = time.monotonic()
    driver.get(path.resolve().as_uri())
    while not driver.execute_script(READY_JS):
        assert time.monotonic() - t0 < timeout_s, f"{path} not rendered within {timeout_s} s"
        time.sleep(0.1)
    return time.monotonic() - t0


def frame_box(driver) -> list[float]:
    """The Gantt's plot area in page pixels: left, top, width, height."""
    return driver.execute_script("""
      const v = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name("gantt"));
      const f = v.frame.bbox, r = v.el.getBoundingClientRect();
      return [r.left + f.left, r.top + f.top, f.width, f.height];""")


def palette_share(png: bytes, box: list[float], colours: list[str]) -> float:
    """Fraction of the pixels of ``box`` within a few levels of one of ``colours``."""
    from PIL import Image
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)
    x, y, w, h = (round(v) for v in box)
    area = img[y + 2:y + h - 2, x + 2:x + w - 2].reshape(-1, 3)
    near = np.zeros(len(area), dtype=bool)
    for c in colours:
        rgb = np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)])
        near |= np.abs(area - rgb).max(axis=1) <= 12
    return float(near.mean())


@needs_browser
@pytest.mark.slow
def test_view_in_headless_chromium(small_run, small_view):
    jobs = pd.read_csv(small_run / "jobs.csv")
    started = jobs[np.isfinite(jobs["start"])]
    total = json.loads((small_run / "summary.json").read_text())["machine_units"]
    g = gantt_of(jobs, total, small_run / "jobs.csv")
    with chromium.headless_chromium() as d:
        open_view(d, small_view, timeout_s=20)
        got = d.execute_script(COUNT_JS)
        assert sorted(got["ids"]) == sorted(started["job_id"].tolist()) and len(got["ids"]) == 500
        assert got["rects"] == len(g.lo) == int(g.n_rects.sum())
        assert got["title"] == "colour: job size" and got["labels"][0].startswith("1 unit (")
        # WebGL drew: the Gantt's area shows the size classes' colours
        time.sleep(0.5)
        colours = json.loads(d.execute_script(
            "return JSON.stringify(Bokeh.documents[0].get_model_by_name('gantt-legend').items"
            ".filter(i => i.visible).map(i => i.renderers[0].glyph.fill_color)"
            ".map(c => typeof c === 'string' ? c : c.value))"))
        assert palette_share(d.get_screenshot_as_png(), frame_box(d), colours) > 0.3
        # colour by state: the same jobs and rectangles, regrouped
        d.execute_script("Bokeh.documents[0].get_model_by_name('colour-by').value = 'state'")
        regrouped = d.execute_script(COUNT_JS)
        assert sorted(regrouped["ids"]) == sorted(got["ids"]) and regrouped["rects"] == got["rects"]
        assert regrouped["title"] == "colour: state" and regrouped["labels"] == ["COMPLETED (500)"]
        # hover: zoom on the longest job and point at its middle
        k = int((started["end"] - started["start"]).to_numpy().argmax())
        j = started.iloc[k]
        lo, hi = unit_ranges(j["nodes"])[0]
        d.execute_script("const p = Bokeh.documents[0].get_model_by_name('gantt');"
                         "p.x_range.start = arguments[0]; p.x_range.end = arguments[1];",
                         j["start"] / 3600 - 1, j["end"] / 3600 + 1)
        time.sleep(0.5)
        x, y, w, h = frame_box(d)
        frac_y = 1 - ((lo + hi + 1) / 2) / total
        from selenium.webdriver.common.action_chains import ActionChains
        ActionChains(d).move_by_offset(int(x + w / 2), int(y + h * frac_y)).perform()
        tip = ""
        for _ in range(30):
            tip = d.execute_script(TEXT_JS)
            if "submit:" in tip:
                break
            time.sleep(0.1)
        assert f"job:{int(j['job_id'])}" in tip.replace(" ", "")
        assert f"start:{int(j['start']):,}s" in tip.replace(" ", "")
        assert f"wait:{int(j['wait']):,}s" in tip.replace(" ", "") and "state:COMPLETED" in tip.replace(" ", "")
        logs = d.get_log("browser")
        assert chromium.severe(logs) == []
        assert chromium.external_requests(d) == []


def _ctc_log() -> Path | None:
    from hpctwin.datasets.registry import default_data_dir
    p = default_data_dir() / "CTC-SP2" / "CTC-SP2-1996-3.1-cln.swf.gz"
    return p if p.is_file() else None


@pytest.mark.slow
@needs_browser
@pytest.mark.skipif(_ctc_log() is None, reason="CTC-SP2 log not available (shared/datasets/CTC-SP2)")
def test_ctc_sp2_view_opens_in_time(tmp_path, capsys):
    """The whole CTC-SP2 log (77,073 jobs, 189,944 rectangles) with power: small file, opens in time."""
    from hpctwin.twin.run import RunConfig, run
    d = tmp_path / "ctc"
    run(RunConfig(workload="CTC-SP2", scheduler="easy", system="generic", power=True, out=str(d)))
    assert main([str(d)]) == 0
    size = (d / "view.html").stat().st_size
    assert size < 30e6, f"view.html is {size / 1e6:.1f} MB"
    jobs = pd.read_csv(d / "jobs.csv", usecols=["job_id", "start"])
    with chromium.headless_chromium(page_load_timeout_s=180) as drv:
        seconds = open_view(drv, d / "view.html", timeout_s=120)
        got = drv.execute_script(COUNT_JS)
        assert len(got["ids"]) == int(np.isfinite(jobs["start"]).sum()) == 77073
        assert chromium.severe(drv.get_log("browser")) == []
    print(f"CTC-SP2 view: {size / 1e6:.1f} MB, rendered in {seconds:.1f} s")
