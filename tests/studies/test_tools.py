"""The studies' helpers: studies/learning.py's plots (its other rules: test_learning.py); studies/take_errors.py,
studies/repeats.py, studies/onednn_isa.py, studies/selection_vs_unseen.py and studies/eval_agreement.py."""

from __future__ import annotations

import json

import pytest

from studies import eval_agreement, learning, learning_report, onednn_isa, repeats, selection_vs_unseen, take_errors


def test_std_bands_stay_inside_the_valid_range(tmp_path):
    """Success-rate bands (mean +- std over seeds) never leave [0, 100] %: neither the pure helper nor
    the bands and error bars studies/learning.py draws into learning.png."""
    pytest.importorskip("matplotlib")
    import numpy as np
    from matplotlib.collections import LineCollection, PolyCollection

    from opid_rllib.report.plots import clip_band, clipped_yerr

    lo, hi = clip_band([2.0, 50.0, 97.0], [5.0, 5.0, 5.0])
    assert lo.tolist() == [0.0, 45.0, 92.0] and hi.tolist() == [7.0, 55.0, 100.0]
    assert clipped_yerr([2.0], [5.0]).tolist() == [[2.0], [5.0]]
    runs = [{"variant": "grpo", "seed": s, "iters": [{"train_success": v} for v in curve],
             "table": {"success_pct": {"All": all_}}}
            for s, (curve, all_) in enumerate([([0.0, 0.0, 1.0], 0.0), ([0.0, 0.0, 1.0], 0.0), ([0.6, 0.0, 0.4], 9.0)])]
    base = [{"success_pct": {"All": v}} for v in (0.0, 0.0, 6.0)]  # 3 seeds: mean - std < 0 unclipped
    fig = learning.plot(runs, base, str(tmp_path / "learning.png"))
    assert (tmp_path / "learning.png").stat().st_size > 0
    ax1, ax2 = fig.axes
    band = [c for c in ax1.collections if isinstance(c, PolyCollection)]
    assert band, "no std band drawn"
    ys = np.concatenate([p.vertices[:, 1] for c in band for p in c.get_paths()])
    assert ys.min() >= 0.0 and ys.max() <= 100.0, (ys.min(), ys.max())
    bars = np.concatenate([np.asarray(seg)[:, 1] for c in ax2.collections if isinstance(c, LineCollection)
                           for seg in c.get_segments()])
    assert bars.size and bars.min() >= 0.0, bars.min()


def test_long_variant_names_get_short_plot_labels_spelled_out_below(tmp_path):
    """A study's variant strings run to 100+ characters: the plot labels them by letter and preset and
    spells each one out under the figure (the tick labels overlapped into one smear before)."""
    pytest.importorskip("matplotlib")
    report = learning_report
    long_v = "opid:w_ep=0.3+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true"
    short = report.short_labels(["grpo", "opid", long_v, long_v + "+shuffle_skills=true", "no_step_skill:w_ep=1"])
    assert list(short.values()) == ["grpo", "opid", "C opid", "D opid", "E no_step_skill"]
    runs = [{"variant": v, "seed": s, "iters": [{"train_success": 0.0}], "table": {"success_pct": {"All": 1.0}}}
            for v, s in (("grpo", 0), ("grpo", 1), (long_v, 0))]
    fig = report.plot(runs, [{"success_pct": {"All": 0.0}}] * 2, str(tmp_path / "learning.png"))
    ax1, ax2 = fig.axes
    # each bar names its seed count: an arm still being filled in must not read as a full one
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["base\n(2 seeds)", "grpo\n(2 seeds)", "B opid\n(1 seed)"]
    assert [t.get_text() for t in ax1.get_legend().get_texts()] == ["grpo", "B opid"]
    assert [t.get_text() for t in fig.texts] == [f"B = {long_v}"]


def test_take_errors_split_what_the_policy_did_where_the_expert_takes(tmp_path):
    """studies/take_errors.py: at steps whose expert_next is a take, the policy's command is the same, a take
    of the same object class, of another class, or another command; other steps are not counted."""
    te = take_errors
    take = "take book 1 from bed 1"
    ep = {"actions": [take, "take book 2 from bed 1", "take pen 1 from bed 1", "go to desk 1", "go to bed 1"],
          "expert_next": [take, take, take, take, "go to desk 1"]}
    assert te.take_outcomes([ep]) == {"take_states": 4, "same": 1, "same_class": 1, "other_class": 1,
                                      "other_kind": 1}
    (tmp_path / "episodes.jsonl").write_text(json.dumps(ep) + "\n")
    assert te.main([str(tmp_path), "--json", str(tmp_path / "t.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text()) == {"student": te.take_outcomes([ep])}


def test_repeats_count_commands_equal_to_the_step_before(tmp_path):
    """studies/repeats.py: a step repeats when its command equals the previous one (whitespace aside); an episode
    counts when it holds 3 equal commands in a row; the teacher's file is read when opid-eval wrote one."""
    rp = repeats
    loop = {"actions": ["go to drawer 1", "go to  drawer 1", "go to drawer 1", "open drawer 1", "open drawer 1"]}
    fine = {"actions": ["go to desk 1", "take pen 1 from desk 1", "go to desk 1", "go to shelf 1"]}
    got = rp.repeat_stats([loop, fine])
    assert (got["steps"], got["repeat_steps"], got["repeat_step_pct"]) == (9, 3, 33.3)
    assert got["episodes_with_run_pct"] == 50.0 and got["repeats_by_kind"] == {"go to": 2, "open": 1}
    assert rp.repeat_stats([{"actions": []}])["repeat_step_pct"] == 0.0
    (tmp_path / "episodes.jsonl").write_text(json.dumps(loop) + "\n")
    (tmp_path / "teacher_episodes.jsonl").write_text(json.dumps(fine) + "\n")
    assert rp.main([str(tmp_path), "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text()) == {"student": rp.repeat_stats([loop]),
                                                             "teacher": rp.repeat_stats([fine])}
    with pytest.raises(SystemExit, match="no episodes.jsonl"):
        rp.main([str(tmp_path / "empty")])
    # a study run folder: the last play its chunk file holds (an older play's key is left out)
    run = tmp_path / "run"
    run.mkdir()
    chunk = {"key": "new", "chunk": 1, "task_ids": ["b"], "records": [fine]}
    lines = [{"key": "old", "chunk": 0, "task_ids": ["a"], "records": [fine]},
             dict(chunk, chunk=0, records=[loop]), chunk]
    (run / "play_chunks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert rp.main([str(run), "--json", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text()) == {"student": rp.repeat_stats([loop, fine])}


def test_onednn_isa_probe_reports_kernels_and_bits_per_cap(tmp_path, capsys):
    """studies/onednn_isa.py: each cap runs in its own process, and the same cap twice gives the same bits (the
    probe itself is deterministic, so a difference between caps is the kernels'); where the CPU has AVX-512,
    oneDNN names a matmul kernel, and capping it at AVX2 names another one."""
    from opid_rllib.hardware import cpu_flags
    out = tmp_path / "isa.json"
    assert onednn_isa.main(["--caps", "default,default,AVX2", "--threads", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["cap"] for r in rows] == ["default", "default", "AVX2"] and rows[0]["bits"] == rows[1]["bits"]
    assert all(len(r["bits"]) == 16 and r["seconds"] > 0 for r in rows)
    if "avx512bw" in (cpu_flags() or ()):
        assert rows[0]["kernels"] and rows[0]["kernels"] == rows[1]["kernels"] != rows[2]["kernels"]
    assert "same as default" in capsys.readouterr().out


def test_selection_vs_unseen_pairs_each_points_repeats_on_both_panels(tmp_path, capsys):
    """studies/selection_vs_unseen.py: a point's selection and main-panel scores are the means over its seeds, points
    in the sweep's order (best selection score first), the selected one marked; a trial without a policy is left
    out; a sweep that had no selection play is refused in one line."""
    import pytest

    mod = selection_vs_unseen
    w = lambda a, b: {"episode_skill_adv_weight": a, "step_skill_adv_weight": b}  # noqa: E731
    trials = [{"path": f"t{i}", "params": dict(w(*p), seed=s), "history": [h]}
              for i, (p, s, h) in enumerate([((0.3, 0.3), 0, 16.7), ((0.3, 0.3), 1, 11.1),
                                             ((0.03, 0.03), 0, 11.1), ((0.03, 0.03), 1, 15.3), ((0.3, 0.03), 0, 9.7)])]
    sel = {"best": w(0.3, 0.3), "trials": trials}
    rows = mod.pair_points(sel, {"t0": 2.4, "t1": 4.0, "t2": 8.7, "t3": 5.6})  # t4: no policy, no main score
    assert [r["params"] for r in rows] == [w(0.3, 0.3), w(0.03, 0.03)]
    assert rows[0]["selection"] == [16.7, 11.1] and rows[0]["main"] == [2.4, 4.0] and rows[0]["selected"]
    assert round(rows[1]["selection_mean"], 6) == 13.2 and round(rows[1]["main_mean"], 6) == 7.15
    assert not rows[1]["selected"]
    (tmp_path / "sweep.json").write_text('{"metric": "m", "trials": [{"path": "t", "params": {}, "history": [1]}]}')
    with pytest.raises(SystemExit):
        mod.main([str(tmp_path)])
    assert "no selection play (run the sweep with --select-panel)" in capsys.readouterr().err
    (tmp_path / "t" / "selection_policy").mkdir(parents=True)  # exported, but its selection play then failed
    failed = {"metric": "m", "best": None, "trials": [{"path": str(tmp_path / "t"), "params": {"seed": 0},
                                                       "history": [], "selection": {"error": "OSError: x"}}]}
    (tmp_path / "sweep.json").write_text(json.dumps(failed))
    assert mod.main([str(tmp_path)]) == 0  # nothing to replay: no play, no row, no crash


def test_eval_agreement_rereads_opid_eval_folders_by_command_kind(tmp_path, capsys):
    """studies/eval_agreement.py: the student's and the teacher's episodes of an opid-eval folder, agreement with
    the expert's plan per command kind; a kind the teacher never planned shows as "-"; no such folder: exit 2."""
    student = {"task_type": "pick_and_place_simple", "won": False, "length": 3,
               "actions": ["go to desk 1", "take pen 1 from desk 1", "go to bed 1"], "format_valid": [True, False, True],
               "expert_next": ["go to desk 1", "take pen 1 from desk 1", "take pen 1 from desk 1"]}
    teacher = {"task_type": "pick_and_place_simple", "won": True, "length": 1, "actions": ["take cd 1 from bed 1"],
               "format_valid": [True], "expert_next": ["take cd 1 from bed 1"]}
    for name, rec in (("episodes.jsonl", student), ("teacher_episodes.jsonl", teacher)):
        (tmp_path / name).write_text(json.dumps(rec) + "\n")
    assert eval_agreement.main([str(tmp_path)]) == 0
    assert "student / teacher: take 0.0 / 100.0, go to 100.0 / -" in capsys.readouterr().out
    assert eval_agreement.main([str(tmp_path / "nope")]) == 2
