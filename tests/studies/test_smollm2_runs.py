"""studies/smollm2_runs.py: every finished job of the SmolLM2 studies, and the README's copy of that table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies import comparisons, smollm2_runs

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"dtype": "float32", "base_weights": "sha256:40f8787d9adef6a5", "lr": 1e-5, "group_size": 4,
            "tasks_per_iter": 4}


def _table(won: list[bool]) -> dict:
    games = {f"g{i}": w for i, w in enumerate(won)}
    return {"n": {"All": len(won)}, "success_pct": {"All": round(100 * sum(won) / len(won), 2)}, "won_by_task": games,
            "expert_agreement_pct": 31.25}


def _job(variant: str, seed: int, won: list[bool], train_success: list[float]) -> dict:
    return {"variant": variant, "seed": seed, "iters": [{"train_success": x} for x in train_success],
            "train_s": 1234.5, "eval_s": 99.4, "table": _table(won)}


def test_rows_pair_each_job_with_grpo_of_its_seed_and_count_games_and_training_wins(tmp_path, capsys):
    runs = smollm2_runs
    study = tmp_path / "smollm2_study_x"
    (study / "runs" / "grpo-s0").mkdir(parents=True)  # a run folder: not a job
    (study / "settings.json").write_text(json.dumps(SETTINGS))
    t_arm = "opid:" + comparisons.T_SETTINGS
    grpo0 = [True, True, False, False, False, False, False, False]
    t0 = [True, False, True, True, True, False, False, False]  # only T: 3 games, only GRPO: 1
    files = {"grpo-s0": _job("grpo", 0, grpo0, [0.0625, 0.0, 0.125]),
             "T-s0": _job(t_arm, 0, t0, [0.0625, 0.0625, 0.0]),  # with agreement by the planned command's verb
             "T-s1": _job(t_arm, 1, grpo0, [0.0, 0.0, 0.0]),  # no GRPO job of seed 1 yet: unpaired
             "base-s0": _table(t0), "base-headroom": {"table": _table(t0), "teacher_table": _table(t0)}}
    files["T-s0"]["table"]["expert_agreement_by_kind"] = {"go to": {"pct": 20.0, "steps": 40},
                                                          "take": {"pct": 12.5, "steps": 8}}
    for name, rec in files.items():
        (study / "runs" / f"{name}.json").write_text(json.dumps(rec))
    rows = runs.rows_of(study)
    assert [(r["arm"], r["seed"]) for r in rows] == [("base (no RL)", 0), ("grpo", 0), ("T", 0), ("T", 1)]
    base, grpo, t, t1 = rows
    assert (t["won"], t["minus"], t["games"]) == (4, 25.0, (3, 1, 0.625))  # sign test: 2 * 5/16
    assert grpo["minus"] is None and grpo["games"] is None
    assert (grpo["train_wins"], t["train_wins"]) == ((3, 48), (2, 48))  # shares of 16 episodes per iteration
    assert base["train_wins"] is None and base["games"] == (3, 1, 0.625) and t1["minus"] is None
    assert runs.main([str(study)]) == 0
    out = capsys.readouterr().out
    assert ("| smollm2_study_x | float32 40f8787d | 1e-05 | T | 0 | 50.0 (4 / 8) | +25.0 | 3 / 1 (0.62) | 31.2 | "
            "12.5 (8) | 2 / 48 | 1,234 | 99 |") in out
    assert "| smollm2_study_x | float32 40f8787d | 1e-05 | T | 1 | 25.0 (2 / 8) | - | - | 31.2 | - | 0 / 48 |" in out


def test_the_results_doc_holds_the_table_the_script_prints_from_the_repos_studies(capsys):
    """Commit a finished job's runs/*.json and the README's table must be pasted again."""
    assert smollm2_runs.main([]) == 0
    table = capsys.readouterr().out.strip()
    assert table.count("\n") >= 8, table  # the bf16 studies' jobs alone fill eight rows
    readme = "\n".join(line.strip() for line in (REPO / "docs" / "RESULTS.md").read_text().splitlines())  # list indent
    assert table in readme, "docs/RESULTS.md's SmolLM2 table stale: paste `python -m studies.smollm2_runs` (indented 2 spaces)"


def test_bases_sets_one_seeds_base_plays_side_by_side_across_warm_starts(tmp_path, capsys):
    """`--bases`: a warm start rebuilt on another CPU (other weights, same play settings) against the study's own
    base, game by game per seed; studies whose plays were set up otherwise, or share one base, are not paired."""
    runs = smollm2_runs
    play = {"eval_panel": "alfworld/valid_unseen@v1", "eval_temperature": 0.4, "batch_envs": 16, "dtype": "bfloat16"}
    a_won = [True, True, True, False, False, False, False, False]
    b_won = [True, False, False, True, False, False, False, False]  # only a: 2 games, only b: 1, alike: 5
    studies = {"s_epyc": ("sha256:60f234c8aa", play, {0: a_won, 1: a_won}),
               "s_amx": ("sha256:08f2a789bb", play, {0: b_won}),
               "s_other_play": ("sha256:08f2a789cc", {**play, "eval_temperature": 0.7}, {0: b_won}),
               "s_same_base": ("sha256:60f234c8aa", play, {0: b_won})}
    for name, (weights, settings, bases) in studies.items():
        (tmp_path / name / "runs").mkdir(parents=True)
        (tmp_path / name / "settings.json").write_text(json.dumps({**SETTINGS, **settings, "base_weights": weights}))
        for seed, won in bases.items():
            (tmp_path / name / "runs" / f"base-s{seed}.json").write_text(json.dumps(_table(won)))
    pairs = runs.base_pairs([tmp_path / n for n in studies])
    assert [(p["seed"], p["first"], p["second"]) for p in pairs] == [
        (0, "s_epyc bfloat16 60f234c8", "s_amx bfloat16 08f2a789"),
        (0, "s_amx bfloat16 08f2a789", "s_same_base bfloat16 60f234c8")]
    assert pairs[0]["won"] == (3, 2) and pairs[0]["games"] == (2, 1, 1.0, 8)
    assert runs.main(["--bases", str(tmp_path / "s_epyc"), str(tmp_path / "s_amx")]) == 0
    assert ("seed 0: s_epyc bfloat16 60f234c8 won 3 / 8, s_amx bfloat16 08f2a789 won 2 / 8; games only first / only "
            "second: 2 / 1 (p 1), the other 5 of 8 alike") in capsys.readouterr().out
    assert runs.main(["--bases", str(tmp_path / "s_epyc"), str(tmp_path / "s_same_base")]) == 0
    assert "no seed has base plays in two studies" in capsys.readouterr().out


def test_baseline_base_sets_each_job_against_its_seeds_base_play(tmp_path, capsys):
    """`--baseline base`: each arm against the base's play of its seed (where the job started), not GRPO's; the
    base's own row and a seed without a base play stay unpaired."""
    runs = smollm2_runs
    study = tmp_path / "smollm2_study_y"
    (study / "runs").mkdir(parents=True)
    (study / "settings.json").write_text(json.dumps(SETTINGS))
    t_arm = "opid:" + comparisons.T_SETTINGS
    base0 = [True, True, True, True, True, False, False, False]
    t0 = [True, False, False, False, False, False, True, False]  # only T: 1 game, only the base: 4
    files = {"base-s0": _table(base0), "grpo-s0": _job("grpo", 0, base0, [0.0]), "T-s0": _job(t_arm, 0, t0, [0.0]),
             "T-s1": _job(t_arm, 1, t0, [0.0])}
    for name, rec in files.items():
        (study / "runs" / f"{name}.json").write_text(json.dumps(rec))
    base, grpo, t, t1 = runs.rows_of(study, runs.BASE)
    assert base["minus"] is None and base["games"] is None and t1["games"] is None
    assert (grpo["minus"], grpo["games"]) == (0.0, (0, 0, 1.0))
    assert (t["minus"], t["games"]) == (-37.5, (1, 4, 0.375))  # sign test: 2 * 6/32
    assert runs.main(["--baseline", "base", str(study)]) == 0
    out = capsys.readouterr().out
    assert "| minus base | games only arm / only base (p) |" in out
    assert "| smollm2_study_y | float32 40f8787d | 1e-05 | T | 0 | 25.0 (2 / 8) | -37.5 | 1 / 4 (0.38) |" in out


def test_pooled_sums_each_arms_pairs_across_studies_of_one_dtype_and_lr(tmp_path, capsys):
    """`--pooled`: T's gaps to GRPO over studies and seeds of one dtype and lr, their mean, and the games only T /
    only GRPO won summed over the pairs whose games are told apart (a pair cached without per-game records counts in
    the mean, unless one of its two plays won nothing: then its discordant games are the other play's wins)."""
    runs = smollm2_runs
    t_arm = "opid:" + comparisons.T_SETTINGS
    grpo = [True, True, True, False, False, False, False, False]
    t_a = [True, False, False, False, False, False, False, False]  # only GRPO: 2
    t_b = [True, True, True, True, True, False, False, False]  # only T: 2
    t_c = [False] * 8  # only GRPO: 3
    studies = {"s_a": ("bfloat16", {0: (grpo, t_a), 1: (grpo, t_b)}), "s_b": ("bfloat16", {0: (grpo, t_a)}),
               "s_c": ("bfloat16", {0: (grpo, t_c)}), "s_f32": ("float32", {0: (grpo, t_b)})}
    for name, (dtype, seeds) in studies.items():
        (tmp_path / name / "runs").mkdir(parents=True)
        (tmp_path / name / "settings.json").write_text(json.dumps({**SETTINGS, "dtype": dtype}))
        for seed, (g, t) in seeds.items():
            (tmp_path / name / "runs" / f"grpo-s{seed}.json").write_text(json.dumps(_job("grpo", seed, g, [0.0])))
            (tmp_path / name / "runs" / f"T-s{seed}.json").write_text(json.dumps(_job(t_arm, seed, t, [0.0])))
    for name in ("s_b", "s_c"):  # cached before per-game records
        old = json.loads((tmp_path / name / "runs" / "T-s0.json").read_text())
        del old["table"]["won_by_task"]
        (tmp_path / name / "runs" / "T-s0.json").write_text(json.dumps(old))
    groups = runs.pooled([r for n in studies for r in runs.rows_of(tmp_path / n)])
    assert [(g["arm"], g["dtype"], len(g["pairs"])) for g in groups] == [("T", "bfloat16", 4), ("T", "float32", 1)]
    bf16 = groups[0]
    assert bf16["mean"] == (-25.0 + 25.0 - 25.0 - 37.5) / 4
    # s_a's two seeds and s_c's (T won nothing: the 3 GRPO won); s_b's T won 1 of the 3 or not: not told apart
    assert bf16["games"] == (2, 5, pytest.approx(58 / 128), 3)
    assert runs.main(["--pooled", *(str(tmp_path / n) for n in studies)]) == 0
    out = capsys.readouterr().out
    assert ("T - GRPO, bfloat16 lr 1e-05: mean -15.6 over 4 pairs (s_a s0 -25.0 (0 / 2), s_a s1 +25.0 (2 / 0), "
            "s_b s0 -25.0 (games not told apart), s_c s0 -37.5 (0 / 3)); games only T / only GRPO, summed over the 3 "
            "told apart: 2 / 5 (p 0.45)") in out
    assert "T - GRPO, float32 lr 1e-05: mean +25.0 over 1 pairs" in out
