"""opid-report: PNG learning curves + the static HTML skill browser, checked in headless Chromium.

The run dir is a fixture written by hand with the shapes of a real `opid-train --env searchqa
--cpu-example` run (nested result.json rows, opid_skills/iter_XXXXX.jsonl dumps). The browser tests
need Debian's chromium (`apt-get install -y --no-install-recommends chromium`) and skip without it.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from opid_rllib.cli.report import main
from opid_rllib.report.html import embed_json, report
from opid_rllib.report.runs import find_run_dirs, load_results


pytest.importorskip("matplotlib")

CHROMIUM = "/usr/bin/chromium"
# An LLM wrote this: it must show up as text, never as markup or script.
EVIL = ("<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"></script>"
        "<script>document.body.setAttribute('data-pwned','2')</script>")
STEP_SKILL = "Reply with <think>...</think> then exactly one <search>query</search> or <answer>answer</answer>."


def _result_row(it: int, with_learner: bool = True) -> dict:
    row = {
        "training_iteration": it, "time_total_s": 8.0 * it, "done": False, "trial_id": "8ff0d_00000",
        "config": {"lr": 1e-05, "env": "searchqa"},
        "opid": {"success_rate": 0.25 * (it - 1), "episode_len_mean": 3.0 - 0.5 * (it - 1),
                 "format_valid_rate": 0.3 * it, "env_errors": 0.0,
                 "success_by_type": {"multi_hop": 0.1 * it, "single_hop": 0.2 * it},
                 "timers": {"outcome_adv_s": 0.0004}},
        "env_runners": {"analyzer": {"calls": 4, "errors": it - 1, "total_latency_s": 0.0002},
                        "opid_runner": {"env_errors": 0, "sample_wall_s": 0.59}},
    }
    if with_learner:
        row["learners"] = {
            "__all_modules__": {"num_env_steps_trained": 12},
            "default_policy": {"kl_ref": 0.0001 * it, "entropy": 7.85 + 0.001 * it, "clip_frac": 0.01 * it,
                               "policy_loss": -9.4e-08, "num_trainable_parameters": float("nan")},
            "opid": {"adv": {"outcome_share": 0.5, "episode_teacher_share": 0.2, "step_teacher_share": 0.3,
                             "outcome_abs_mean": 0.9, "episode_teacher_abs_mean": 0.3 / it,
                             "step_teacher_abs_mean": 6.3e-05 * it, "teacher_active_token_ratio": 1.0},
                     "analysis_failed_trajectories": float(it == 2), "analysis_trajectories": 4.0}}
    return row


def _traj(it: int, n: int, *, won: bool, task: str, skills: dict, routed: list, actions: list) -> dict:
    return {"iteration": it, "traj_id": f"searchqa-train-{it}{n:04d}#927c367e/{n % 2}",
            "task_id": f"searchqa-train-{it}{n:04d}", "task": task,
            "task_type": "multi_hop" if n % 2 else "single_hop", "won": won, "actions": actions,
            "skills": skills, "routed": routed}


def _ok_skills(summary: str, ep: str, steps: dict) -> dict:
    return {"episode_summary": summary, "episode_skill": ep, "step_skills": {str(k): v for k, v in steps.items()},
            "error": None, "latency_s": 0.0005, "attempts": 1}


def write_run(run: Path, iters: int = 3, with_learner: bool = True) -> list[dict]:
    """A run dir as opid-train writes it; returns the trajectories written."""
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "result.json", "w") as f:
        for it in range(1, iters + 1):
            f.write(json.dumps(_result_row(it, with_learner)) + "\n")  # NaN like Ray writes it
    (run / "opid_skills").mkdir(exist_ok=True)
    trajs = []
    for it in range(1, iters + 1):
        ts = [
            _traj(it, 0, won=True, task="In what year was the founder of Zobriodurk Dynamics born?",
                  skills=_ok_skills("The agent succeeded after 2 steps.", "Search the company first.", {}),
                  routed=["episode", "episode"],
                  actions=["<search>Zobriodurk Dynamics</search>", "<answer>1966</answer>"]),
            _traj(it, 1, won=False, task="Who directed the film Plarbix Zebraquest?",
                  skills=_ok_skills("The agent failed after 3 steps.", "Goal: " + EVIL,
                                    {0: STEP_SKILL, 2: "zebra step skill"}),
                  routed=["step", "episode", "episode+step"],
                  actions=["", "<search>x</search>", "<answer>no</answer>"]),
            _traj(it, 2, won=False, task="Which river flows through Hiork?",
                  skills={"episode_summary": "", "episode_skill": "", "step_skills": {},
                          "error": "analyzer timeout after 30 s"},
                  routed=[None, None], actions=["<search>Hiork</search>", "<answer>Nile</answer>"]),
        ]
        with open(run / "opid_skills" / f"iter_{it:05d}.jsonl", "w") as f:
            for t in ts:
                f.write(json.dumps(t) + "\n")
        trajs += ts
    return trajs


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    trajs = write_run(run)
    (reports,) = [report(run)]
    return run, run / "report", trajs, reports


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


# ---- files -----------------------------------------------------------------------------------
def test_pngs_are_real_images(built):
    _, out, _, reports = built
    names = {"overview", "success", "adv_share", "adv_abs_mean", "analyzer", "format_valid", "episode_len", "policy"}
    assert {p.stem for p in out.glob("*.png")} == names
    for png in out.glob("*.png"):
        w, h = _png_size(png)
        assert w >= 300 and h >= 200 and png.stat().st_size > 5000, png
    assert [p["file"] for p in reports[0].plots][0] == "overview.png"


def test_missing_metrics_are_skipped(tmp_path):
    write_run(tmp_path / "run", iters=2, with_learner=False)
    (r,) = report(tmp_path / "run", tmp_path / "out")
    assert {p["file"] for p in r.plots} == {"overview.png", "success.png", "analyzer.png", "format_valid.png",
                                            "episode_len.png"}
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "result.json").write_text('{"training_iteration": 1, "foo": 1}\n{"truncat')
    (r,) = report(tmp_path / "empty")
    assert r.plots == [] and r.num_trajectories == 0 and (tmp_path / "empty" / "report" / "index.html").is_file()
    assert any("unreadable" in w for w in r.warnings)


def test_a_one_iteration_plot_shows_a_point_at_an_integer_tick():
    """A one-iteration report had x ticks from 0.96 to 1.04; now one tick, 1, with the point marked."""
    from matplotlib.figure import Figure

    from opid_rllib.report.plots import PANELS, _draw, resolve_axis

    axis = next(p for p in PANELS if p.name == "success").axes[0]
    rows = [{"training_iteration": it, "opid/success_rate": 0.5} for it in (1, 2, 3)]  # load_results' flat rows
    curves = resolve_axis(rows[:1], axis)
    ax = Figure().subplots()
    _draw(ax, curves, axis)
    assert list(ax.get_xticks()) == [1] and ax.get_xlim() == (0, 2)
    assert ax.lines[0].get_marker() not in (None, "None", "")
    ax = Figure().subplots()
    _draw(ax, resolve_axis(rows, axis), axis)
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_a_one_iteration_run_with_several_axes_in_a_panel_is_plotted(tmp_path):
    """A panel's axes share x: the first one-iteration axis fixed the shared ticks, and the next one's
    locator.set_params(integer=True) raised (opid-report failed on the README's 1-iteration Usage run)."""
    from opid_rllib.report.plots import make_plots
    from opid_rllib.report.runs import flatten

    made = make_plots([flatten(_result_row(1))], tmp_path)
    assert len(made) >= 2 and all((tmp_path / m["file"]).stat().st_size > 0 for m in made)


def test_results_flattened_and_nan_tolerated(built):
    run, *_ = built
    rows, warnings = load_results(run)
    assert [r["training_iteration"] for r in rows] == [1, 2, 3] and not warnings
    assert rows[1]["learners/opid/adv/outcome_share"] == 0.5 and "config/lr" not in rows[0]


def test_html_embeds_trajectories_safely(built):
    _, out, trajs, _ = built
    page = (out / "index.html").read_text()
    for t in trajs:
        assert json.dumps(t["traj_id"])[1:-1] in page
    assert "<img src=x" not in page and "</script><script>document" not in page  # data is \u003c-escaped
    assert page.count("</script>") == 2 and "http://" not in page and "https://" not in page
    assert json.loads(embed_json({"s": EVIL + "\u2028<!--"})) == {"s": EVIL + "\u2028<!--"}


def test_tune_layout_reports_each_trial(tmp_path):
    exp = tmp_path / "out" / "opid-searchqa"
    for name in ("OPID_searchqa_0_a", "OPID_searchqa_1_b"):
        write_run(exp / name, iters=2)
        (exp / name / "checkpoint_000001").mkdir()
    (exp / "tuner.pkl").write_bytes(b"x")
    assert [p.name for p in find_run_dirs(tmp_path / "out")] == ["OPID_searchqa_0_a", "OPID_searchqa_1_b"]
    assert main([str(tmp_path / "out")]) == 0
    top = tmp_path / "out" / "report" / "index.html"
    assert "opid-searchqa/OPID_searchqa_1_b/index.html" in top.read_text()
    for name in ("OPID_searchqa_0_a", "OPID_searchqa_1_b"):
        assert (tmp_path / "out" / "report" / "opid-searchqa" / name / "overview.png").is_file()
    # a trial dir given directly: its own report dir
    assert main([str(exp / "OPID_searchqa_0_a"), "--out", str(tmp_path / "r0"), "--no-plots"]) == 0
    assert (tmp_path / "r0" / "index.html").is_file() and not list((tmp_path / "r0").glob("*.png"))
    assert main([str(tmp_path / "nope")]) == 2
    (tmp_path / "bare").mkdir()
    assert main([str(tmp_path / "bare")]) == 2


# ---- in a real browser -----------------------------------------------------------------------
class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.count, self.tags = [], None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "details" and "data-traj-id" in a:
            self.rows.append(a)
        if a.get("id") == "count":
            self.count = a


def _dom(index: Path, fragment: str, tmp_path: Path) -> tuple[_Dom, str]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} missing (apt-get install -y --no-install-recommends chromium)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", f"{index.as_uri()}#{fragment}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = _Dom()
    d.feed(proc.stdout)
    assert ("body", {"data-ready": "1"}) in d.tags, "page script did not finish:\n" + proc.stdout[-2000:]
    return d, proc.stdout


def _visible(d: _Dom) -> set[str]:
    return {r["data-traj-id"] for r in d.rows if "hidden" not in r}


def test_browser_renders_all_trajectories(built, tmp_path):
    _, out, trajs, _ = built
    d, dom = _dom(out / "index.html", "open=1", tmp_path)
    assert _visible(d) == {t["traj_id"] for t in trajs} and len(d.rows) == len(trajs)
    assert d.count["data-visible"] == d.count["data-total"] == str(len(trajs))
    assert {r["data-outcome"] for r in d.rows} == {"won", "failed"}
    assert "data-pwned" not in {k for _, a in d.tags for k in a} and not any(
        t == "img" and a.get("src") == "x" for t, a in d.tags)
    assert "&lt;img src=x onerror" in dom  # shown as text
    assert "zebra step skill" in dom and "analyzer timeout after 30 s" in dom  # step skill / analysis error
    assert 'class="badge b-episode">episode<' in dom and 'class="badge b-step">step<' in dom
    assert any(t == "img" and a.get("src") == "overview.png" for t, a in d.tags)


def test_browser_search_and_iteration_from_fragment(built, tmp_path):
    _, out, trajs, _ = built
    d, _ = _dom(out / "index.html", "q=zebra", tmp_path)  # matches a task and a step skill
    want = {t["traj_id"] for t in trajs if "Zebra" in t["task"]}
    assert _visible(d) == want and len(want) == 3 and d.count["data-visible"] == "3"
    d, _ = _dom(out / "index.html", "q=hiork%20nile&iter=2", tmp_path)  # all words, one iteration
    assert _visible(d) == {t["traj_id"] for t in trajs if t["iteration"] == 2 and "Hiork" in t["task"]}
    assert d.count["data-total"] == "3"


@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason=f"{CHROMIUM} missing (apt-get install -y --no-install-recommends chromium)")
def test_browser_screenshot(built, tmp_path):
    _, out, _, _ = built
    shot = tmp_path / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'p'}", "--window-size=1280,1400", f"--screenshot={shot}",
           f"{(out / 'index.html').as_uri()}#open=1&iter=3"]
    subprocess.run(cmd, capture_output=True, timeout=60, check=True)
    w, h = _png_size(shot)
    assert (w, h) == (1280, 1400) and shot.stat().st_size > 20000
    if os.environ.get("OPID_REPORT_SHOT"):
        shutil.copy(shot, os.environ["OPID_REPORT_SHOT"])
