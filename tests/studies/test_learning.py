"""studies/learning.py, the studies' driver: its summary, variants, cost, headroom, dtype, settings, base
and shard rules, the order of its jobs and its cached-only report."""

from __future__ import annotations

import json

import pytest

from studies import learning, learning_report, run_cache, study_job


def test_learning_summary_is_the_paired_mean_over_seeds():
    """studies/learning.py's summary: (variant - GRPO) on All per seed both ran, averaged; the names the
    README and studies/results/learning.json quote."""
    cells = {("grpo", 0): 10.0, ("grpo", 1): 4.0, ("opid", 0): 16.0, ("opid", 1): 2.0, ("opid", 2): 50.0,
             ("opid_shuffled", 0): 9.0, ("opid_shuffled", 1): 6.0}
    runs = [{"variant": v, "seed": s, "table": {"success_pct": {"All": x}}} for (v, s), x in cells.items()]
    got = learning.summary(runs)
    assert got["opid_minus_grpo_all"] == pytest.approx(2.0)  # (+6 - 2) / 2; seed 2 has no GRPO run
    assert got["shuffled_minus_grpo_all"] == pytest.approx(0.5)  # (-1 + 2) / 2
    assert learning.summary(runs[:2])["opid_minus_grpo_all"] is None
    assert got["minus_grpo_all_by_variant"] == {"opid": pytest.approx(2.0), "opid_shuffled": pytest.approx(0.5)}
    assert got["paired_seeds_by_variant"] == {"opid": [0, 1], "opid_shuffled": [0, 1]}  # not opid's unpaired seed 2
    one = learning.summary([r for r in runs if (r["variant"], r["seed"]) != ("opid_shuffled", 1)])
    assert one["paired_seeds_by_variant"]["opid_shuffled"] == [0] and one["shuffled_minus_grpo_all"] == -1.0
    named = learning.summary(runs, opid="opid_shuffled", shuffled="opid")
    assert named["opid_minus_grpo_all"] == pytest.approx(0.5) and named["opid_variant"] == "opid_shuffled"
    # expert agreement pairs the same way; a run cached before the metric existed is left out, not read as 0
    assert got["minus_grpo_agreement_by_variant"] == {"opid": None, "opid_shuffled": None}
    for r, agree in zip(runs, (20.0, 18.0, 25.5, None, 30.0, 19.0, None)):
        if agree is not None:
            r["table"]["expert_agreement_pct"] = agree
    got = learning.summary(runs)["minus_grpo_agreement_by_variant"]
    assert got == {"opid": pytest.approx(5.5), "opid_shuffled": pytest.approx(-1.0)}  # seed 0 only for both
    # the figures of the on-plan study: a mean quoted with the panel's 2 decimals, not 0.4999999999999994
    pairs = [(18.12, 20.05), (21.48, 22.65), (17.13, 15.53)]
    made = [{"variant": v, "seed": s, "table": {"success_pct": {"All": 0.0}, "expert_agreement_pct": a}}
            for s, (g, o) in enumerate(pairs) for v, a in (("grpo", g), ("opid", o))]
    assert learning.summary(made)["minus_grpo_agreement_by_variant"]["opid"] == 0.5
    text = learning.table_text({"grpo": [dict(r["table"], columns=["All"]) for r in runs[:2]]}).splitlines()
    assert text[0].split() == ["variant", "All", "Agree%"] and text[1].split() == ["grpo", "7.0+-3.0", "19.0+-1.0"]


def test_learning_variants_take_analyzer_options():
    job = study_job
    name, over = job.parse_variant("opid:w_step=1+analyzer.on_plan_step_skills=3+w_ep=0")
    assert name == "opid" and over == {"step_skill_adv_weight": 1, "episode_skill_adv_weight": 0,
                                       "analyzer_config": {"on_plan_step_skills": 3}}
    assert job.parse_variant("grpo:invalid_action_source=env") == ("grpo", {"invalid_action_source": "env"})
    with pytest.raises(SystemExit, match="'w=abc': value must be a number"):
        job.parse_variant("opid:w=abc")  # a numeric setting keeps refusing words before any run starts


def test_learning_results_say_what_the_runs_cost_even_from_the_cache():
    """run_seconds sums each run's own train/eval seconds: a report that only reads cached runs (its own wall
    time near 0) still states the study's cost."""
    runs = [{"variant": "grpo", "seed": 0, "train_s": 500.04, "eval_s": 250.0},
            {"variant": "opid:w=0.1", "seed": 1, "train_s": 610.0, "eval_s": 240.5}]
    got = learning.run_seconds(runs)
    assert got["all_runs_s"] == pytest.approx(1600.5)
    assert got["per_run"]["opid:w=0.1 s1"] == {"train_s": 610.0, "eval_s": 240.5}


def test_learning_headroom_read_from_the_same_oracle_play_only(tmp_path, capsys):
    """--headroom-results: opid-eval's results.json of the base's oracle play is read instead of playing the
    panel again, and refused, naming the setting, where that play differs from the one this run would make, the
    model's weights included where the play records them."""
    import argparse

    from opid_rllib.models.fingerprint import weights_fingerprint

    job = study_job
    args = argparse.Namespace(headroom_panel="alfworld/valid_unseen@v1", eval_temperature=0.4, eval_max_steps=30,
                              history_length=2, max_new_tokens=48, max_prompt_len=1024, dtype="float32",
                              env_config={"expert": "sweep"}, headroom_results=str(tmp_path / "results.json"))
    config = {"panel": "alfworld/valid_unseen@v1", "skills": "oracle", "seed": 0, "temperature": 0.4,
              "max_steps": 30, "history_length": 2, "max_new_tokens": 48, "max_prompt_len": 1024, "dtype": "float32",
              "env_config": {"split": "valid_unseen", "expert": "sweep", "max_steps": 30}}
    played = {"config": config, "counts": {"episodes": 126}, "table": {"success_pct": {"All": 4.76}},
              "teacher_table": {"success_pct": {"All": 70.63}}, "headroom": {"All": 65.87}}
    (tmp_path / "results.json").write_text(json.dumps(played))
    got = job.base_headroom("unused-model-path", args)
    assert got == {k: played[k] for k in ("table", "teacher_table", "headroom")}
    assert "does not record its model's weights" in capsys.readouterr().out  # an older play: said, not checked
    # studies/smollm2_headroom.sh's RESULTS= record holds the same play under "play" (the repo keeps that one)
    (tmp_path / "results.json").write_text(json.dumps({"command": "bash studies/smollm2_headroom.sh", "play": played}))
    assert job.base_headroom("unused-model-path", args) == got
    for key, other in (("max_prompt_len", 2048), ("skills", "none"), ("env_config", {"expert": "handcoded"}),
                       ("dtype", "bfloat16")):
        bad = dict(played, config=dict(config, **{key: other}))
        for on_disk in (bad, {"play": bad}):
            (tmp_path / "results.json").write_text(json.dumps(on_disk))
            with pytest.raises(SystemExit, match=key):
                job.base_headroom("unused-model-path", args)
    base, other = tmp_path / "base", tmp_path / "other"
    for d, byte in ((base, b"\x00"), (other, b"\x01")):
        d.mkdir()
        (d / "model.safetensors").write_bytes(byte * 64)
    (tmp_path / "results.json").write_text(json.dumps(
        dict(played, config=dict(config, model=str(tmp_path / "moved"), model_weights=weights_fingerprint(str(base))))))
    capsys.readouterr()
    assert job.base_headroom(str(base), args) == got  # the same weights, wherever they were played from
    assert "does not record" not in capsys.readouterr().out
    with pytest.raises(SystemExit, match="model_weights: sha256:"):
        job.base_headroom(str(other), args)
    # the study passes the fingerprint it already took of --base; that one is checked, the folder not hashed again
    assert job.base_headroom(str(tmp_path / "gone"), args, weights_fingerprint(str(base))) == got
    with pytest.raises(SystemExit, match="model_weights: sha256:"):
        job.base_headroom(str(base), args, weights_fingerprint(str(other)))


def test_learning_keeps_one_compute_dtype_per_output_folder(tmp_path):
    """Runs are cached by variant and seed: a bf16 study must not read (or mix with) a folder's fp32 runs."""
    cache = run_cache
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    cache.check_dtype(str(fresh), "bfloat16")
    assert (fresh / "dtype").read_text().strip() == "bfloat16"
    cache.check_dtype(str(fresh), "bfloat16")
    with pytest.raises(SystemExit, match="--dtype float32:.*holds bfloat16 runs"):
        cache.check_dtype(str(fresh), "float32")
    old = tmp_path / "old"  # a study folder from before --dtype: its runs are float32
    (old / "runs").mkdir(parents=True)
    with pytest.raises(SystemExit, match="--dtype bfloat16:.*holds float32 runs"):
        cache.check_dtype(str(old), "bfloat16")
    cache.check_dtype(str(old), "float32")
    assert (old / "dtype").read_text().strip() == "float32"


def test_learning_keeps_one_set_of_study_settings_per_output_folder(tmp_path):
    """Runs are cached by variant and seed: a study resumed later must not mix in runs made at another learning
    rate, budget or env (OUT/settings.json); a folder from before the record takes the next call's settings."""
    cache = run_cache
    study = {"lr": 3e-5, "iters": 6, "env_config": {"expert": "sweep"}}
    cache.check_settings(str(tmp_path), study)
    cache.check_settings(str(tmp_path), dict(study))  # the same study resumes
    for key, other in (("lr", 1e-5), ("iters", 18), ("env_config", {"expert": "handcoded"})):
        with pytest.raises(SystemExit, match=f"{key}: .* there, .* here"):
            cache.check_settings(str(tmp_path), dict(study, **{key: other}))
    cache.check_settings(str(tmp_path), dict(study, eval_episodes=None))  # a setting the record lacks: added
    assert json.loads((tmp_path / "settings.json").read_text()) == dict(study, eval_episodes=None)


def test_learning_shards_take_the_next_unclaimed_job(tmp_path):
    """`studies/learning.py --shard i/n`: a job another live process has claimed is skipped, the claim of a process
    that is gone (a crashed shard) is taken over, and a finished job leaves no claim behind."""
    import os
    import subprocess
    import sys

    cache = run_cache
    job = str(tmp_path / "runs" / "grpo-s0.json")
    assert cache.claim(job) and not cache.claim(job)  # ours now: a second taker (any process) is refused
    cache.release(job)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "runs" / "grpo-s0.json.claim").write_text(f"{holder.pid}\n")
        assert not cache.claim(job)  # a live shard holds it
    finally:
        holder.kill()
        holder.wait()
    assert cache.claim(job)  # its holder is gone: taken over
    assert (tmp_path / "runs" / "grpo-s0.json.claim").read_text().strip() == str(os.getpid())
    cache.release(job)
    assert not (tmp_path / "runs" / "grpo-s0.json.claim").exists()

    # the shard loop: finished jobs are read, a job a live shard holds is left to it (training it here would fail:
    # the base is not a model)
    out = tmp_path / "study"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "base-s0.json").write_text(json.dumps({"success_pct": {"All": 2.0}}))
    (out / "runs" / "grpo-s0.json").write_text(json.dumps(
        {"variant": "grpo", "seed": 0, "iters": [{"train_success": 0.1}], "table": {"success_pct": {"All": 1.0}},
         "train_s": 1.0, "eval_s": 1.0}))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / "runs" / "opid-s0.json.claim").write_text(f"{holder.pid}\n")
        argv = ["--base", str(tmp_path / "no-model"), "--variants", "grpo,opid", "--seeds", "0", "--out", str(out),
                "--torch-threads", "0"]
        assert learning.main(argv + ["--shard", "0/2"]) == 0
    finally:
        holder.kill()
        holder.wait()
    assert not (out / "runs" / "opid-s0.json").exists() and (out / "runs" / "opid-s0.json.claim").exists()
    # the folder now records the study's settings: the same study resumes, another learning rate is refused
    assert json.loads((out / "settings.json").read_text())["lr"] == 1e-4
    with pytest.raises(SystemExit, match=r"lr: 0.0001 there, 3e-05 here.*give another --out"):
        learning.main(argv + ["--lr", "3e-5", "--shard", "0/2"])
    # the warm start is recorded by content: another base is refused, whatever its path
    assert json.loads((out / "settings.json").read_text())["base_weights"] == f"name:{tmp_path / 'no-model'}"
    other = argv[:]
    other[1] = str(tmp_path / "other-model")
    with pytest.raises(SystemExit, match=r"base_weights: .*no-model.* there, .*other-model.* here"):
        learning.main(other + ["--shard", "0/2"])


def test_another_base_is_refused_naming_the_machine_each_was_built_on(tmp_path):
    """studies/run_cache.check_base: the folder records the machine of its base (opid-sft's sft_stats.json) beside
    its weights on first use; another base is refused with both machines named, the same weights from a machine
    recorded otherwise are not, and a base without a record (an older folder) says so."""
    out, a, b, old = tmp_path / "study", tmp_path / "a", tmp_path / "b", tmp_path / "old"
    for d, cpu in ((a, "AMD EPYC 9R14"), (b, "Intel(R) Xeon(R) Processor")):
        d.mkdir()
        (d / "sft_stats.json").write_text(json.dumps({"machine": {
            "cpu_model": cpu, "bf16_flags": ["avx512_bf16"], "torch_cpu_capability": "AVX512",
            "onednn_max_cpu_isa": None if d == a else "AVX512_CORE_BF16"}}))
    out.mkdir()
    run_cache.check_base(str(out), str(a), "sha256:aaaa")
    settings = json.loads((out / "settings.json").read_text())
    assert settings["base_weights"] == "sha256:aaaa" and settings["base_machine"]["cpu_model"] == "AMD EPYC 9R14"
    run_cache.check_base(str(out), str(b), "sha256:aaaa")  # same weights: fine, and the first record stays
    assert json.loads((out / "settings.json").read_text())["base_machine"]["cpu_model"] == "AMD EPYC 9R14"
    with pytest.raises(SystemExit, match=r"base_weights: 'sha256:aaaa' there, 'sha256:bbbb' here.*another kind of "
                       r"CPU.*built on Intel\(R\) Xeon.*ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16.*folder's on AMD EPYC"):
        run_cache.check_base(str(out), str(b), "sha256:bbbb")
    with pytest.raises(SystemExit, match=r"this base was built on a machine it did not record"):
        run_cache.check_base(str(out), str(old), "sha256:cccc")


def test_a_warm_start_is_known_by_its_weights_not_its_path(tmp_path):
    """A study resumed on a fresh machine names a rebuilt warm start: it is the same base exactly where its weight
    files are (same names, same bytes), wherever the folder lies."""
    from opid_rllib.models.fingerprint import weights_fingerprint

    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    for d in (a, b):
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"\x00weights" * 1000)
        (d / "config.json").write_text("{}")
    assert weights_fingerprint(str(a)) == weights_fingerprint(str(b))
    assert weights_fingerprint(str(a)).startswith("sha256:")
    (b / "config.json").write_text('{"note": "configs are not weights"}')
    assert weights_fingerprint(str(a)) == weights_fingerprint(str(b))
    (b / "model.safetensors").write_bytes(b"\x01weights" * 1000)  # one byte differs
    assert weights_fingerprint(str(a)) != weights_fingerprint(str(b))
    (b / "model.safetensors").rename(b / "pytorch_model.bin")  # same bytes as a's, other file name
    (b / "pytorch_model.bin").write_bytes(b"\x00weights" * 1000)
    assert weights_fingerprint(str(a)) != weights_fingerprint(str(b))
    assert weights_fingerprint("HuggingFaceTB/SmolLM2-135M") == "name:HuggingFaceTB/SmolLM2-135M"


def test_learning_trains_the_runs_before_the_base_plays(tmp_path, monkeypatch):
    """A study a session's end cuts short has its training runs, the part it measures, before the base's plays;
    the report still pairs each table with its own job. The jobs are stood in (each takes an hour on SmolLM2)."""
    done = []
    cols = ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "Avg", "All")

    def table(x):
        return {"columns": list(cols), "success_pct": dict.fromkeys(cols, x), "episodes": 12}

    def train(base, spec, seed, args):
        done.append(f"{spec}-s{seed}")
        return {"variant": spec, "seed": seed, "iters": [{"train_success": 0.5, "seconds": 1.0}], "train_s": 1.0,
                "eval_s": 1.0, "table": table(10.0 * (seed + 1) + (5 if spec == "opid" else 0))}

    def play(base, seed, args, chunks=None):
        done.append(f"base-s{seed}")
        assert chunks == str(out / "runs" / f"base-s{seed}" / "play_chunks.jsonl")  # a folder: git ignores it
        return table(float(seed))

    monkeypatch.setattr(learning, "train_and_eval", train)
    monkeypatch.setattr(learning, "evaluate_policy", play)
    out = tmp_path / "study"
    assert learning.main(["--base", str(tmp_path / "no-model"), "--variants", "grpo,opid", "--seeds", "0,1",
                          "--out", str(out), "--torch-threads", "0", "--results", str(tmp_path / "r.json")]) == 0
    assert done == ["grpo-s0", "opid-s0", "grpo-s1", "opid-s1", "base-s0", "base-s1"]
    got = json.loads((tmp_path / "r.json").read_text())
    assert got["per_seed"]["base (no RL)"] == {"0": table(0.0)["success_pct"], "1": table(1.0)["success_pct"]}
    assert got["per_seed"]["opid"]["1"]["All"] == 25.0 and got["summary"]["opid_minus_grpo_all"] == 5.0


def test_learning_with_no_variants_plays_the_base_alone(tmp_path, monkeypatch, capsys):
    """`--variants ''` (studies/smollm2_study.sh ARMS=base): the base's plays on --seeds, each cached as a study's
    base job, and nothing trained, nor the oracle headroom panel (about 67 min on SmolLM2) played."""
    played = []

    def never(*a, **k):
        raise AssertionError("a base-only study trained or played the headroom panel")

    def play(base, seed, args, chunks=None):
        played.append(seed)
        return {"columns": ["All"], "success_pct": {"All": 5.0 * seed}, "won_by_task": {"g": bool(seed)}}

    monkeypatch.setattr(learning, "train_and_eval", never)
    monkeypatch.setattr(learning, "base_headroom", never)
    monkeypatch.setattr(learning, "evaluate_policy", play)
    out = tmp_path / "study"
    argv = ["--base", str(tmp_path / "no-model"), "--variants", "", "--seeds", "0,1", "--out", str(out),
            "--torch-threads", "0", "--headroom-panel", "alfworld/valid_unseen@v1"]
    assert learning.main(argv) == 0 and played == [0, 1]
    assert json.loads((out / "runs" / "base-s1.json").read_text())["won_by_task"] == {"g": True}
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == ["base-s0.json", "base-s1.json"]
    assert "base seed 1 on alfworld/valid_unseen@v1: All 5.0 %" in capsys.readouterr().out
    assert learning.main(argv) == 0 and played == [0, 1]  # cached: read, not played again


def test_the_learners_micro_batch_is_a_study_setting(tmp_path):
    """--micro-batch-size reaches the OPIDConfig every arm trains with (the SmolLM2 study's 4 rows keep its learner
    inside 24 GB); left out, the tiny preset's stays (micro-batches change memory, not the gradient)."""
    import argparse

    from opid_rllib.presets import CPU_TINY

    job = study_job
    args = argparse.Namespace(max_steps=15, history_length=2, tasks_per_iter=4, group_size=4, max_prompt_len=2048,
                              max_new_tokens=32, lr=3e-5, minibatch_size=32, dtype="float32", micro_batch_size=4,
                              env_config={"expert": "sweep"})
    cfg = job.study_config("tiny", "grpo", 0, args, str(tmp_path))
    assert (cfg.micro_batch_size, cfg.minibatch_size, cfg.lr) == (4, 32, 3e-5)
    args.micro_batch_size = None
    assert job.study_config("tiny", "grpo", 0, args, str(tmp_path)).micro_batch_size == CPU_TINY["micro_batch_size"]


def test_learning_reports_the_cached_jobs_only_and_names_the_others(tmp_path, monkeypatch, capsys):
    """`--cached-only`: a study that takes several sittings is reported after each from what has finished (here
    GRPO on seeds 0-1, OPID on seed 0), training and playing nothing, pairing each seed with its own base play."""
    cols = ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "Avg", "All")

    def table(x):
        return {"columns": list(cols), "success_pct": dict.fromkeys(cols, x), "episodes": 12}

    def never(*a, **k):
        raise AssertionError("--cached-only trained or played")

    monkeypatch.setattr(learning, "train_and_eval", never)
    monkeypatch.setattr(learning, "evaluate_policy", never)
    out = tmp_path / "study"
    argv = ["--base", str(tmp_path / "no-model"), "--variants", "grpo,opid", "--seeds", "0,1,2", "--out", str(out),
            "--torch-threads", "0", "--results", str(tmp_path / "r.json"), "--cached-only"]
    with pytest.raises(SystemExit, match="--cached-only: .* no base play or no run"):
        learning.main(argv)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for name, x in (("grpo-s0", 10.0), ("opid-s0", 16.0), ("grpo-s1", 12.0)):
        v, s = name.split("-s")
        (out / "runs" / f"{name}.json").write_text(json.dumps(
            {"variant": v, "seed": int(s), "iters": [{"train_success": 0.5, "seconds": 1.0}], "train_s": 1.0,
             "eval_s": 1.0, "table": table(x)}))
    for s in (0, 1):
        (out / "runs" / f"base-s{s}.json").write_text(json.dumps(table(11.0 + s)))
    assert learning.main(argv) == 0
    said = capsys.readouterr().out
    assert "not run yet, left out: opid-s1, grpo-s2, opid-s2, base-s2" in said
    got = json.loads((tmp_path / "r.json").read_text())
    assert got["seeds"] == [0, 1] and set(got["per_seed"]["opid"]) == {"0"}
    assert got["per_seed"]["base (no RL)"] == {"0": table(11.0)["success_pct"], "1": table(12.0)["success_pct"]}
    assert got["per_seed"]["grpo"]["1"]["All"] == 12.0 and got["summary"]["opid_minus_grpo_all"] == 6.0
    study = json.loads((out / "learning.json").read_text())
    assert study["base_seeds"] == [0, 1] and study["base_tables"] == [table(11.0), table(12.0)]
    assert study["summary"] == got["summary"]  # the study's own folder holds it too, without --results
    # nor does it play the base's oracle panel (about 67 min on SmolLM2) where no play of it is there to read
    monkeypatch.setattr(learning, "base_headroom", never)
    assert learning.main(argv + ["--headroom-panel", "alfworld/valid_unseen@v1"]) == 0
    assert "teacher diagnostics" not in capsys.readouterr().out
    # the warm start is not on this machine (the folder was made from weights recorded by content): a report still
    # reads the runs and says it cannot check their weights; a call that would train is refused as before
    settings = json.loads((out / "settings.json").read_text())
    assert "base_weights" not in settings
    (out / "settings.json").write_text(json.dumps({**settings, "base_weights": "sha256:" + "0" * 64}))
    assert learning.main(argv) == 0
    assert "reported without checking the warm start" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="other settings"):
        learning.main([a for a in argv if a != "--cached-only"])
    # nor does a report build the tiny model's warm start
    import opid_rllib.sft.demos
    import opid_rllib.sft.train

    monkeypatch.setattr(opid_rllib.sft.demos, "collect_demonstrations", never)
    monkeypatch.setattr(opid_rllib.sft.train, "train_sft", never)
    tiny = ["--base", "tiny", "--variants", "grpo", "--seeds", "0", "--out", str(tmp_path / "t"), "--cached-only"]
    with pytest.raises(SystemExit, match="--cached-only: .* no base play or no run"):
        learning.main(tiny + ["--torch-threads", "0"])


def test_learning_compares_arms_game_by_game_with_a_sign_test(monkeypatch):
    """Two arms that played the panel with the same seed are compared game by game: games only one of them won,
    and the exact sign test on those; a run cached before games were recorded is left out, not read as lost, unless
    one of the two plays won nothing."""
    report = learning_report
    assert report.sign_test_p(8, 0) == pytest.approx(2 / 256) and report.sign_test_p(0, 8) == pytest.approx(2 / 256)
    assert report.sign_test_p(5, 1) == pytest.approx(2 * 7 / 64)
    assert report.sign_test_p(3, 3) == 1.0 and report.sign_test_p(0, 0) == 1.0
    games = [f"g{i}" for i in range(10)]

    def run(v, s, won):
        return {"variant": v, "seed": s, "table": {"success_pct": {"All": 10.0 * len(won)},
                                                   "won_by_task": {g: g in won for g in games}}}

    runs = [run("grpo", 0, {"g0", "g1"}), run("opid", 0, {"g1", "g2", "g3"}), run("grpo", 1, {"g4"}),
            run("opid", 1, {"g5", "g6", "g7"}), run("grpo", 2, set()),
            {"variant": "opid", "seed": 2, "table": {"success_pct": {"All": 0.0}}}]
    got = report.per_game(runs, "opid")
    assert got["0"] == {"only_variant": 2, "only_baseline": 1, "games": 10, "p_sign": 1.0}
    assert got["1"] == {"only_variant": 3, "only_baseline": 1, "games": 10, "p_sign": pytest.approx(10 / 16)}
    assert "2" not in got
    assert got["pooled"] == {"only_variant": 5, "only_baseline": 2, "games": 20, "p_sign": pytest.approx(58 / 128)}
    assert learning.summary(runs)["per_game_vs_grpo_by_variant"] == {"opid": got}
    assert "games only opid / only grpo won: seed 0 2 / 1 (sign test p 1); seed 1 3 / 1" in learning.paired_text(
        runs, "grpo")
    # a play that won no game differs from the other on exactly the games the other won, so plays cached before
    # `won_by_task` pair with it by their counts; other such pairs cannot be told apart

    def bare(v, s, won, n=10):
        return {"variant": v, "seed": s, "table": {"n": {"All": n}, "success_pct": {"All": 100 * won / n}}}

    assert report.per_game([bare("grpo", 0, 3), run("opid", 0, set())], "opid")["0"] == {
        "only_variant": 0, "only_baseline": 3, "games": 10, "p_sign": pytest.approx(2 / 8)}
    assert report.per_game([bare("grpo", 0, 0), bare("opid", 0, 2)], "opid")["0"]["only_variant"] == 2
    assert report.per_game([bare("grpo", 0, 3), run("opid", 0, {"g1"})], "opid") == {}
    assert report.per_game([bare("grpo", 0, 3, n=12), run("opid", 0, set())], "opid") == {}  # another panel size
    # the play keeps which game each episode was
    cols = ["All"]
    job = study_job
    monkeypatch.setattr(job, "_play_panel", lambda path, args, **kw: {
        "table": {"columns": cols, "success_pct": {"All": 50.0}},
        "episodes": [{"task_id": "a", "won": True}, {"task_id": "b", "won": False}]})
    import argparse

    table = job.evaluate_policy("m", 1, argparse.Namespace(eval_panel="p", eval_episodes=None))
    assert table == {"columns": cols, "success_pct": {"All": 50.0}, "won_by_task": {"a": True, "b": False}}
