"""studies/comparisons.py: the ledger of every OPID-vs-GRPO arm in studies/results, and docs/RESULTS.md's copy of it."""

from __future__ import annotations

import json
from pathlib import Path
from studies import comparisons

REPO = Path(__file__).resolve().parents[2]


def _res(per_seed_all: dict, agree: dict | None = None, teacher: tuple | None = None, base="runs/x/stage5",
         panel="alfworld/valid_unseen@v1"):
    res = {"command": f"python -m studies.learning --base {base} --seeds 0,1", "eval_panel": panel,
           "per_seed": {v: {s: {"All": a} for s, a in by.items()} for v, by in per_seed_all.items()},
           "per_seed_agreement_pct": agree or {}}
    if teacher:
        res["teacher_diagnostics"] = {"student": {"All": teacher[0]}, "teacher": {"All": teacher[1]}}
    return res


def test_rows_pair_each_arm_with_grpo_on_the_same_seed_and_merge_rereports(tmp_path, capsys):
    cmp = comparisons
    T = "opid:" + cmp.T_SETTINGS
    a = _res({"grpo": {"0": 4.0, "1": 2.0}, T: {"0": 6.0, "1": 1.0}, "base (no RL)": {"0": 5.0, "1": 5.0}},
             agree={"grpo": {"0": 20.0, "1": 22.0}, T: {"0": 25.0, "1": 21.0}}, teacher=(4.76, 70.63))
    b = _res({"grpo": {"0": 4.0, "1": 2.0, "2": 9.0}, T: {"0": 6.0, "1": 1.0},  # seed 2: GRPO only, unpaired
              T + "+teacher_sample_sft_coeff=1": {"0": 2.0, "1": 2.0}, "opid": {"0": 3.0, "1": 3.0}})
    no_grpo = _res({T: {"0": 50.0}})
    for name, res in (("a.json", a), ("b.json", b), ("c.json", no_grpo)):
        (tmp_path / name).write_text(json.dumps(res))
    assert cmp.rows_of("c.json", no_grpo) == []
    rows = cmp.merge_repeats([r for n, res in (("a.json", a), ("b.json", b), ("c.json", no_grpo))
                              for r in cmp.rows_of(n, res)])
    t = rows[0]
    assert (t["file"], t["base"], t["headroom"], t["arm"]) == ("a.json, b.json", "x/stage5", "4.8 / 70.6", "T")
    assert t["per_seed"] == [2.0, -1.0] and t["minus_grpo"] == 0.5 and t["grpo_all"] == 3.0 and t["base_all"] == 5
    assert rows[1]["base_all"] is None  # b.json played no base
    assert t["agreement_minus_grpo"] == 2.0
    assert [r["arm"] for r in rows[1:]] == ["T+c_T=1", "opid (reference weights, 0.001 each)"]
    assert rows[1]["per_seed"] == [-2.0, 0.0] and rows[1]["agreement_minus_grpo"] is None
    assert cmp.main([str(tmp_path / n) for n in ("a.json", "b.json", "c.json")]) == 0
    out = capsys.readouterr().out
    assert "| a.json, b.json | x/stage5 | 4.8 / 70.6 | 5.0 | 3.0 | T | 3.5 | **+0.5** (+2.0, -1.0) | +2.0 |" in out
    assert "3 arms; best minus GRPO +0.5 (T, a.json, b.json)" in out
    # per-seed differences [2, -1], [-2, 0], [-1, 1]: squares about their means 4.5 + 2 + 2 over 3 df
    sd, df = cmp.seed_noise(rows)
    assert df == 3 and abs(sd - (8.5 / 3) ** 0.5) < 1e-9
    assert "pooled sd of 1.7 points (3 df), so a 3-seed mean difference has a standard error of 1.0 points" in out
    assert cmp.seed_noise([dict(t, per_seed=[1.0])]) is None  # one seed: no spread to measure
    longer = _res({"grpo": {"0": 4.0, "1": 2.0}, T: {"0": 6.0, "1": 1.0}})  # a's figures, 18 iterations
    longer["command"] += " --iters 18"
    assert [r["arm"] for r in cmp.merge_repeats(cmp.rows_of("a.json", a) + cmp.rows_of("l.json", longer))] == \
        ["T", "T (18 iterations)"]  # another budget: its own row, never merged with the 6-iteration one
    seen = _res({"grpo": {"0": 1.0}, T: {"0": 2.0}}, panel="alfworld/valid_seen@v1")
    assert cmp.rows_of("s.json", seen)[0]["file"] == "s.json (alfworld/valid_seen@v1)"  # never mixed in silently


def test_the_results_ledger_is_what_the_script_prints_from_the_repos_results(capsys):
    """The README's table of every comparison must be regenerated when a results file changes."""
    cmp = comparisons
    assert cmp.main([]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\n")[0].strip()
    assert table.count("\n") >= 10, table  # one line per arm of a dozen results files
    readme = (REPO / "docs" / "RESULTS.md").read_text()
    assert table in readme, "docs/RESULTS.md ledger stale: paste `python -m studies.comparisons`"
    noise = next(line for line in out.splitlines() if line.startswith("per-seed differences to GRPO"))
    assert noise in " ".join(readme.split()), "docs/RESULTS.md's seed-noise line stale: paste it from studies/comparisons.py"


def test_short_labels_name_the_t_arm_and_its_variants():
    cmp = comparisons
    t = "opid:" + cmp.T_SETTINGS
    assert cmp.short_label(t) == "T"
    assert cmp.short_label(t + "+teacher_anchor_coeff=1") == "T+c_A=1"
    assert cmp.short_label(t + "+analyzer.quote_sampled=false") == "T+unquoted"
