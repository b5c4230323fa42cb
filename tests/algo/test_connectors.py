"""The learner connector pipeline on real rollouts: skills -> routing -> prompts -> re-score -> A."""

import copy

import numpy as np
import pytest

from opid_rllib.connectors.outcome import outcome_advantages
from opid_rllib.groups import shard_by_group
from opid_rllib.algorithm import learner_connectors
from opid_rllib.connectors import SAMPLES
from opid_rllib.env_runner import GroupedTextEnvRunner
from opid_rllib.prompts import insert_skills
from opid_rllib.rl_module import LLMRLModule
from envs.base import text_space
from tests.algo.helpers import rollouts_and_module, tiny_config

W = 0.5  # a large weight so the teacher term is visible next to the outcome term


@pytest.fixture(scope="module")
def setup():
    return rollouts_and_module(episode_skill_adv_weight=W, step_skill_adv_weight=W)


def run_pipeline(cfg, episodes, module, metrics=None):
    shared = {}
    batch = {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    return batch["default_policy"], shared[SAMPLES]


def trained_routes(cfg, episodes, module) -> dict:
    """{traj_id: labels} as the pipeline reports them to the driver (OPID.training_step's pop_trained_routes)."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.connectors.combine import pop_trained_routes

    metrics = MetricsLogger()
    run_pipeline(cfg, episodes, module, metrics)
    return pop_trained_routes([metrics.reduce()])


def test_critical_first_rescoring_and_combined_advantage(setup):
    cfg, episodes, module = setup
    out, t = run_pipeline(cfg, episodes, module)
    n = len(t.prompt)
    assert out["advantages"].shape[0] == n == sum(len(e) for e in episodes)
    analysis = {e.custom_data["opid"]["traj_id"]: e.custom_data["opid"]["skills"] for e in episodes}
    for i in range(n):
        # Expected routing from the raw analysis the runner attached, independently of the table.
        raw = analysis[t.traj_id[i]]
        raw_step = raw["step_skills"].get(str(int(t.step_index[i])))
        has_step = raw_step is not None
        # Critical-first: a critical step uses its step skill only; every other step the episode skill.
        assert t.use_step[i] == has_step and t.use_episode[i] == (not has_step)
        skill_prompt = t.prompt_step[i] if has_step else t.prompt_ep[i]
        expect_prompt = insert_skills(t.prompt[i], step_skill=raw_step) if has_step \
            else insert_skills(t.prompt[i], episode_skill=raw["episode_skill"])
        assert expect_prompt != t.prompt[i]
        ids, _ = module.encode_prompts([expect_prompt])
        assert skill_prompt == ids[0] and t.prompt_ids[i] == module.encode_prompts([t.prompt[i]])[0][0]
        # Re-scoring = the module's own log-probs of the SAME response under the skill prompt.
        want = module.score(ids, [t.response_ids[i]])[0]
        got = t.logp_step[i] if has_step else t.logp_ep[i]
        np.testing.assert_allclose(got, want, atol=1e-5)
        r = len(t.response_ids[i])
        old = out["old_logp"][i, :r].numpy()
        adv = out["advantages"][i].numpy()
        np.testing.assert_allclose(adv[:r], t.outcome_adv[i] + W * (want - old), atol=1e-4)
        assert np.all(adv[r:] == 0)
    assert t.use_step.any() and t.use_episode.any()


def test_failed_analysis_falls_back_to_plain_grpo(setup):
    cfg, episodes, module = setup
    eps = copy.deepcopy(episodes)
    eps[0].custom_data["opid"]["skills"] = {"episode_skill": "", "step_skills": {}, "error": "HTTP 500"}
    eps[1].custom_data["opid"]["skills"] = None  # never analysed
    out, t = run_pipeline(cfg, eps, module)
    k = len(eps[0]) + len(eps[1])
    assert not t.use_episode[:k].any() and not t.use_step[:k].any()
    mask = out["response_mask"][:k].numpy()
    np.testing.assert_array_equal(out["advantages"][:k].numpy(), t.outcome_adv[:k, None] * mask)


class _Metrics:
    def __init__(self):
        self.values = {}

    def log_value(self, key, value, **kw):
        self.values["/".join(key)] = value


def test_a_cut_skill_prompt_falls_back_to_grpo_and_is_counted(setup):
    """A skill prompt over max_prompt_len is left-truncated (task line lost): its Delta would measure more
    than the skill, so the row gets no teacher term, and the count reaches the metrics."""
    cfg, episodes, module = setup
    eps = copy.deepcopy(episodes)
    limit = int(module.model_config["max_prompt_len"])
    eps[0].custom_data["opid"]["skills"] = {"episode_skill": "stay on task " * limit, "step_skills": {},
                                            "error": None}
    shared, batch, metrics = {}, {}, _Metrics()
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=eps, shared_data=shared, metrics=metrics)
    out, t = batch["default_policy"], shared[SAMPLES]
    k = len(eps[0])
    assert not any(module.encode_prompts([p])[1][0] for p in t.prompt[:k])  # the plain prompts fit
    assert not t.use_episode[:k].any() and all(lp is None for lp in t.logp_ep[:k])
    mask = out["response_mask"][:k].numpy()
    np.testing.assert_array_equal(out["advantages"][:k].numpy(), t.outcome_adv[:k, None] * mask)
    assert metrics.values["opid/teacher_prompt_truncations"] == k
    assert t.use_episode[k:].any() or t.use_step[k:].any()  # the other episodes keep their teacher term


def test_grpo_weights_zero_means_no_rescoring(setup):
    cfg, episodes, module = setup
    grpo = copy.deepcopy(cfg)
    grpo.training(episode_skill_adv_weight=0.0, step_skill_adv_weight=0.0)
    out, t = run_pipeline(grpo, episodes, module)
    assert all(p is None for p in t.prompt_ep + t.prompt_step)
    np.testing.assert_array_equal(out["advantages"].numpy(), t.outcome_adv[:, None] * out["response_mask"].numpy())


def test_outcome_advantage_uses_group_statistics(setup):
    cfg, episodes, module = setup
    adv = np.concatenate(outcome_advantages(episodes, cfg.invalid_action_penalty, cfg.outcome_adv_norm))
    _, t = run_pipeline(cfg, episodes, module)
    np.testing.assert_array_equal(t.outcome_adv, adv)  # the first connector's A_out is the table's
    groups = [e.custom_data["opid"]["group_id"] for e in episodes for _ in range(len(e))]
    for g in set(groups):
        sel = np.asarray(groups) == g
        assert abs(adv[sel].mean()) < 1e-5  # mean-std normalised within each group over all its steps


def test_shards_keep_groups_whole(setup):
    _, episodes, _ = setup
    eps = episodes * 3  # 2 groups, each now 3x larger
    shards = shard_by_group(eps, 2)
    seen = {}
    for k, shard in enumerate(shards):
        for e in shard:
            assert seen.setdefault(e.custom_data["opid"]["group_id"], k) == k
    assert sum(len(s) for s in shards) == len(eps) and all(shards)


def test_delta_statistics_are_logged_from_the_batch(setup):
    """The Delta metrics (does the policy react to skills?) are the routed rows' token shifts."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    cfg, episodes, module = setup
    metrics = MetricsLogger()
    shared, batch = {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    t, out = shared[SAMPLES], batch["default_policy"]
    mask = out["response_mask"].numpy() > 0
    for key, q, lp in (("ep", t.use_episode, "logp_ep"), ("step", t.use_step, "logp_step")):
        rows = np.flatnonzero(q)
        tok = np.concatenate([np.asarray(getattr(t, lp)[i]) - out["old_logp"][i].numpy()[mask[i]] for i in rows])
        d = {s: metrics.peek(("opid", f"delta_{key}", s)) for s in ("token_mean", "token_abs_mean", "token_std",
                                                                     "token_pos_frac")}
        assert tok.size and np.any(tok != 0)
        np.testing.assert_allclose(d["token_mean"], tok.mean(), atol=1e-5)
        np.testing.assert_allclose(d["token_abs_mean"], np.abs(tok).mean(), atol=1e-5)
        np.testing.assert_allclose(d["token_std"], tok.std(), atol=1e-5)
        np.testing.assert_allclose(d["token_pos_frac"], (tok > 0).mean(), atol=1e-6)


def test_learner_micro_batches_equal_one_full_batch_step(setup):
    """The learner cuts length-sorted micro-batches; the accumulated gradient must equal one
    token-mean backward over the whole batch (rows of every key permuted together)."""
    import torch

    from envs.base import text_space
    from opid_rllib.token_logprobs import response_logprobs

    cfg, episodes, _ = setup
    cfg = copy.deepcopy(cfg)
    cfg.training(micro_batch_size=3)
    cfg.grad_clip = None
    learner = cfg.build_learner(spaces={"default_policy": (text_space(), text_space())})
    module = learner.module["default_policy"].unwrapped()
    batch, _ = run_pipeline(cfg, episodes, learner.module)
    assert batch["prompt_len"].unique().numel() > 1  # mixed lengths, so the sort reorders rows
    ref = copy.deepcopy(module.model)
    lp, ent = response_logprobs(ref, batch["prompt_ids"], batch["prompt_len"], batch["response_ids"],
                                batch["response_len"], with_entropy=True)
    loss_sum, _ = learner._loss_sum(batch, {"logp": lp, "entropy": ent})
    (loss_sum / batch["response_mask"].sum()).backward()
    learner._uncompiled_update({"default_policy": batch})
    want = dict(ref.named_parameters())
    for name, p in module.model.named_parameters():
        torch.testing.assert_close(p.grad, want[name].grad, atol=1e-6, rtol=1e-4, msg=name)


def test_skill_dump_routes_are_the_trained_routes_where_routing_alone_would_disagree(setup, tmp_path):
    """The dump's `routed` column is the learner's own output: routing the analysis again (as the dump used to) would
    say "episode" on rows the learner did not train with a skill: here a truncated skill prompt (trajectory 0) and a
    non-finite re-score (one row of trajectory 1). An analysis with an error next to a non-empty episode skill
    routes nothing."""
    from opid_rllib.prompts.skills import route_label, route_trajectory, usable_skills
    from opid_rllib.report.skills import load_skill_dumps, write_skill_dump

    cfg, episodes, module = setup
    eps = copy.deepcopy(episodes)
    limit = int(module.model_config["max_prompt_len"])
    eps[0].custom_data["opid"]["skills"] = {"episode_skill": "stay on task " * limit, "step_skills": {},
                                            "error": None}
    eps[1].custom_data["opid"]["skills"] = dict(eps[1].custom_data["opid"]["skills"], error="timeout")

    routes = trained_routes(cfg, eps, module)
    path = write_skill_dump(tmp_path, eps, iteration=1, routes=routes)
    dumped = {r["traj_id"]: r["routed"] for r in load_skill_dumps(tmp_path)[0]}
    assert path.exists() and dumped == routes and set(routes) == {e.custom_data["opid"]["traj_id"] for e in eps}
    tid0 = eps[0].custom_data["opid"]["traj_id"]
    s = usable_skills(eps[0].custom_data["opid"]["skills"])
    by_routing = [route_label(r.use_episode, r.use_step) for r in route_trajectory(
        len(eps[0]), s.episode_skill, s.step_skills, mode=cfg.skill_routing, w_ep=W, w_step=W)]
    assert by_routing == ["episode"] * len(eps[0]) and dumped[tid0] == [None] * len(eps[0])
    assert dumped[eps[1].custom_data["opid"]["traj_id"]] == [None] * len(eps[1])  # the errored analysis
    rest = [r for ep in eps[2:] for r in dumped[ep.custom_data["opid"]["traj_id"]]]
    assert "episode" in rest and "step" in rest


def test_skill_dump_follows_a_nonfinite_rescore(setup):
    """A routed row whose re-score is NaN trains without its skill term, and the routes reported say so."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.connectors.combine import pop_trained_routes
    from opid_rllib.prompts.skills import route_label

    cfg, episodes, module = setup
    pieces = learner_connectors(cfg)
    shared, batch, metrics = {}, {}, MetricsLogger()
    for piece in pieces[:-1]:
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=None)
    t = shared[SAMPLES]
    row = int(np.flatnonzero(t.use_episode)[0])
    t.logp_ep[row] = np.full_like(t.logp_ep[row], np.nan)
    pieces[-1](rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    routes = pop_trained_routes([metrics.reduce()])
    labels = [r for tid in t.trajectories for r in routes[tid]]
    expect = [route_label(bool(e), bool(s)) for e, s in zip(t.use_episode, t.use_step)]
    assert expect[row] == "episode" and labels[row] is None
    assert labels[:row] + labels[row + 1:] == expect[:row] + expect[row + 1:]


def test_loss_batch_is_created_on_the_learner_device(setup):
    """build_learner_connector's `device` reaches the tensors the loss reads. "meta" stands in for a
    second device on a CPU-only machine: a tensor left on the CPU would fail this test."""
    import torch

    cfg, episodes, module = setup
    shared, batch = {}, {}
    for piece in learner_connectors(cfg, device="meta"):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=None)
    out = batch["default_policy"]
    assert out and all(v.device == torch.device("meta") for v in out.values()), {k: v.device for k, v in out.items()}
    pipeline = cfg.build_learner_connector(text_space(), text_space(), device=torch.device("meta"))
    batch = pipeline(rl_module=module, batch={}, episodes=episodes, shared_data={}, metrics=None)
    assert all(v.device == torch.device("meta") for v in batch["default_policy"].values())


def test_plan_match_column_comes_from_the_expert_plan():
    """ALFWorld gives the expert's next action in every info: on_plan is 1 exactly where the
    sampled action equals it (case/space-insensitive), NaN where the env has no plan."""
    from opid_rllib.advantages import plan_match

    assert plan_match("Go to  Fridge 1", ["go to fridge 1", "open fridge 1"]) == 1.0
    assert plan_match("go to countertop 2", ["go to fridge 1"]) == 0.0
    assert np.isnan(plan_match("go to fridge 1", []))
    assert np.isnan(plan_match("go to fridge 1", None))


def test_delta_by_plan_metrics_on_alfworld_rollouts():
    """On a real ALFWorld rollout the learner logs Delta split by plan for both skill kinds."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.advantages import plan_match

    cfg = tiny_config("alfworld", group_size=2, tasks_per_iter=1, max_steps=3, max_step_skills_per_traj=1,
                      episode_skill_adv_weight=W, step_skill_adv_weight=W)
    runner = GroupedTextEnvRunner(config=cfg)
    episodes = runner.sample_groups(list(runner._make_env(0).task_ids()[:1]), seed=3)
    runner.stop()
    module = LLMRLModule(observation_space=text_space(), action_space=text_space(), model_config=cfg.model_config)
    metrics = MetricsLogger()
    shared, batch = {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    t = shared[SAMPLES]
    want = [plan_match(a, ep.get_infos()[i]["expert_actions"]) for ep in episodes
            for i, a in enumerate(ep.get_actions())]
    np.testing.assert_array_equal(t.on_plan, np.asarray(want, np.float32))
    assert np.isfinite(t.on_plan).all()  # ALFWorld always has a plan
    # The untrained model leaves the plan: off-plan statistics exist for the routed skill kinds.
    for key, q in (("ep", t.use_episode), ("step", t.use_step)):
        if (q & (t.on_plan == 0)).any():
            assert 0.0 <= metrics.peek(("opid", f"delta_{key}", "off_plan_neg_frac")) <= 1.0
            assert metrics.peek(("opid", f"delta_{key}", "off_plan_steps")) == int((q & (t.on_plan == 0)).sum())


def test_skill_dump_round_trip_keeps_plan_and_teacher_diagnostics(setup, tmp_path):
    """Writer and reader live side by side (report/skills.py): what training writes, the browser reads."""
    from opid_rllib.report.skills import load_skill_dumps, write_skill_dump

    cfg, episodes, _ = setup
    diag = {"delta_step/off_plan_neg_frac": 0.75, "delta_ep/on_plan_steps": 3.0}
    path = write_skill_dump(tmp_path, episodes, iteration=4, routes={}, teacher_diagnostics=diag)
    assert path.name == "iter_00004.jsonl"
    trajs, warnings = load_skill_dumps(tmp_path)
    assert not warnings and len(trajs) == len(episodes)
    for t, ep in zip(trajs, episodes):
        assert t["iteration"] == 4 and len(t["on_plan"]) == len(t["routed"]) == len(ep)
        assert t["teacher_diagnostics"] == diag
        assert t["skills"]["episode_skill"] == ep.custom_data["opid"]["skills"]["episode_skill"]


def test_teacher_diagnostics_read_what_the_learner_logged_and_skip_what_it_did_not():
    """What the algorithm puts into each skill dump: the learner's Delta-by-plan and teacher-sample metrics; a group
    the env never logs (searchqa has no plan) is left out, not an error."""
    from ray.rllib.utils.metrics import LEARNER_RESULTS
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.report.skills import teacher_diagnostics

    metrics = MetricsLogger()
    metrics.log_value((LEARNER_RESULTS, "opid", "delta_ep", "on_plan_steps"), 3, window=1)
    metrics.log_value((LEARNER_RESULTS, "opid", "delta_step", "off_plan_neg_frac"), 0.75, window=1)
    peek = lambda *key: metrics.peek((LEARNER_RESULTS, "opid", *key), default=None)  # noqa: E731 (as OPID does)
    assert teacher_diagnostics(peek) == {"delta_ep/on_plan_steps": 3.0, "delta_step/off_plan_neg_frac": 0.75}
    assert teacher_diagnostics(lambda *key: MetricsLogger().peek(("x", *key), default=None)) == {}


def test_shuffled_skills_control_on_real_rollouts(setup):
    """preset opid_shuffled: every trajectory is trained (and dumped) with the skills written for a
    trajectory of another task, never its own task's."""
    from opid_rllib.experimental.controls import shuffle_skills_across_tasks
    from opid_rllib.presets import PRESETS

    assert PRESETS["opid_shuffled"] == {"shuffle_skills": True}
    cfg, episodes, module = setup
    eps = copy.deepcopy(episodes)
    assert shuffle_skills_across_tasks(eps, seed=1) == 0
    by_traj = {e.custom_data["opid"]["traj_id"]: e.custom_data["opid"] for e in episodes}
    for ep in eps:
        m = ep.custom_data["opid"]
        donor = by_traj[m["skills_from"]]
        assert donor["task_id"] != m["task_id"] and m["skills"] == donor["skills"]
        assert m["own_skills"] == by_traj[m["traj_id"]]["skills"]
    _, t = run_pipeline(cfg, eps, module)
    donor_routes = {m["traj_id"]: m["skills_from"] for m in (e.custom_data["opid"] for e in eps)}
    routes = trained_routes(cfg, eps, module)
    assert any(r for labels in routes.values() for r in labels)
    for tid, traj in t.trajectories.items():  # each trajectory trained with its donor's analysis
        assert traj.skills.episode_skill == by_traj[donor_routes[tid]]["skills"]["episode_skill"]


def _alfworld_episode(commands, group_id="g"):
    """A real ALFWorld game played with `commands` (each a well-formed response), as the runner records it."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    import envs

    env = envs.make("alfworld", split="train", max_steps=30)
    obs, info = env.reset(options={"task_id": env.task_ids()[0]})
    ep = SingleAgentEpisode(observations=[obs], infos=[info])
    for cmd in commands:
        obs, r, term, trunc, info = env.step(cmd)
        ep.add_env_step(observation=obs, action=cmd, reward=r, infos=info, terminated=term, truncated=trunc,
                        extra_model_outputs={"format_valid": True})
    ep.custom_data["opid"] = {"group_id": group_id}
    return env, ep


def test_env_rejected_commands_are_invalid_only_when_asked():
    """invalid_action_source='env': a well-formed command the game rejects ('Nothing happens.') is invalid for
    the penalty; 'format' (the reference, the default) counts the response's format only."""
    from opid_rllib.connectors.outcome import step_validity

    env, _ = _alfworld_episode([])
    here = next(a for a in env._admissible() if a.startswith("go to "))
    _, ep = _alfworld_episode([here, here, "look"])  # the second 'go to' goes where the player stands
    assert ep.get_observations()[2] == "Nothing happens."
    assert step_validity(ep, "format").tolist() == [True, True, True]
    assert step_validity(ep, "env").tolist() == [True, False, True]
    _, other = _alfworld_episode([here, "look", "look"])
    for source, want_differ in (("format", False), ("env", True)):
        eps = [copy.deepcopy(ep), copy.deepcopy(other)]
        adv = [list(a) for a in outcome_advantages(eps, 0.1, "mean_std", source)]
        assert (len(set(adv[0] + adv[1])) > 1) == want_differ  # R = 0 everywhere: only the penalty differs
        if want_differ:
            assert adv[0][1] < 0 < adv[0][0]  # the rejected step is pushed down, the rest up
    bad = "take nothing 1 from nowhere 1"  # rejected the first time too: 'repeat' penalises only its repeat
    _, takes = _alfworld_episode([here, here, bad, bad])
    assert takes.get_observations()[3:] == ["Nothing happens."] * 2
    assert step_validity(takes, "env").tolist() == [True, False, False, False]
    assert step_validity(takes, "repeat").tolist() == [True, False, True, False]
    with pytest.raises(ValueError, match="invalid_action_source='both'"):
        tiny_config(invalid_action_source="both").validate()


def test_nonfinite_rescores_fall_back_and_are_counted(setup):
    """A NaN teacher log-prob on a routed row used to make that row's advantage NaN (and, z-scored, every row's);
    an -inf old log-prob made its PPO ratio inf. The teacher row falls back to the plain GRPO signal, the row
    without an old log-prob leaves the loss, and both are counted."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    cfg, episodes, module = setup
    cfg = copy.deepcopy(cfg).experimental(normalize_teacher_adv=True)
    pieces = learner_connectors(cfg)
    shared, batch = {}, {}
    for piece in pieces[:-1]:
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=None)
    t = shared[SAMPLES]
    ep_row, old_row = np.flatnonzero(t.use_episode)[:2]
    t.logp_ep[ep_row] = np.array(t.logp_ep[ep_row], copy=True)
    t.logp_ep[ep_row][0] = np.nan
    t.logp_old[old_row] = np.array(t.logp_old[old_row], copy=True)
    t.logp_old[old_row][-1] = -np.inf
    metrics = MetricsLogger()
    out = pieces[-1](rl_module=module, batch=batch, episodes=episodes, shared_data=shared,
                     metrics=metrics)["default_policy"]
    assert np.isfinite(out["advantages"].numpy()).all() and np.isfinite(out["old_logp"].numpy()).all()
    mask = out["response_mask"].numpy()
    outcome_only = t.outcome_adv[:, None] * mask
    np.testing.assert_array_equal(out["advantages"][ep_row].numpy(), outcome_only[ep_row])
    assert not out["response_mask"][old_row].any() and out["response_mask"][ep_row].any()
    assert metrics.peek(("opid", "nonfinite", "teacher_rows_ep")) == 1
    assert metrics.peek(("opid", "nonfinite", "old_logp_rows")) == 1
    assert metrics.peek(("opid", "nonfinite", "teacher_rows_step")) == 0
    others = np.setdiff1d(np.flatnonzero(t.use_episode), [ep_row, old_row])
    assert np.abs(out["advantages"][others].numpy() - outcome_only[others]).sum() > 0  # the rest keep their term


def test_content_free_skills_control_on_real_rollouts(setup):
    """preset opid_content_free: every skill becomes filler of the same token length (the prompt-shift control);
    the learner routes and re-scores exactly the rows the real skills would, with the filler in the prompt."""
    from opid_rllib.experimental.controls import CONTENT_FREE_FILLER, content_free_skills
    from opid_rllib.presets import PRESETS

    assert PRESETS["opid_content_free"] == {"content_free_skills": True}
    cfg, episodes, module = setup
    tok = module.tokenizer
    count = lambda t: len(tok(t, add_special_tokens=False).input_ids)  # noqa: E731
    eps = copy.deepcopy(episodes)
    assert content_free_skills(eps, tok) == sum(bool(e.custom_data["opid"].get("skills")) for e in episodes) > 0
    for ep, orig in zip(eps, episodes):
        m, real = ep.custom_data["opid"], orig.custom_data["opid"]["skills"]
        assert m["own_skills"] == real
        if not real:
            continue
        pairs = [(m["skills"]["episode_skill"], real["episode_skill"])]
        pairs += [(m["skills"]["step_skills"][k], v) for k, v in real["step_skills"].items()]
        for fake, text in pairs:
            assert fake != text and count(fake) == count(text), (fake, text)
            assert (CONTENT_FREE_FILLER * 50).startswith(fake)  # the filler, cut at a token
    _, t_real = run_pipeline(cfg, copy.deepcopy(episodes), module)
    _, t_free = run_pipeline(cfg, eps, module)
    assert list(t_free.use_episode) == list(t_real.use_episode) and list(t_free.use_step) == list(t_real.use_step)


def test_content_free_text_has_the_asked_length():
    from transformers import AutoTokenizer

    from opid_rllib.experimental.controls import content_free_text
    from opid_rllib.models import resolve_model

    tok = AutoTokenizer.from_pretrained(str(resolve_model("tiny")))
    for n in (0, 1, 3, 17, 60):
        assert len(tok(content_free_text(n, tok), add_special_tokens=False).input_ids) == n


@pytest.mark.parametrize("recompute", [True, False])
def test_sampler_learner_logp_gap_is_logged_when_old_logp_is_recomputed(setup, recompute):
    """The training-inference mismatch metric: recomputed log pi_old against what the sampler reported, over the
    sampled tokens (HF's sampler here: the same weights through generate's cached forward, so the gap is tiny but
    measured); without a recompute there is nothing to compare and no metric."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.connectors.rescore import logp_gap

    cfg, episodes, module = setup
    cfg = copy.copy(cfg).training(recompute_old_logp=recompute)
    metrics, shared, batch = MetricsLogger(), {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    t = shared[SAMPLES]
    if not recompute:
        with pytest.raises(KeyError):
            metrics.peek(("opid", "sampler", "logp_gap_mean"))
        return
    want = logp_gap(t.sampling_logp, t.logp_old)
    assert want["logp_gap_tokens"] == sum(len(x) for x in t.sampling_logp) > 0
    assert 0 < want["logp_gap_mean"] <= want["logp_gap_max"] < 1e-3
    for key in ("logp_gap_mean", "logp_gap_max", "logp_gap_tokens"):
        assert metrics.peek(("opid", "sampler", key)) == pytest.approx(want[key])
    assert logp_gap([np.array([-1.0, -2.0, np.nan])], [np.array([-1.5, -2.0, -3.0])]) == {
        "logp_gap_mean": 0.25, "logp_gap_max": 0.5, "logp_gap_tokens": 2}
    assert logp_gap([], []) == {}
