"""OPIDConfig: typed defaults from the reference scripts and one clear line per bad field."""

import re

import pytest

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import PRESETS, apply_preset


def test_reference_defaults():
    c = OPIDConfig()
    assert (c.group_size, c.tasks_per_iter, c.max_step_skills_per_traj) == (8, 16, 5)
    assert (c.episode_skill_adv_weight, c.step_skill_adv_weight) == (0.001, 0.001)
    assert (c.clip_ratio_low, c.clip_ratio_high, c.dual_clip_c) == (0.2, 0.2, 3.0)
    assert (c.kl_coeff, c.entropy_coeff, c.gamma, c.invalid_action_penalty) == (0.01, 0.001, 0.95, 0.1)
    assert (c.skill_routing, c.outcome_adv_norm, c.analyzer, c.lr) == ("critical_first", "mean_std", "hindsight", 1e-6)
    assert c.train_task_ids is None and c.failed_only is False


def test_validate_names_every_bad_field():
    c = OPIDConfig().training(group_size=0, skill_routing="sideways", episode_skill_adv_weight=-1.0)
    c.analyzer_settings(analyzer="gpt")
    with pytest.raises(ValueError) as e:
        c.validate()
    msg = str(e.value)
    for field in ("group_size=0", "skill_routing='sideways'", "episode_skill_adv_weight=-1.0", "analyzer='gpt'"):
        assert field in msg
    assert "critical_first" in msg  # says what the valid choices are


def test_unknown_setting_is_rejected():
    with pytest.raises(TypeError, match="max_skils"):
        OPIDConfig().llm(max_skils=3)


def test_learners_must_not_split_groups():
    c = OPIDConfig().training(tasks_per_iter=1).learners(num_learners=2)
    with pytest.raises(ValueError, match="tasks_per_iter=1"):
        c.validate()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_validate(name):
    apply_preset(OPIDConfig(), name).validate()


def test_preset_semantics():
    grpo = apply_preset(OPIDConfig(), "grpo")
    assert grpo.analyzer == "none" and grpo.episode_skill_adv_weight == grpo.step_skill_adv_weight == 0
    assert apply_preset(OPIDConfig(), "opsd").outcome_adv_weight == 0
    assert apply_preset(OPIDConfig(), "additive").skill_routing == "additive"
    with pytest.raises(ValueError, match="preset='nope'"):
        apply_preset(OPIDConfig(), "nope")


def test_tuned_examples_build_valid_configs():
    import glob
    import os
    import runpy

    from opid_rllib.sweep_select import searched_keys

    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "tuned_examples", "[!_]*.py")))
    assert len(files) >= 6
    for f in files:
        cfg = runpy.run_path(f, run_name="tuned_example")["config"]
        if not searched_keys(cfg):
            cfg.validate()
        import envs

        assert cfg.env in envs.ENVS


def test_api_key_in_config_is_rejected_and_never_serialised(monkeypatch):
    c = OPIDConfig().analyzer_settings(analyzer="openai", analyzer_config={"api_key": "sk-secret-123"})
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        c.validate()
    monkeypatch.setenv("MY_KEY_VAR", "sk-secret-123")
    ok = OPIDConfig().analyzer_settings(analyzer="openai", analyzer_config={"api_key_env": "MY_KEY_VAR"})
    ok.validate()
    assert "sk-secret-123" not in repr(ok.to_dict())


def test_openai_analyzer_values_are_checked_before_ray_starts(monkeypatch):
    """A bad value would otherwise fail every analyzer request of the run, inside an env runner."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)   # the key is read where the analyzer runs
    for option, value, said in (("temperature", "hot", "must be a number"), ("max_retries", "five", "an integer"),
                                ("timeout_s", None, "must be a number"), ("temperature", -0.5, ">= 0")):
        c = OPIDConfig().analyzer_settings(analyzer="openai", analyzer_config={option: value})
        with pytest.raises(ValueError, match=f"analyzer_config: OpenAIAnalyzer {option}=.*{said}"):
            c.validate()
    OPIDConfig().analyzer_settings(analyzer="openai", analyzer_config={"temperature": "0.7", "timeout_s": 5}).validate()


def test_values_of_the_wrong_kind_are_named_not_raised():
    """A range check on a value of the wrong kind used to raise float()'s own error past the type check."""
    for field, value, said in (("top_p", None, "top_p=None: expected float"),
                               ("clip_ratio_low", "0.2x", "clip_ratio_low='0.2x': expected float"),
                               ("max_new_tokens", "x", "max_new_tokens='x': expected int"),
                               ("lr", -0.001, "lr=-0.001: must be > 0"), ("lr", 0.0, "lr=0.0: must be > 0")):
        c = OPIDConfig()
        setattr(c, field, value)
        with pytest.raises(ValueError, match="Invalid OPIDConfig") as info:
            c.validate()
        assert said in str(info.value) and str(info.value).count(f"{field}=") == 1, str(info.value)
    OPIDConfig().training(lr=[[0, 1e-5], [100, 1e-6]]).validate()   # an RLlib schedule is not a number


def test_reference_recipes_take_the_reference_ppo_minibatch():
    """ppo_mini_batch_size (ALFWorld 256, WebShop 64, Search 512 step-samples over all GPUs) as RLlib's
    per-learner minibatch_size: several optimizer steps per iteration, as the reference takes."""
    import os
    import runpy

    root = os.path.join(os.path.dirname(__file__), "..", "..", "tuned_examples")
    for name, want in (("alfworld_opid_qwen2_5_3b_gpu.py", 256), ("webshop_opid_gpu.py", 64),
                       ("searchqa_opid_gpu.py", 512)):
        cfg = runpy.run_path(os.path.join(root, name), run_name="x")["config"]
        assert cfg.minibatch_size * cfg.num_learners == want, name


def test_reference_recipes_validate_every_five_iterations_on_the_training_runners(monkeypatch, tmp_path):
    """The reference's test_freq (5) at temperature 0.4; no evaluation runner of its own (no extra GPU); official
    ALFWorld data validates on its own valid_seen split. The CPU examples leave evaluation off."""
    import os
    import runpy

    from opid_rllib.evaluation import evaluation_env_config

    root = os.path.join(os.path.dirname(__file__), "..", "..", "tuned_examples")
    for name, panel in (("alfworld_opid_qwen3_1_7b_gpu.py", "alfworld/valid_seen@v1"),
                        ("webshop_opid_gpu.py", "webshop/test@v1"), ("searchqa_opid_gpu.py", "searchqa/test@v1")):
        cfg = runpy.run_path(os.path.join(root, name), run_name="x")["config"]
        assert (cfg.evaluation_interval, cfg.eval_panel, cfg.eval_temperature) == (5, panel, 0.4), name
        assert cfg.evaluation_num_env_runners == 0 and cfg.get_evaluation_config_object().create_local_env_runner \
            is False
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    (tmp_path / "json_2.1.1" / "train").mkdir(parents=True)
    cfg = runpy.run_path(os.path.join(root, "alfworld_opid_qwen3_1_7b_gpu.py"), run_name="x")["config"]
    ev = cfg.get_evaluation_config_object()
    assert cfg.eval_panel is None and evaluation_env_config(ev) == {"split": "valid_seen", "max_steps": 30,
                                                                    "data_dir": str(tmp_path)}
    assert cfg.env_config["split"] == "train"
    cpu = runpy.run_path(os.path.join(root, "alfworld_opid_tiny_cpu.py"), run_name="x")["config"]
    assert not cpu.evaluation_interval


def test_train_task_ids_names_the_tasks_and_bad_ones_are_refused():
    for value, said in (([], "train_task_ids=[]: must be None"), (["a", 3], "train_task_ids=['a', 3]: must be None"),
                        ("abc", "train_task_ids='abc': expected list")):
        c = OPIDConfig().training(train_task_ids=value)
        with pytest.raises(ValueError, match="Invalid OPIDConfig") as info:
            c.validate()
        assert said in str(info.value), str(info.value)
    c = OPIDConfig().experimental(shuffle_skills=True, content_free_skills=True)
    with pytest.raises(ValueError, match="content_free_skills=True: shuffle_skills=True is the other control"):
        c.validate()


def test_research_settings_are_fenced_in_experimental():
    """Settings not in the paper live in .experimental(...); .training() refuses them with the pointer."""
    from opid_rllib.settings import EXPERIMENTAL_SETTINGS, OPID_DEFAULTS

    assert set(EXPERIMENTAL_SETTINGS) <= set(OPID_DEFAULTS)
    for name in EXPERIMENTAL_SETTINGS:
        with pytest.raises(TypeError, match=rf"{name}=...\): not in the paper; set it with OPIDConfig\(\).experimental"):
            OPIDConfig().training(**{name: OPID_DEFAULTS[name][0]})
    c = OPIDConfig().experimental(teacher_sample_adv_weight=0.5, shuffle_skills=True)
    assert (c.teacher_sample_adv_weight, c.shuffle_skills) == (0.5, True)
    with pytest.raises(TypeError, match=r"experimental\(lr=...\): not an experimental setting"):
        OPIDConfig().experimental(lr=1e-5)


def test_validate_does_not_print_rllibs_new_api_stack_notice(caplog):
    """OPID only runs on the new API stack; RLlib's once-per-process notice that it is the default is noise here."""
    import logging

    with caplog.at_level(logging.WARNING):
        OPIDConfig().validate()
    assert not [r for r in caplog.records if "new API stack" in r.getMessage()]


@pytest.mark.parametrize("builder, setting, says", [
    ("llm", {"temperature": 0}, "temperature=0: must be > 0"),
    ("llm", {"temperature": 0.0}, "greedy sampling, is not a policy to train"),
    ("llm", {"top_p": 1.5}, "top_p=1.5: must be in (0, 1]"),
    ("llm", {"top_p": 0.0}, "top_p=0.0: must be in (0, 1]"),
    ("training", {"kl_coeff": -0.01}, "kl_coeff=-0.01: must be >= 0"),
    ("training", {"entropy_coeff": -1.0}, "entropy_coeff=-1.0: must be >= 0"),
    ("training", {"invalid_action_penalty": -0.1}, "invalid_action_penalty=-0.1: must be >= 0"),
    ("llm", {"eval_temperature": -0.4}, "eval_temperature=-0.4: must be >= 0"),
    ("llm", {"history_length": -1}, "history_length=-1: must be >= 0"),
    ("llm", {"max_steps": 0}, "max_steps=0: must be >= 1"),
    ("analyzer_settings", {"analyzer_num_workers": 0}, "analyzer_num_workers=0: must be >= 1"),
    ("llm", {"score_micro_batch_size": 0}, "score_micro_batch_size=0: must be >= 1"),
    ("llm", {"backend_kwargs": {"gpu_memory_utilization": 0.5}},
     "backend_kwargs['gpu_memory_utilization']: the hf backend takes only"),
])
def test_bad_settings_are_refused_in_one_line_before_ray_starts(builder, setting, says):
    """Each bad value is one line naming the field and the fix, raised by validate() (build_algo's first step and
    opid-train's check), before any Ray session exists."""
    import ray

    cfg = getattr(OPIDConfig(), builder)(**setting)
    with pytest.raises(ValueError) as e:
        cfg.validate()
    lines = str(e.value).splitlines()[1:]
    assert len(lines) == 1 and says in lines[0], str(e.value)
    with pytest.raises(ValueError, match=re.escape(says)):
        cfg.build_algo()
    assert not ray.is_initialized()


def test_eval_temperature_zero_is_greedy_evaluation():
    OPIDConfig().llm(eval_temperature=0.0).validate()
