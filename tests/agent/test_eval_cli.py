"""opid-eval end to end on the tiny model: table columns, output files, determinism, clear errors.

The end-to-end runs use searchqa/smoke@v1 (fast offline env, always built) with 3 episodes of at
most 2 steps and 8 response tokens, plus 2 greedy alfworld/smoke@v1 games; the ALFWorld table
layout (macro Avg vs All, missing categories) is checked on synthetic records.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from opid_rllib.cli.eval import main
from opid_rllib.paper_table import ALFWORLD_COLUMNS, format_table, summarize
from opid_rllib.models.fingerprint import weights_fingerprint

PANEL = "searchqa/smoke@v1"
SMALL = ["--model", "tiny", "--episodes", "3", "--max-steps", "2", "--max-new-tokens", "8",
         "--torch-threads", "1"]  # 1 thread: much faster than 2 on a busy shared CPU


def _run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _load(d: Path):
    res = json.loads((d / "results.json").read_text())
    eps = [json.loads(line) for line in (d / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return res, eps


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two identical seeded runs, each in 2 chunks (--batch-envs 2 over 3 episodes); b shows the progress bar."""
    root = tmp_path_factory.mktemp("eval")
    out = {}
    for name in ("a", "b"):
        bar = ["--no-progress"] if name == "a" else []
        rc, stdout, stderr = _run(["--env", "searchqa", "--panel", PANEL, *SMALL, *bar, "--seed", "3",
                                   "--batch-envs", "2", "--output", str(root / name)])
        assert rc == 0, stderr
        out[name] = (root / name, stdout, stderr)
    return out


def test_table_has_expected_columns(runs):
    _, stdout, _ = runs["a"]
    lines = stdout.splitlines()
    header = next(line for line in lines if "Avg" in line and "All" in line)
    assert header.split() == ["single_hop", "multi_hop", "Avg", "All", "Valid%", "Len", "Agree%"] or \
        header.split() == ["multi_hop", "single_hop", "Avg", "All", "Valid%", "Len", "Agree%"]
    i = lines.index(header)
    assert lines[i + 1].startswith("success %") and lines[i + 2].startswith("episodes")
    assert len(lines[i + 1].rstrip()) == len(header.rstrip())  # aligned
    assert PANEL in lines[i - 1] and "model=tiny" in lines[i - 1]


def test_results_and_episodes_files(runs):
    from envs.panels import get_panel

    d, _, _ = runs["a"]
    res, eps = _load(d)
    panel = get_panel(PANEL)
    c = res["config"]
    assert c["panel"] == PANEL and c["panel_sha256"] == panel.sha256 and c["panel_size"] == len(panel.task_ids)
    assert c["model"] == "tiny" and Path(c["model_path"], "config.json").exists()
    assert c["model_weights"].startswith("sha256:") and c["model_weights"] == weights_fingerprint(c["model_path"])
    assert (c["seed"], c["temperature"], c["max_steps"], c["max_new_tokens"], c["batch_envs"]) == (3, 0.4, 2, 8, 2)
    assert c["env_config"]["split"] == panel.split and c["analyzer"] == "none"
    assert res["counts"]["episodes"] == 3 and len(eps) == 3
    assert [e["task_id"] for e in eps] == list(panel.task_ids[:3])
    t = res["table"]
    assert t["columns"][-2:] == ["Avg", "All"] and t["n"]["All"] == 3
    assert sum(t["n"][k] for k in t["columns"][:-2]) == 3
    steps = 0
    for e in eps:
        assert {"task_id", "task", "task_type", "won", "length", "actions", "responses", "format_valid"} <= set(e)
        assert 1 <= e["length"] <= 2
        assert len(e["actions"]) == len(e["responses"]) == len(e["format_valid"]) == e["length"]
        steps += e["length"]
    assert res["counts"]["steps"] == steps
    assert t["mean_episode_length"] == pytest.approx(steps / 3, abs=1e-3)
    fv = sum(sum(e["format_valid"]) for e in eps)
    assert t["format_valid_pct"] == pytest.approx(100.0 * fv / steps, abs=0.01)
    assert t["success_pct"]["All"] == pytest.approx(100.0 * sum(e["won"] for e in eps) / 3, abs=0.01)
    assert res["timing"]["wall_s"] > 0 and "episodes" not in res
    from opid_rllib.eval.panel import read_plays

    assert read_plays(d) == {"student": eps}  # no teacher play without --skills oracle


def test_fixed_seed_is_deterministic(runs):
    _, a = _load(runs["a"][0])
    _, b = _load(runs["b"][0])
    assert [e["actions"] for e in a] == [e["actions"] for e in b]
    assert [e["responses"] for e in a] == [e["responses"] for e in b]
    assert any(r for e in a for r in e["responses"])  # the model did generate text
    assert "3/3" in runs["b"][2] and "step 2" in runs["b"][2]  # the bar ran (and counted steps) in b only
    assert "ep/s" not in runs["a"][2]


@pytest.mark.parametrize("argv, flag, hint", [
    (["--panel", "nope/none@v1", "--model", "tiny"], "--panel", "searchqa/smoke@v1"),
    (["--env", "webshop", "--panel", PANEL, "--model", "tiny"], "--env", "--env searchqa"),
    (["--panel", PANEL, "--model", "tiny", "--episodes", "0"], "--episodes", ">= 1"),
    (["--panel", PANEL, "--model", "/nonexistent/model/dir"], "--model", "tiny"),
    (["--panel", PANEL, "--model", "tiny", "--output", __file__], "--output", "is a file; give a folder"),
    (["--panel", PANEL, "--model", "tiny", "--env-kwargs", '{"top_k": 2}'], "--env", "unknown setting(s) ['top_k']"),
])
def test_clear_errors(argv, flag, hint):
    rc, stdout, stderr = _run(argv)
    assert rc == 2 and stdout == ""
    msg = [line for line in stderr.splitlines() if line.startswith("opid-eval: error:")]
    assert len(msg) == 1, stderr
    assert flag in msg[0] and hint in msg[0]


def test_env_that_cannot_reset_the_panel_fails_fast():
    from envs.panels import Panel
    from opid_rllib.eval.panel import EvalError, evaluate

    bogus = Panel("searchqa/bogus@v0", "searchqa", "test", ("no-such-task",))
    with pytest.raises(EvalError, match=r"--panel 'searchqa/bogus@v0': the searchqa env cannot reset"):
        evaluate(panel=bogus, llm_model="tiny", progress=False)


def test_build_eval_config_deployment_setting():
    from envs.panels import get_panel
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.eval.panel import EvalError, build_eval_config

    ws = get_panel("webshop/smoke@v1")
    cfg = build_eval_config(panel=ws, model="tiny", max_new_tokens=32)
    assert cfg.env == "webshop" and dict(cfg.env_config) == {**ws.env_kwargs, "split": "test", "max_steps": 15}
    assert (cfg.max_steps, cfg.history_length, cfg.max_new_tokens) == (15, 2, 32)  # reference WebShop settings
    assert cfg.analyzer == "none" and cfg.skills_in_rollout_prompt is False
    train_cfg = OPIDConfig().llm(max_steps=7, history_length=1, max_new_tokens=99)
    train_cfg.analyzer_settings(analyzer="hindsight", skills_in_rollout_prompt=True)
    cfg = build_eval_config(train_cfg, panel=get_panel(PANEL))
    assert (cfg.max_steps, cfg.history_length, cfg.max_new_tokens) == (7, 1, 99)  # a given config's settings stay
    assert cfg.env == "searchqa" and cfg.analyzer == "none" and cfg.skills_in_rollout_prompt is False
    assert train_cfg.analyzer == "hindsight"  # the caller's config is not modified
    assert build_eval_config({"max_steps": 3}, panel=ws).max_steps == 3
    with pytest.raises(TypeError, match="unknown settings"):
        build_eval_config(panel=ws, group_size=8)
    al = get_panel("alfworld/smoke@v1")
    cfg = build_eval_config(panel=al, env_kwargs={"expert": "sweep"})
    assert cfg.env_config["expert"] == "sweep" and cfg.env_config["split"] == al.split
    with pytest.raises(EvalError, match="--env-kwargs 'split'"):
        build_eval_config(panel=al, env_kwargs={"split": "train"})


def _rec(tt, won, n=3, valid=True):
    return {"task_type": tt, "won": won, "length": n, "format_valid": [valid] * n}


def test_alfworld_table_layout():
    recs = [_rec("pick_and_place_simple", True), _rec("pick_and_place_simple", True),
            _rec("pick_and_place_simple", False), _rec("look_at_obj_in_light", False, valid=False),
            _rec("pick_two_obj_and_place", True)]
    t = summarize(recs, "alfworld")
    assert t["columns"] == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "Avg", "All"]
    assert list(ALFWORLD_COLUMNS.values()) == t["columns"][:6]
    s = t["success_pct"]
    assert s["Pick"] == pytest.approx(66.67) and s["Look"] == 0.0 and s["Pick2"] == 100.0
    assert s["Clean"] is None and s["Heat"] is None  # no episode: shown as "-", not in Avg
    assert s["Avg"] == pytest.approx((66.67 + 0 + 100) / 3, abs=0.01)  # macro over present categories
    assert s["All"] == 60.0  # 3 of 5 episodes
    assert t["format_valid_pct"] == 80.0 and t["mean_episode_length"] == 3.0
    text = format_table({"config": {"panel": "alfworld/x@v1"}, "table": t})
    head, row = text.splitlines()[1:3]
    assert head.split() == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "Avg", "All", "Valid%", "Len"]
    assert row.split()[2:] == ["66.7", "0.0", "-", "-", "-", "100.0", "55.6", "60.0", "80.0", "3.00"]
    assert summarize(recs + [_rec("weird_type", False)], "alfworld")["columns"][6] == "Other"


def test_expert_agreement_counts_valid_steps_that_took_the_planned_command():
    """Agree% = valid steps whose command is the expert's next one / steps where the expert had a plan:
    a malformed reply never agrees, a step without a plan is not counted."""
    rec = {"task_type": "pick_and_place_simple", "won": False, "length": 4,
           "actions": ["go to desk 1", "take pen 1 from desk 1", "go to desk 1", "look"],
           "format_valid": [True, False, True, True],
           "expert_next": ["go to desk 1", "take pen 1 from desk 1", "go to shelf 1", None]}
    t = summarize([rec], "alfworld")
    assert t["expert_agreement_pct"] == pytest.approx(100 / 3, abs=0.01)  # 1 of 3 planned steps
    assert format_table({"table": t}).splitlines()[1].split()[-1] == "Agree%"
    assert "expert_agreement_pct" not in summarize([dict(rec, expert_next=None)], "alfworld")


def test_webshop_score_column():
    recs = [dict(_rec("beauty", True), score=1.0), dict(_rec("clothing", False), score=0.5)]
    t = summarize(recs, "webshop")
    assert t["columns"] == ["beauty", "clothing", "Avg", "All"] and t["mean_score"] == 0.75
    assert "Score" in format_table({"table": t}).splitlines()[1]


def test_alfworld_smoke_end_to_end_greedy(tmp_path):
    from envs.panels import get_panel

    if not get_panel("alfworld/smoke@v1").task_ids:
        pytest.skip("alfworld smoke panel has no games yet (specs not built)")
    rc, stdout, stderr = _run(["--env", "alfworld", "--panel", "alfworld/smoke@v1", "--model", "tiny",
                               "--episodes", "2", "--max-steps", "3", "--max-new-tokens", "16", "--temperature", "0",
                               "--no-progress", "--torch-threads", "1", "--output", str(tmp_path)])
    assert rc == 0, stderr
    header = next(line for line in stdout.splitlines() if "Avg" in line and "All" in line)
    assert header.split() == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "Avg", "All", "Valid%", "Len", "Agree%"]
    assert "(greedy)" in stdout
    res, eps = _load(tmp_path)
    assert res["config"]["greedy"] is True and res["counts"]["reset_failures"] == 0
    assert res["counts"]["episodes"] == len(eps) == 2 and all(1 <= e["length"] <= 3 for e in eps)
    assert all(e["task_type"] in ALFWORLD_COLUMNS for e in eps)


def test_oracle_skills_print_student_teacher_and_headroom(tmp_path):
    """opid-eval --skills oracle: the panel is played twice (plain, then with the oracle step skill at
    every step); both tables, the headroom row and teacher_episodes.jsonl come out, and the teacher's
    prompts really held a skill at every step (runner metric counted from the played steps)."""
    rc, stdout, stderr = _run(["--env", "alfworld", "--panel", "alfworld/smoke@v1", "--model", "tiny",
                               "--episodes", "2", "--max-steps", "2", "--max-new-tokens", "16", "--no-progress",
                               "--torch-threads", "1", "--skills", "oracle", "--seed", "1", "--output", str(tmp_path)])
    assert rc == 0, stderr
    assert "student (no skills) %" in stdout and "teacher (oracle skill) %" in stdout
    assert "skill headroom (points)" in stdout
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["config"]["skills"] == "oracle"
    assert set(res["headroom"]) == set(res["table"]["columns"]) == set(res["teacher_table"]["columns"])
    assert res["headroom"]["All"] == pytest.approx(res["teacher_table"]["success_pct"]["All"]
                                                   - res["table"]["success_pct"]["All"])
    teacher = [json.loads(x) for x in (tmp_path / "teacher_episodes.jsonl").read_text().splitlines() if x.strip()]
    assert len(teacher) == 2 and all(e["length"] >= 1 for e in teacher)
    assert "teacher_episodes" not in res
    from opid_rllib.eval.panel import read_episodes, read_plays

    assert read_plays(tmp_path) == {"student": read_episodes(tmp_path / "episodes.jsonl"), "teacher": teacher}


def test_oracle_wording_option(tmp_path, monkeypatch):
    """--analyzer-option quote_sampled=false reaches the oracle (recorded in results.json; the teacher's chunks are
    keyed by it, so a resumed play never mixes wordings); options the oracle does not read, or without --skills
    oracle, are refused naming the flag."""
    base = ["--env", "alfworld", "--panel", "alfworld/smoke@v1", "--model", "tiny", "--episodes", "1",
            "--max-steps", "1", "--max-new-tokens", "8", "--no-progress", "--torch-threads", "1"]
    rc, _, stderr = _run([*base, "--analyzer-option", "quote_sampled=false"])
    assert rc == 2 and "--analyzer-option quote_sampled: sets the oracle" in stderr and "--skills oracle" in stderr
    rc, _, stderr = _run([*base, "--skills", "oracle", "--analyzer-option", "on_plan_step_skills=3"])
    assert rc == 2 and "--analyzer-option on_plan_step_skills: the oracle reads only quote_sampled" in stderr
    rc, _, stderr = _run([*base, "--skills", "oracle", "--analyzer-option", "quote_sampled=maybe"])
    assert rc == 2 and "quote_sampled='maybe': must be true or false" in stderr
    rc, _, stderr = _run([*base, "--skills", "oracle", "--analyzer-option", "quote_sampled"])
    assert rc == 2 and "must be KEY=VALUE" in stderr
    rc, _, stderr = _run([*base, "--skills", "oracle", "--analyzer-option", "quote_sampled=false",
                          "--output", str(tmp_path)])
    assert rc == 0, stderr
    assert json.loads((tmp_path / "results.json").read_text())["config"]["oracle_quote_sampled"] is False

    import shutil

    from opid_rllib.env_runner import GroupedTextEnvRunner

    real, calls = GroupedTextEnvRunner.sample_groups, []

    def cut_in_the_teachers_second_chunk(self, *a, **kw):
        calls.append(kw.get("skills"))
        if calls.count("oracle") == 2:
            raise KeyboardInterrupt  # a session's end
        return real(self, *a, **kw)

    two = [*base[:7], "2", *base[8:], "--batch-envs", "1", "--skills", "oracle"]
    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", cut_in_the_teachers_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _run([*two, "--analyzer-option", "quote_sampled=false", "--output", str(tmp_path / "a")])
    monkeypatch.setattr(GroupedTextEnvRunner, "sample_groups", real)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    resumed = {}
    for d, wording in (("a", []), ("b", ["--analyzer-option", "quote_sampled=false"])):
        rc, _, stderr = _run([*two, *wording, "--output", str(tmp_path / d), "--resume"])
        assert rc == 0, stderr
        resumed[d] = json.loads((tmp_path / d / "results.json").read_text())["timing"]["resumed_episodes"]
    assert resumed == {"a": {"student": 2, "teacher": 0}, "b": {"student": 2, "teacher": 1}}


def test_env_kwargs_choose_whose_command_the_oracle_names(tmp_path):
    """--env-kwargs '{"expert": "sweep"}': the oracle (and agreement) name ALFWorld's sweep demonstrator's
    command, not the hand-coded expert's; a non-object is refused with the flag named."""
    from envs.alfworld.env import ALFWorldEnv
    from envs.alfworld.sweep import play_sweep

    rc, _, stderr = _run(["--env", "alfworld", "--panel", "alfworld/smoke@v1", "--model", "tiny", "--episodes", "1",
                          "--max-steps", "1", "--max-new-tokens", "8", "--no-progress", "--torch-threads", "1",
                          "--skills", "oracle", "--env-kwargs", '{"expert": "sweep"}', "--output", str(tmp_path)])
    assert rc == 0, stderr
    assert json.loads((tmp_path / "results.json").read_text())["config"]["env_config"]["expert"] == "sweep"
    ep = json.loads((tmp_path / "teacher_episodes.jsonl").read_text().splitlines()[0])
    sweep_first = play_sweep(ALFWorldEnv(split="valid_unseen", expert=False), ep["task_id"], 1)["actions"]
    assert ep["expert_next"][:1] == sweep_first
    rc, stdout, stderr = _run(["--env", "alfworld", "--model", "tiny", "--env-kwargs", "[1]"])
    assert rc == 2 and "--env-kwargs must be a JSON object" in stderr


def test_unknown_skills_mode_is_refused():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(["--env", "searchqa", "--panel", PANEL, *SMALL, "--no-progress", "--skills", "teacher"])
    assert e.value.code == 2 and "--skills" in err.getvalue()


def test_env_alone_plays_its_main_panel_with_a_cap_that_fits_tiny(tmp_path):
    """`opid-eval --env searchqa --model tiny`: no --panel needed; tiny gets max_new_tokens 48."""
    from opid_rllib.cli.eval import MAIN_PANELS

    rc, _, stderr = _run(["--env", "searchqa", "--model", "tiny", "--episodes", "1", "--max-steps", "1",
                          "--no-progress", "--torch-threads", "1", "--output", str(tmp_path)])
    assert rc == 0, stderr
    res, _ = _load(tmp_path)
    assert res["config"]["panel"] == MAIN_PANELS["searchqa"] == "searchqa/test@v1"
    assert res["config"]["max_new_tokens"] == 48


def test_main_panels_exist_and_default_env_is_alfworld():
    from envs.panels import list_panels
    from opid_rllib.cli.eval import MAIN_PANELS, build_parser
    from opid_rllib.eval.panel import ENV_NAMES

    assert set(MAIN_PANELS) == set(ENV_NAMES) and set(MAIN_PANELS.values()) <= set(list_panels())
    args = build_parser().parse_args(["--model", "tiny"])  # --panel is optional now
    assert args.panel is None and args.env is None and args.max_new_tokens is None
