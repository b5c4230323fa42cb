"""opid-train's command line: bad input fails in one line before Ray starts, --help lists only flags
that do something, and the tiny model gets a response cap that fits it."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from opid_rllib.cli.train import build_parser, config_from_args, main, run_experiment

ROOT = Path(__file__).resolve().parents[2]


def _run(fn, *a) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = fn(*a)
        except SystemExit as e:  # argparse errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv, says", [
    (["--group-size", "0"], "--group-size 0: must be >= 1"),
    (["--env", "nosuchenv"], "argument --env: invalid choice: 'nosuchenv'"),
    (["--model", "/no/such/model"], "--model '/no/such/model': no such path"),
    (["--model", "nosuch/hub-model"], "--model 'nosuch/hub-model': model 'nosuch/hub-model' is not a local folder"),
    (["--max-new-tokens", "-3"], "--max-new-tokens -3: must be >= 1"),
    (["--minibatch-size", "0"], "--minibatch-size 0: must be >= 1"),
    (["--episode-skill-adv-weight", "-1"], "episode_skill_adv_weight=-1.0: must be >= 0"),
    (["--analyzer", "gpt"], "argument --analyzer: invalid choice: 'gpt'"),
    (["--select-panel", "alfworld/valid_seen@v1"], "--select-panel: only for a sweep"),
    # repeats of one config (seeds 0..2, seed_trials) are no points to select among
    (["--num-samples", "3", "--select-panel", "alfworld/valid_seen@v1"], "--select-panel: only for a sweep"),
    (["--select-episodes", "0"], "--select-episodes 0: must be >= 1"),
    # validation during training (opid_rllib/evaluation.py)
    (["--eval-panel", "alfworld/valid_seen@v1"], "--eval-panel: sets up validation during training; give "
                                                  "--eval-interval N too"),
    (["--eval-interval", "2"], "--eval-interval: name what to play with --eval-panel"),
    (["--eval-interval", "0", "--eval-panel", "alfworld/smoke@v1"], "--eval-interval 0: must be >= 1"),
    (["--eval-interval", "2", "--eval-panel", "alfworld/nope@v1"], "eval_panel='alfworld/nope@v1': unknown panel"),
    (["--eval-interval", "2", "--eval-panel", "searchqa/smoke@v1"], "eval_panel='searchqa/smoke@v1': a searchqa "
                                                                     "panel, but env is 'alfworld'"),
    (["--eval-interval", "2", "--eval-panel", "alfworld/smoke@v1", "--asha-grace", "1"],
     "--asha-grace: stops the weaker trials of a sweep"),
    (["--select-max-steps", "30"], "--select-max-steps: sizes the --select-panel play; give --select-panel too"),
    (["--analyzer-option", "on_plan_step_skills"], "--analyzer-option 'on_plan_step_skills': must be KEY=VALUE"),
    (["--analyzer-option", "on_plan_steps=3"], "analyzer_config: analyzer 'hindsight' got unknown option(s) "
                                               "['on_plan_steps']"),
    (["--analyzer-option", "on_plan_step_skills=-2"], "on_plan_step_skills=-2: must be an int >= 0"),
    (["--analyzer-option", "max_step_skills=3"], "max_step_skills is set by max_step_skills_per_traj"),
    (["--env-kwargs", "{expert: sweep}"], "--env-kwargs is not valid JSON"),
    (["--env-kwargs", '["sweep"]'], "--env-kwargs must be a JSON object"),
    (["--env-kwargs", '{"split": "valid_seen"}'], "--env-kwargs: 'split' has its own flag; use --split"),
    (["--env-kwargs", '{"max_steps": 9}'], "--env-kwargs: 'max_steps' has its own flag; use --max-steps"),
    (["--resume", "."], "--resume: goes on with a --no-tune run from one of its checkpoints; add --no-tune"),
    (["--no-tune", "--resume", "/no/such/checkpoint"], "--resume /no/such/checkpoint: no such checkpoint folder"),
    (["--no-tune", "--num-samples", "2"], "--num-samples 2: the repeats are Tune trials; drop --no-tune"),
    # env_config is built once before Ray: a bad split, a misspelt key or a value of the wrong kind
    (["--split", "tset"], "--split/--env-kwargs: building env 'alfworld'"),
    (["--split", "tset"], "split='tset': choose one of"),
    (["--env-kwargs", '{"expret": "sweep"}'], "unknown setting(s) ['expret']"),
    (["--env", "searchqa", "--env-kwargs", '{"topk": "x"}'], "env setting topk='x': must be an integer"),
    (["--lr", "-0.001"], "lr=-0.001: must be > 0"),
    (["--kl-coeff", "-0.1"], "kl_coeff=-0.1: must be >= 0"),
    (["--clip-ratio-low", "1.5"], "clip_ratio_low=1.5: must be in (0, 1)"),
    (["--micro-batch-size", "0"], "--micro-batch-size"),
    (["--sharding", "fsdp"], "sharding='fsdp' needs num_learners >= 2 (got 0)"),
    (["--sharding", "zero3"], "argument --sharding: invalid choice: 'zero3'"),
])
def test_bad_input_is_one_line_before_ray(tmp_path, argv, says):
    out_dir = tmp_path / "run"
    rc, stdout, stderr = _run(main, [*argv, "--output", str(out_dir)])
    assert rc == 2 and stdout == ""
    assert stderr.splitlines() == [stderr.strip()] and stderr.startswith("opid-train: error: ")
    assert says in stderr
    assert not ray.is_initialized() and not out_dir.exists()  # no Ray session, no folder left behind


def test_output_that_is_a_file_is_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc, _, stderr = _run(main, ["--output", str(afile)])
    assert rc == 2 and stderr.strip() == f"opid-train: error: --output {afile}: is a file; give a folder (it holds " \
        "the run's results and checkpoints)"
    assert not ray.is_initialized()


def test_prepared_config_with_unknown_env_fails_before_ray(tmp_path):
    """The tuned examples' path: run_experiment(config, argv) checks the config the same way."""
    from opid_rllib.algorithm import OPIDConfig

    rc, _, stderr = _run(run_experiment, OPIDConfig().environment("nosuchenv"), ["--output", str(tmp_path / "r")])
    assert rc == 2 and "--env 'nosuchenv': unknown env" in stderr and "alfworld" in stderr
    assert not ray.is_initialized() and not (tmp_path / "r").exists()


@pytest.mark.slow  # a subprocess that imports torch/Ray: seconds each
def test_console_script_fails_fast_on_an_unknown_env(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "opid_rllib.cli.train", "--env", "nosuchenv", "--output",
                        str(tmp_path / "r")], capture_output=True, text=True, env=env, timeout=120)
    wall = time.perf_counter() - t0
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert wall < 60  # measured ~7 s on a loaded 2-core box; a Ray start made it 62 s
    assert not (tmp_path / "r").exists()


def test_help_lists_only_working_flags_each_with_help():
    parser = build_parser()
    flags = {s for a in parser._actions for s in a.option_strings}
    for dead in ("--framework", "--num-agents", "--old-api-stack", "--enable-new-api-stack", "--wandb-key",
                 "--wandb-project", "--stop-reward", "--stop-timesteps", "--algo", "--as-test", "--local-mode",
                 "--num-envs-per-env-runner", "--evaluation-interval"):
        assert dead not in flags
    assert all(a.help for a in parser._actions), [a.dest for a in parser._actions if not a.help]
    env = next(a for a in parser._actions if "--env" in a.option_strings)
    assert set(env.choices) == {"alfworld", "webshop", "searchqa", "signpost"}
    text = parser.format_help()
    assert "trajectories to" not in text and "(default: None)" not in text
    # every flag the parser offers is read by the CLI (no silently ignored option)
    src = (ROOT / "opid_rllib" / "cli" / "train.py").read_text()
    for a in parser._actions:
        if a.dest != "help":
            assert f"args.{a.dest}" in src or f'"{a.dest}"' in src, a.dest


def test_help_needs_neither_ray_nor_torch():
    """`opid-train --help` took 5.6 s when building the parser imported the algorithm (Ray + torch)."""
    code = ("import sys\nfrom opid_rllib.cli.train import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in ('ray', 'torch', 'transformers') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "[]" and "--eval-interval" in p.stdout


def test_choices_come_from_the_code_that_accepts_them():
    from opid_rllib.algorithm import ANALYZERS
    from opid_rllib.generation.registry import BACKENDS

    acts = {a.dest: a for a in build_parser()._actions}
    assert tuple(acts["analyzer"].choices) == ANALYZERS and tuple(acts["generation_backend"].choices) == BACKENDS


def test_analyzer_options_reach_the_config():
    p = build_parser()
    cfg = config_from_args(p.parse_args(["--analyzer-option", "on_plan_step_skills=3",
                                         "--analyzer-option", "timeout_s=2.5", "--analyzer-option", "model=m-1"]))
    assert cfg.analyzer_config == {"timeout_s": 2.5, "model": "m-1"}
    assert cfg.hindsight_options == {"on_plan_step_skills": 3}  # a research switch: through experimental()
    # a tuned example (the weight sweep) takes it on top of its own config
    import runpy

    from opid_rllib.cli.train import apply_overrides

    sweep = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py"), run_name="x")["config"]
    sweep = apply_overrides(sweep, p.parse_args(["--analyzer-option", "on_plan_step_skills=2"]))
    assert sweep.hindsight_options["on_plan_step_skills"] == 2


def test_env_kwargs_and_normalize_teacher_adv_reach_the_config():
    p = build_parser()
    cfg = config_from_args(p.parse_args(["--env-kwargs", '{"expert": "sweep"}', "--max-steps", "15",
                                         "--normalize-teacher-adv"]))
    assert cfg.env_config == {"split": "train", "expert": "sweep", "max_steps": 15}
    assert cfg.normalize_teacher_adv is True
    plain = config_from_args(p.parse_args([]))
    assert "expert" not in plain.env_config and plain.normalize_teacher_adv is False
    import runpy

    from opid_rllib.cli.train import apply_overrides

    sweep = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py"), run_name="x")["config"]
    sweep = apply_overrides(sweep, p.parse_args(["--env-kwargs", '{"expert": "sweep"}', "--normalize-teacher-adv"]))
    assert sweep.env_config["expert"] == "sweep" and sweep.env_config["split"] == "train"
    assert sweep.normalize_teacher_adv is True


def test_the_papers_loss_settings_have_flags_and_research_ones_their_own_group():
    p = build_parser()
    cfg = config_from_args(p.parse_args([
        "--kl-coeff", "0.001", "--entropy-coeff", "0", "--clip-ratio-low", "0.1", "--clip-ratio-high", "0.28",
        "--invalid-action-penalty", "0.01", "--max-step-skills-per-traj", "2", "--micro-batch-size", "4",
        "--opsd-loss-coeff", "0.01", "--clip-teacher-adv", "1.5"]))
    assert (cfg.kl_coeff, cfg.entropy_coeff, cfg.clip_ratio_low, cfg.clip_ratio_high) == (0.001, 0.0, 0.1, 0.28)
    assert (cfg.invalid_action_penalty, cfg.max_step_skills_per_traj, cfg.micro_batch_size) == (0.01, 2, 4)
    assert (cfg.opsd_loss_coeff, cfg.clip_teacher_adv) == (0.01, 1.5)
    from opid_rllib.settings import EXPERIMENTAL_SETTINGS

    group = next(g for g in p._action_groups if g.title.startswith("experimental"))
    research = {a.dest for a in group._group_actions}
    assert research and research <= set(EXPERIMENTAL_SETTINGS)
    others = {a.dest for g in p._action_groups if g is not group for a in g._group_actions}
    assert not others & set(EXPERIMENTAL_SETTINGS)


def test_help_groups_the_flags_and_answers_in_under_a_second():
    """163 flat lines took 5.6 s; the groups say what each flag is for."""
    titles = [g.title for g in build_parser()._action_groups]
    for title in ("what to train", "rollout sizes", "objective", "run"):
        assert any(t.startswith(title) for t in titles), titles
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "opid_rllib.cli.train", "--help"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    wall = time.perf_counter() - t0
    assert p.returncode == 0 and "run:" in p.stdout and "--torch-threads" in p.stdout
    assert wall < 3.0, wall  # 0.3-0.4 s measured on a loaded 2-core box; the margin is for a busier one


def test_torch_threads_and_progress_flags_reach_the_config():
    p = build_parser()
    cfg = config_from_args(p.parse_args(["--torch-threads", "2"]))
    assert cfg.torch_threads == 2 and cfg.progress_interval_s == 10.0
    assert config_from_args(p.parse_args([])).torch_threads is None  # the default: 1 on CPU, in every process
    rc, _, err = _run(main, ["--torch-threads", "0"])
    assert rc == 2 and "--torch-threads 0: must be >= 1" in err


@pytest.mark.parametrize("argv, samples, every", [([], 1, 10.0), (["--no-tune"], 1, 10.0), ([], 3, 0),
                                                  (["--progress-every-s", "2"], 3, 2.0)])
def test_a_sweep_under_tune_prints_no_heartbeat(argv, samples, every):
    """Tune's table is a sweep's progress; a single run keeps its lines."""
    from opid_rllib.cli.train import set_progress_interval

    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    set_progress_interval(cfg, args, samples)
    assert cfg.progress_interval_s == every


def test_max_new_tokens_default_fits_the_model():
    p = build_parser()
    assert config_from_args(p.parse_args(["--model", "tiny"])).max_new_tokens == 48
    assert config_from_args(p.parse_args(["--model", "tiny", "--max-new-tokens", "100"])).max_new_tokens == 100
    assert config_from_args(p.parse_args(["--model", "/some/folder"])).max_new_tokens == 512  # OPIDConfig's
    assert config_from_args(p.parse_args(["--model", "/x", "--cpu-example"])).max_new_tokens == 48


def test_a_tuned_example_takes_the_flags_given_and_keeps_the_rest():
    """`python tuned_examples/X.py --model M --max-steps 15 --lr 1e-3` trains M for 15 steps at 1e-3;
    flags left out keep the example's values (they were silently ignored before)."""
    import runpy

    from opid_rllib.cli.train import apply_overrides

    cfg = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_tiny_cpu.py"), run_name="x")["config"]
    before = (cfg.group_size, cfg.max_new_tokens, cfg.episode_skill_adv_weight)
    args = build_parser().parse_args(["--model", "/some/base", "--max-steps", "15", "--lr", "1e-3", "--seed", "3",
                                      "--minibatch-size", "64", "--teacher-sample-adv-weight", "0.5",
                                      "--teacher-sample-sft-coeff", "0.25", "--teacher-anchor-coeff", "0.1",
                                      "--invalid-action-source", "repeat",
                                      "--dtype", "bfloat16"])
    apply_overrides(cfg, args)
    assert (cfg.llm_model, cfg.max_steps, cfg.env_config["max_steps"], cfg.lr, cfg.seed, cfg.minibatch_size) == \
        ("/some/base", 15, 15, 1e-3, 3, 64)
    assert (cfg.teacher_sample_adv_weight, cfg.teacher_sample_sft_coeff, cfg.teacher_anchor_coeff) == (0.5, 0.25, 0.1)
    assert cfg.invalid_action_source == "repeat"
    assert cfg.dtype == "bfloat16"
    assert (cfg.group_size, cfg.max_new_tokens, cfg.episode_skill_adv_weight) == before


@pytest.mark.parametrize("flag", [["--env", "webshop"], ["--preset", "grpo"], ["--cpu-example"], ["--split", "x"]])
def test_a_tuned_example_refuses_flags_its_file_fixes(tmp_path, flag):
    from opid_rllib.algorithm import OPIDConfig

    rc, _, stderr = _run(run_experiment, OPIDConfig().environment("alfworld"), [*flag, "--output", str(tmp_path / "r")])
    assert rc == 2 and stderr.startswith(f"opid-train: error: {flag[0]}: set by the tuned example")
    assert not ray.is_initialized() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("panel, says", [
    ("alfworld/valid_unseen@v1", "--select-panel alfworld/valid_unseen@v1: that is the panel results are reported on"),
    ("webshop/test@v1", "--select-panel 'webshop/test@v1' is a 'webshop' panel but --env is 'alfworld'"),
    ("alfworld/nosuch@v1", "--select-panel 'alfworld/nosuch@v1': unknown panel"),
])
def test_a_sweep_never_selects_on_the_reported_panel(tmp_path, panel, says):
    import runpy

    cfg = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py"), run_name="x")["config"]
    rc, _, stderr = _run(run_experiment, cfg, ["--select-panel", panel, "--output", str(tmp_path / "r")])
    assert rc == 2 and stderr.startswith("opid-train: error: ") and says in stderr, stderr
    assert not ray.is_initialized() and not (tmp_path / "r").exists()


def test_a_sweep_is_not_run_in_process(tmp_path):
    """--no-tune trains one config in this process; a tuned example's grid is refused before Ray."""
    import runpy

    cfg = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py"), run_name="x")["config"]
    rc, _, stderr = _run(run_experiment, cfg, ["--no-tune", "--output", str(tmp_path / "r")])
    assert rc == 2 and stderr.strip() == ("opid-train: error: --no-tune: the config is a Tune grid over "
                                          "episode_skill_adv_weight, step_skill_adv_weight; drop --no-tune to run "
                                          "the sweep"), stderr
    assert not ray.is_initialized() and not (tmp_path / "r").exists()


def test_a_sweep_point_that_cannot_run_is_refused_before_ray(tmp_path):
    """Teacher samples need step-skill rows: the grid's w_step = 0 points could not run. Each point is
    validated before Ray starts (Tune would otherwise stop the whole sweep with a traceback, Ray up)."""
    import runpy

    cfg = runpy.run_path(str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py"), run_name="x")["config"]
    rc, _, stderr = _run(run_experiment, cfg, ["--teacher-sample-adv-weight", "1", "--output", str(tmp_path / "r")])
    assert rc == 2 and stderr.startswith("opid-train: error: grid point {'episode_skill_adv_weight': 0.0, "
                                         "'step_skill_adv_weight': 0.0}: Invalid OPIDConfig: "), stderr
    assert "teacher_sample_adv_weight=1.0" in stderr and "set it > 0" in stderr
    assert not ray.is_initialized() and not (tmp_path / "r").exists()


def test_a_trial_without_checkpoint_is_unscored_not_fatal():
    from opid_rllib.sweep_panel import score_trial, selection_panel_error

    assert selection_panel_error("alfworld/valid_seen@v1", "alfworld") is None
    trial = {"params": {"w": 1}, "history": [0.5], "path": "/nonexistent", "checkpoint": None}
    out = score_trial(trial, {}, "alfworld/valid_seen@v1")
    assert trial["history"] == [] and "no checkpoint" in out["error"]
    trial["checkpoint"] = "/nonexistent/checkpoint_000001"  # export fails: recorded, not raised
    out = score_trial(trial, {}, "alfworld/valid_seen@v1")
    assert trial["history"] == [] and out["error"].startswith(
        "FileNotFoundError: /nonexistent/checkpoint_000001: this folder does not exist")


def test_the_weight_sweep_grid_comes_from_its_flag():
    import runpy

    path = str(ROOT / "tuned_examples" / "alfworld_opid_weight_sweep.py")
    mod = runpy.run_path(path, run_name="x")
    assert mod["config"].episode_skill_adv_weight == {"grid_search": [0.0, 0.001, 0.01]}
    grid, rest = mod["sweep_args"](["--weight-grid", "0.01,0.1", "--max-steps", "15"])
    assert grid == [0.01, 0.1] and rest == ["--max-steps", "15"]
    for bad in ("a,b", "-1", ""):
        with pytest.raises(SystemExit, match="--weight-grid"):
            mod["parse_grid"](bad)


def test_cpu_example_trains_alfworld_on_the_six_games_of_its_warm_start():
    """--cpu-example on ALFWorld: the panel alfworld/cpu_example@v1's games (opid-sft --cpu-example clones them) at
    CPU_TINY's sizes; flags still win; other envs and splits keep their own tasks."""
    from envs.panels import get_panel
    from opid_rllib.presets import CPU_TINY

    p = build_parser()
    cfg = config_from_args(p.parse_args(["--env", "alfworld", "--cpu-example", "--group-size", "2"]))
    assert cfg.train_task_ids == list(get_panel("alfworld/cpu_example@v1").task_ids)
    assert (cfg.group_size, cfg.tasks_per_iter, cfg.lr) == (2, CPU_TINY["tasks_per_iter"], CPU_TINY["lr"])
    assert cfg.env_config["max_steps"] == CPU_TINY["max_steps"]
    assert config_from_args(p.parse_args(["--env", "searchqa", "--cpu-example"])).train_task_ids is None
    assert config_from_args(p.parse_args(["--cpu-example", "--split", "valid_seen"])).train_task_ids is None
    assert config_from_args(p.parse_args(["--env", "alfworld"])).train_task_ids is None


def test_a_relative_model_folder_is_made_absolute(tmp_path, monkeypatch):
    """Tune runs a trial in its own working folder: `--model sft/` from the README failed there as a hub id."""
    (tmp_path / "sft").mkdir()
    monkeypatch.chdir(tmp_path)
    p = build_parser()
    assert config_from_args(p.parse_args(["--model", "sft/"])).llm_model == str(tmp_path / "sft")
    assert config_from_args(p.parse_args(["--model", "tiny"])).llm_model == "tiny"  # not a folder here: a name
