"""End to end with Ray: opid-train (two sharded learners), the weight-sweep example (a Tune grid), two learners
(all-reduce over gloo), checkpoint/resume."""

import glob
import json
import os

import numpy as np
import pytest
import ray
import torch

from opid_rllib.algorithm import RESUME_STATE, _learner_rank
from tests.algo.helpers import scalar_steps, tiny_config

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray session with room for two learners and a runner, shared by the file's tests: opid-train's main()
    joins it and leaves it running (a session costs about 5 CPU-s to start)."""
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_opid_train_cli_two_iterations(ray_local, tmp_path):
    """Through Tune, with two learners sharding the policy (sharding="fsdp"): result.json names the sharding and the
    once-per-update gather, and the final checkpoint exports to a folder transformers loads, with trained weights."""
    from transformers import AutoModelForCausalLM

    from opid_rllib.cli.train import main
    from opid_rllib.export import export_checkpoint
    from opid_rllib.models import resolve_model

    rc = main(["--env", "searchqa", "--cpu-example", "--stop-iters", "2", "--max-steps", "2",
               "--tasks-per-iter", "2", "--group-size", "2", "--max-new-tokens", "8", "--num-learners", "2",
               "--sharding", "fsdp", "--output", str(tmp_path), "--checkpoint-at-end", "--num-cpus", "4"])
    assert rc == 0 and ray.is_initialized()  # the caller's session stays up (one it starts goes: test_evaluation)
    trial = glob.glob(str(tmp_path / "opid-searchqa" / "OPID_*"))[0]
    rows = [json.loads(line) for line in open(os.path.join(trial, "result.json"))]
    assert [r["training_iteration"] for r in rows] == [1, 2]
    last = rows[-1]
    assert 0.0 <= last["opid"]["success_rate"] <= 1.0
    learner = last["learners"]["default_policy"]
    for key in ("policy_loss", "kl_ref", "entropy", "clip_frac", "num_response_tokens"):
        assert np.isfinite(learner[key])
    assert last["learners"]["opid"]["analysis_trajectories"] == 4 / 2  # each learner's half of the 4 (a mean)
    assert all(r["sharding"] == "fsdp" and r["learners"]["default_policy"]["weights_gather_s"] > 0 for r in rows)
    assert glob.glob(os.path.join(trial, "events.out.tfevents.*"))  # TensorBoard
    (ckpt,) = glob.glob(os.path.join(trial, "checkpoint_*"))
    exported = AutoModelForCausalLM.from_pretrained(export_checkpoint(ckpt, tmp_path / "hf")).state_dict()
    base = AutoModelForCausalLM.from_pretrained(resolve_model("tiny")).state_dict()
    assert set(exported) == set(base) and any(not torch.equal(exported[k], base[k]) for k in base)
    dumps = sorted(glob.glob(os.path.join(trial, "opid_skills", "iter_*.jsonl")))
    assert len(dumps) == 2
    rec = json.loads(open(dumps[0]).readline())
    assert rec["skills"]["episode_skill"] and len(rec["routed"]) == len(rec["actions"])


def test_opid_train_no_tune_resumed_after_a_cut_logs_each_iteration_once(ray_local, tmp_path):
    """A --no-tune run cut after its last checkpoint had logged the iterations it plays again on --resume: the
    resumed run's result.json and TensorBoard show each iteration once."""
    from opid_rllib.cli.train import main

    flags = ["--env", "searchqa", "--cpu-example", "--no-tune", "--max-steps", "2", "--tasks-per-iter", "1",
             "--group-size", "2", "--max-new-tokens", "4", "--output", str(tmp_path), "--num-cpus", "2"]
    assert main(flags + ["--stop-iters", "2", "--checkpoint-freq", "1"]) == 0
    # the cut: iteration 2 was logged and checkpointed, but the run goes on from iteration 1's checkpoint
    assert main(flags + ["--stop-iters", "3", "--resume", str(tmp_path / "checkpoint_00001")]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "result.json")]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]
    assert scalar_steps(tmp_path, "training_iteration") == [1, 2, 3]


def test_weight_sweep_example_ranks_its_points_on_a_held_out_panel(tmp_path):
    """The package's sweep example, as a user runs it: a grid from --weight-grid, flags on top, every point's
    final policy exported and played on the held-out panel (--select-panel), and sweep.json ranking the points
    by that success while keeping each trial's searched weights and training-success curve; --env-kwargs reaches
    both the trials' env and the selection play; --num-samples 2 runs the point under seeds 0 and 1 and ranks the
    point once, on the mean of the two."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(root, "tuned_examples", "alfworld_opid_weight_sweep.py"),
                        "--weight-grid", "0.01", "--stop-iters", "1", "--max-steps", "2", "--tasks-per-iter", "1",
                        "--group-size", "2", "--max-new-tokens", "8", "--num-cpus", "2", "--verbose", "0",
                        "--select-panel", "alfworld/valid_seen@v1", "--select-episodes", "2", "--select-max-steps", "2",
                        "--env-kwargs", '{"expert": "sweep"}', "--num-samples", "2", "--output", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    sel = json.load(open(tmp_path / "sweep.json"))
    assert sel["metric"] == "alfworld/valid_seen@v1 success % (All)" and len(sel["ranking"]) == 1
    points = sorted((t["params"]["episode_skill_adv_weight"], t["params"]["step_skill_adv_weight"], t["params"]["seed"])
                    for t in sel["trials"])
    assert points == [(0.01, 0.01, 0), (0.01, 0.01, 1)]  # one point (grids' product: test_train_cli), two seeds
    (row,) = sel["ranking"]
    assert row["params"] == sel["best"] == {"episode_skill_adv_weight": 0.01, "step_skill_adv_weight": 0.01}
    assert [r["seed"] for r in row["repeats"]] == [0, 1]
    assert row["score"] == sum(t["history"][0] for t in sel["trials"]) / 2
    for t in sel["trials"]:
        assert len(t["training_history"]) == 1 and 0.0 <= t["training_history"][0] <= 1.0
        assert t["selection"]["episodes"] == 2 and "error" not in t["selection"], t["selection"]
        assert t["history"] == [t["selection"]["table"]["All"]] and t["history"][0] in (0.0, 50.0, 100.0)
        assert os.path.isfile(os.path.join(t["path"], "selection_policy", "config.json"))
        # --env-kwargs reached the trial's env and its selection play (split and cap are the panel's own)
        played = t["selection"]["env_config"]
        assert played["expert"] == "sweep" and played["split"] == "valid_seen" and played["max_steps"] == 2
        assert 0.0 <= t["selection"]["expert_agreement_pct"] <= 100.0
        with open(os.path.join(t["path"], "result.json")) as f:
            row1 = json.loads(f.readline())
        assert row1["config"]["seed"] == t["params"]["seed"]  # seeded: a re-run ranks the same draws
        # The searched weights reached the trial's algorithm (the reference's 0.001 is the default), and its
        # learner added the skill terms (zero weights give zero shares: test_advantages).
        assert row1["config"]["episode_skill_adv_weight"] == row1["config"]["step_skill_adv_weight"] == 0.01
        adv = row1["learners"]["opid"]["adv"]
        assert adv["episode_teacher_share"] + adv["step_teacher_share"] > 0, adv
    assert sel["informative"] and "sweep ranking by alfworld/valid_seen@v1" in p.stdout


def test_two_learners_keep_groups_whole(ray_local):
    """minibatch_size=1: the ranks hold different row counts and must still agree on the optimizer steps (the
    harder case; minibatch_size=None is one step on each rank, the same all-reduce once)."""
    cfg = tiny_config(tasks_per_iter=2, group_size=2, max_steps=2, minibatch_size=1)
    cfg.env_runners(num_env_runners=1)
    cfg.learners(num_learners=2)
    algo = cfg.build_algo()
    try:
        res = algo.train()
        lr = res["learners"]
        assert lr["default_policy"]["num_samples"] > 0 and np.isfinite(lr["default_policy"]["policy_loss"])
        # one optimizer step per row on the rank with more rows, on both ranks
        assert lr["default_policy"]["num_optimizer_steps"] >= 2
        # Both learners applied the same averaged gradient: their weights are identical.
        w = [r.get() for r in algo.learner_group.foreach_learner(lambda l: float(
            sum(p.detach().double().sum() for p in l.module["default_policy"].unwrapped().parameters())))]
        assert len(w) == 2 and w[0] == pytest.approx(w[1], rel=0, abs=1e-6)
        # Each learner's generators are saved under its rank and set back from there (teacher samples draw there).
        # The ranks start from one seed; one extra draw on rank 1 parts their streams, so a rank mix-up shows.
        algo.learner_group.foreach_learner(lambda _: torch.rand(1 + _learner_rank()))
        saved = algo.get_state(components=[RESUME_STATE])[RESUME_STATE]
        assert set(saved["learners"]) == {"0", "1"} and "1" in saved["env_runners"]

        def draw():
            return [r.get() for r in algo.learner_group.foreach_learner(lambda _: torch.rand(3).tolist())]

        drawn = draw()
        assert drawn[0] != drawn[1]
        algo.set_state({RESUME_STATE: saved})
        assert draw() == drawn
        algo.train()  # a second iteration after weight sync to the remote runner
    finally:
        algo.stop()


def _train_recording(algo) -> list:
    """One iteration; the task, prompts and responses of every episode it sampled, in the order it got them."""
    seen, sample = [], algo._sample

    def recording(tasks):
        eps, metrics = sample(tasks)
        seen.extend((e.custom_data["opid"]["task_id"], [str(x) for x in e.get_extra_model_outputs("prompt")],
                     [str(x) for x in e.get_extra_model_outputs("response_text")]) for e in eps)
        return eps, metrics

    algo._sample = recording
    try:
        algo.train()
    finally:
        del algo._sample
    return seen


def test_a_resumed_remote_runner_goes_on_with_its_random_stream_and_skill_cache(ray_local, tmp_path):
    """RLlib saves one env runner's state and broadcasts it on restore, and Ray seeds a new runner from
    config.seed: without OPID's resume state a resumed remote runner draws from wherever its generator stands and
    keeps whatever skills it holds, so its next iteration differs from the one the checkpoint was taken before.
    (Restored into the same algorithm, to save a second build; the local runner's test below builds anew.)"""
    cfg = tiny_config(max_steps=2, max_new_tokens=8, skills_in_rollout_prompt=True)
    cfg.env_runners(num_env_runners=1)
    algo = cfg.build_algo()

    def skill_caches():
        return algo.env_runner_group.foreach_env_runner(lambda r: dict(r._skill_cache), local_env_runner=False)

    try:
        first = _train_recording(algo)
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        saved_caches = skill_caches()
        second = _train_recording(algo)
        assert [r for _, _, r in first] != [r for _, _, r in second]  # a replay of iteration 1 would be seen
        assert saved_caches[0] and skill_caches() != saved_caches  # the second iteration wrote skills
        algo.restore_from_path(path)
        assert skill_caches() == saved_caches
        assert _train_recording(algo) == second
    finally:
        algo.stop()


def test_checkpoint_resume_restores_weights_optimizer_and_task_stream(tmp_path):
    cfg = tiny_config(max_steps=2, max_new_tokens=8)
    a = cfg.build_algo()
    a.train()
    path = a.save_to_path(str(tmp_path / "ckpt"))
    state_a = a.learner_group.get_state()
    task_rng = a._task_rng.bit_generator.state
    next_tasks_a = a._task_rng.integers(1000, size=5).tolist()
    a._task_rng.bit_generator.state = task_rng  # undo the peek
    second_a = _train_recording(a)
    a.stop()
    b = cfg.build_algo()
    b.restore_from_path(path)
    assert b.iteration == 1
    state_b = b.learner_group.get_state()
    wa = state_a["learner"]["rl_module"]["default_policy"]
    wb = state_b["learner"]["rl_module"]["default_policy"]
    assert wa.keys() == wb.keys() and all(torch.equal(torch.as_tensor(wa[k]), torch.as_tensor(wb[k])) for k in wa)
    opt_a = state_a["learner"]["optimizer"]
    opt_b = state_b["learner"]["optimizer"]
    assert str(opt_a.keys()) == str(opt_b.keys())
    task_rng = b._task_rng.bit_generator.state
    assert b._task_rng.integers(1000, size=5).tolist() == next_tasks_a
    b._task_rng.bit_generator.state = task_rng
    # The local runner samples with this process's torch generator, which the checkpoint carries too: the resumed
    # second iteration draws what the uninterrupted one drew.
    assert _train_recording(b) == second_a
    assert b.iteration == 2
    # The env runner got the restored weights too.
    runner_w = b.env_runner.module.get_state()
    assert all(torch.equal(runner_w[k], b.learner_group._learner.module["default_policy"].get_state()[k])
               for k in runner_w)
    b.stop()


def test_train_task_ids_and_the_content_free_control_end_to_end(ray_local, tmp_path):
    """train_task_ids: only those tasks are played; content_free_skills: the skills trained on (and dumped) are filler
    of the real skills' token lengths. An unknown task id fails at build, naming the field."""
    from opid_rllib.groups import CONTENT_FREE_FILLER

    import envs

    ids = list(envs.make("searchqa").task_ids()[3:5])
    cfg = tiny_config(train_task_ids=ids, tasks_per_iter=3, run_dir=str(tmp_path)).experimental(
        content_free_skills=True)
    algo = cfg.build_algo()
    try:
        algo.train()
        tok = algo.policy_tokenizer()
    finally:
        algo.stop()
    recs = [json.loads(line) for line in open(glob.glob(str(tmp_path / "opid_skills" / "iter_*.jsonl"))[0])]
    assert recs and {r["task_id"] for r in recs} <= set(ids)
    texts = [r["skills"]["episode_skill"] for r in recs if r["skills"]]
    assert texts and all((CONTENT_FREE_FILLER * 50).startswith(t) for t in texts)  # the filler, cut at a token
    # The dump's routes are the learner's (OPID.training_step pops them from its results): one label per step.
    assert all(len(r["routed"]) == len(r["actions"]) for r in recs) and any(x for r in recs for x in r["routed"])
    bad = tiny_config(train_task_ids=["no-such-task"])
    with pytest.raises(ValueError, match="train_task_ids: 1 not among env"):
        bad.build_algo()
