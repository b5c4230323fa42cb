"""The study drivers (studies/*.sh): they parse, refuse a missing base or a setting they cannot run before writing
anything, and chain their stages in order (stand-ins for the package's commands: the control flow is tested, not
hours of training)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHELL_SCRIPTS = sorted((ROOT / "studies").glob("*.sh"))


def fake_cpuinfo(tmp_path):
    """Two /proc/cpuinfo stand-ins (CPUINFO=), so that the drivers' bf16 guard gives the same test on every CPU:
    one with bf16 in hardware, one with AVX2 only."""
    with_bf16, avx2_only = tmp_path / "cpuinfo_bf16", tmp_path / "cpuinfo_avx2"
    with_bf16.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    avx2_only.write_text("processor\t: 0\nflags\t\t: fpu avx avx2 fma\n")
    return with_bf16, avx2_only


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_study_shell_scripts_parse(script):
    p = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("script", ["nohint_study.sh", "dagger_base.sh"])
def test_study_drivers_without_a_base_print_their_usage(script, tmp_path):
    p = subprocess.run(["bash", str(ROOT / "studies" / script)], capture_output=True, text=True, cwd=tmp_path,
                       stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode != 0
    assert "usage: bash studies/" + script + " BASE" in p.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written before the arguments are checked"


@pytest.mark.parametrize("script, env, says", [
    ("nohint_study.sh", {"ARMS": "opid"}, "ARMS=opid: choose all"),
    ("opid_vs_grpo_study.sh", {"SHARDS": "3"}, "SHARDS=3: choose 1 or 2"),
])
def test_study_drivers_refuse_a_setting_they_cannot_run_before_writing(script, env, says, tmp_path):
    p = subprocess.run(["bash", str(ROOT / "studies" / script), "BASE", str(tmp_path / "out")], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", **env}, stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode == 2
    assert says in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("crashing_shard", ["0/2", "1/2"])
def test_a_crashed_shard_stops_the_study_before_its_report(crashing_shard, tmp_path):
    """The two `studies/learning.py --shard` processes run side by side; a bare `wait` returned 0 after the
    background shard crashed. The interpreter here is a stand-in that logs its arguments and fails on one shard:
    the driver's control flow is what is tested, not an hour of training."""
    out = tmp_path / "out"
    for sub, name in (("base", "config.json"), ("headroom", "results.json")):  # both already made: skipped
        (out / sub).mkdir(parents=True)
        (out / sub / name).write_text("{}")
    log = tmp_path / "calls.log"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/bash\necho "$*" >> {log}\ncase "$*" in *"--shard {crashing_shard}"*) exit 7;; esac\n')
    fake.chmod(0o755)
    p = subprocess.run(["bash", str(ROOT / "studies" / "sweep_expert_study.sh"), str(out), "0"], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)}, stdin=subprocess.DEVNULL,
                       timeout=30, cwd=ROOT)
    calls = log.read_text().splitlines()
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert sorted(c.split("--shard ")[1] for c in calls) == ["0/2", "1/2"]  # both shards ran, then it stopped
    assert not any("--results" in c for c in calls)


def _package_stand_ins(bin_dir, log):
    """Stand-ins for opid-sft, opid-eval and the interpreter: log their arguments, write the files each leaves
    (config.json and sft_stats.json under --out, results.json under --output, the sweep's selection), so a
    driver's control flow is tested without hours of work."""
    bin_dir.mkdir()
    writes = {"opid-sft": 'd=$(arg --out); mkdir -p "$d"; echo {} > "$d/config.json"; echo {} > "$d/sft_stats.json"',
              "opid-eval": 'd=$(arg --output); mkdir -p "$d"; echo {} > "$d/results.json"'}
    for name, body in writes.items():
        (bin_dir / name).write_text(
            f'#!/bin/bash\necho "{name} $*" >> {log}\n'
            'arg() { local want=$1; set -- "${ARGS[@]}"; while [ $# -gt 0 ]; do [ "$1" = "$want" ] && '
            'echo "$2"; shift; done; }\nARGS=("$@")\n' + body + "\n")
        (bin_dir / name).chmod(0o755)
    # the interpreter: `python -` runs for real (the drivers' inline readers); a script call is logged, and the
    # sweep and the tiny warm start leave the files the drivers read next
    sweep = json.dumps({"tied": [{"episode_skill_adv_weight": 0.03, "step_skill_adv_weight": 0.3}],
                        "informative": True})
    (bin_dir / "python").write_text(
        f'#!/bin/bash\n[ "$1" = - ] && exec {sys.executable} "$@"\necho "python $*" >> {log}\n'
        'out() { local flag=$1; shift; echo "$*" | sed "s/.*$flag \\([^ ]*\\).*/\\1/"; }\n'
        f'case "$*" in *alfworld_opid_weight_sweep.py*) d=$(out --output "$@"); mkdir -p "$d"; '
        f"echo '{sweep}' > \"$d/sweep.json\";;\n"
        '  *sft_warmstart*) d=$(out --out "$@"); mkdir -p "$d"; echo {} > "$d/config.json";; esac\n')
    (bin_dir / "python").chmod(0o755)


def test_the_from_scratch_study_runs_every_stage_in_order_with_its_dtype_and_resumes(tmp_path):
    """studies/from_scratch_study.sh chains five stages (hours of work); stand-ins for opid-sft, opid-eval and the
    interpreter log their arguments and write the files each stage leaves, so the driver's control flow is what
    is tested: stage order, each model feeding the next, DTYPE reaching every command, timings.tsv, and a second
    call skipping what exists."""
    out, log, bin_dir = tmp_path / "out", tmp_path / "calls.log", tmp_path / "bin"
    _package_stand_ins(bin_dir, log)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(bin_dir / "python"), "DTYPE": "bfloat16",
           "SWEEP_SAMPLES": "2"}
    run = lambda: subprocess.run(["bash", str(ROOT / "studies" / "from_scratch_study.sh"), str(out)],  # noqa: E731
                                 capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60,
                                 cwd=ROOT)
    p = run()
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    sft = [c for c in calls if c.startswith("opid-sft")]
    assert [c.split("--out ")[1].split()[0] for c in sft] == [f"{out}/{s}" for s in ("base", "stage4", "stage5")]
    assert [c.split("--model ")[1].split()[0] for c in sft] == ["tiny", f"{out}/base", f"{out}/stage4"]
    assert "--policy-tasks 300" in sft[1] and "--hint-follow-prob 0 " in sft[2] + " "
    assert all("--dtype bfloat16" in c for c in calls), [c for c in calls if "--dtype bfloat16" not in c]
    (sweep_call,) = [c for c in calls if "alfworld_opid_weight_sweep.py" in c]
    assert "--num-samples 2 " in sweep_call and "--select-panel alfworld/valid_seen@v1" in sweep_call
    learning = [c for c in calls if "-m studies.learning " in c]
    assert {c.split("--shard ")[1].split()[0] for c in learning if "--shard" in c} == {"0/2", "1/2"}
    assert f"--headroom-results {out}/headroom5/results.json" in learning[-1]
    rows = [r.split("\t") for r in (out / "timings.tsv").read_text().splitlines()]
    assert [r[0] for r in rows] == ["stage", "base", "dagger", "stage5", "headroom", "protocol", "total"]
    n = len(calls)
    assert run().returncode == 0
    again = log.read_text().splitlines()[n:]
    assert again and not any(c.startswith(("opid-sft", "opid-eval")) or "weight_sweep" in c for c in again)
    totals = [r for r in (out / "timings.tsv").read_text().splitlines() if r.startswith("total")]
    assert len(totals) == 2  # the second total sums the stage rows, not the first total

    env["DTYPE"] = "float16"
    p = subprocess.run(["bash", str(ROOT / "studies" / "from_scratch_study.sh"), str(tmp_path / "x")],
                       capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=30, cwd=ROOT)
    assert p.returncode == 2 and "DTYPE=float16: choose float32 or bfloat16" in p.stderr
    assert not (tmp_path / "x").exists()


def test_the_smollm2_headroom_driver_warm_starts_smollm2_then_plays_student_and_teacher(tmp_path):
    """studies/smollm2_headroom.sh: the SFT starts from smollm2-135m with analyzer-worded skills, the play is the
    oracle headroom on PANEL from that SFT, settings reach both commands, and a second call skips both. Its
    default, bf16, is refused on a CPU without bf16 in hardware (days of emulated bf16 for SmolLM2 there)."""
    out, log, bin_dir = tmp_path / "out", tmp_path / "calls.log", tmp_path / "bin"
    _package_stand_ins(bin_dir, log)
    with_bf16, avx2_only = fake_cpuinfo(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TASKS": "7", "EPOCHS": "3", "PANEL": "alfworld/valid_unseen@v1",
           "CPUINFO": str(with_bf16)}
    run = lambda e: subprocess.run(["bash", str(ROOT / "studies" / "smollm2_headroom.sh"), str(out)],  # noqa: E731
                                   capture_output=True, text=True, env=e, stdin=subprocess.DEVNULL, timeout=30)
    p = run(env)
    assert p.returncode == 0, p.stderr
    sft, play = log.read_text().splitlines()
    assert sft.startswith("opid-sft ") and "--model smollm2-135m " in sft and "--step-skill-wording analyzer" in sft
    assert "--tasks 7 " in sft and "--epochs 3 " in sft and "--skill-fraction 0.5" in sft
    model = sft.split("--out ")[1].split()[0]
    assert play.startswith("opid-eval ") and f"--model {model} " in play and "--skills oracle" in play
    assert "--panel alfworld/valid_unseen@v1 " in play and "--hint-follow-prob" not in play
    assert all("--dtype bfloat16" in c for c in (sft, play))
    assert play.split("--output ")[1].split()[0] in p.stdout
    assert not list(tmp_path.glob("*.json"))  # no RESULTS: no record
    env.update(RESULTS=str(tmp_path / "record.json"), PYTHON=sys.executable)
    assert run(env).returncode == 0 and len(log.read_text().splitlines()) == 2  # both outputs exist: skipped
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["sft"] == {} and record["play"] == {} and "TASKS=7 EPOCHS=3" in record["command"]
    rows = [r.split("\t")[0].split()[0] for r in (out / "timings.tsv").read_text().splitlines()]
    assert rows == ["stage", "sft", "play"]
    assert run({**env, "CPUINFO": str(avx2_only)}).returncode == 0  # nothing left to run: no refusal
    for bad, says in (({"DTYPE": "float16"}, "DTYPE=float16: choose"), ({"PANEL": "webshop/test@v1"}, "PANEL="),
                      ({"CPUINFO": str(avx2_only)}, "DTYPE=bfloat16 on a CPU without AVX512-BF16 or AMX")):
        p = subprocess.run(["bash", str(ROOT / "studies" / "smollm2_headroom.sh"), str(tmp_path / "x")],
                           capture_output=True, text=True, env={**env, **bad}, stdin=subprocess.DEVNULL, timeout=30)
        assert p.returncode == 2 and says in p.stderr
        assert not (tmp_path / "x").exists()
    assert "DTYPE=float32 runs the recipe here" in p.stderr and len(log.read_text().splitlines()) == 2
    for i, allowed in enumerate(({"SLOW_BF16": "1"}, {"DTYPE": "float32"})):  # run anyway; float32
        n = len(log.read_text().splitlines())
        p = subprocess.run(["bash", str(ROOT / "studies" / "smollm2_headroom.sh"), str(tmp_path / f"y{i}")],
                           capture_output=True, text=True, env={**env, "CPUINFO": str(avx2_only), **allowed},
                           stdin=subprocess.DEVNULL, timeout=30)
        assert p.returncode == 0 and len(log.read_text().splitlines()) == n + 2, (allowed, p.stderr)


RECIPE_DRIVERS = {"dagger_base.sh": ["BASE"], "skill_literate_base.sh": [], "sweep_base.sh": ["BASE"],
                  "sweep_expert_study.sh": [], "nohint_study.sh": ["BASE"], "from_scratch_study.sh": [],
                  "smollm2_headroom.sh": []}


def _recipe(array):
    """One array of studies/recipe.sh as (flag, value) pairs, read by bash itself."""
    p = subprocess.run(["bash", "-c", f'. studies/recipe.sh; printf "%s\\n" "${{{array}[@]}}"'], cwd=ROOT,
                       capture_output=True, text=True, check=True)
    words = p.stdout.split("\n")[:-1]
    return [(words[i], words[i + 1] if not words[i + 1].startswith("--") else None)
            for i in range(len(words)) if words[i].startswith("--")]


@pytest.mark.parametrize("script", sorted(RECIPE_DRIVERS))
def test_skill_literate_drivers_train_and_play_with_the_one_recipe(script, tmp_path):
    """studies/recipe.sh holds the skill-literate SFT's settings and the oracle play's. Every driver that builds or
    plays such a base runs them all (each opid-sft carries every SKILL_LITERATE flag with its value, each oracle
    play every ORACLE_PLAY flag), and none writes one of the recipe's own flags out again, where a copy could
    drift from the recipe that the README's tables were measured with."""
    log, bin_dir = tmp_path / "calls.log", tmp_path / "bin"
    _package_stand_ins(bin_dir, log)
    args = [str(tmp_path / a) for a in RECIPE_DRIVERS[script]] + [str(tmp_path / "out")]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(bin_dir / "python"), "TASKS": "3", "EPOCHS": "1",
           "CPUINFO": str(fake_cpuinfo(tmp_path)[0])}
    p = subprocess.run(["bash", str(ROOT / "studies" / script), *args], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    calls = [f" {c} " for c in log.read_text().splitlines()]
    for command, array in (("opid-sft", "SKILL_LITERATE"), ("opid-eval", "ORACLE_PLAY")):
        runs = [c for c in calls if c.startswith(f" {command} ")]
        recipe = _recipe(array)
        assert runs and len(recipe) >= 5, (command, calls, recipe)
        for flag, value in recipe:
            missing = [c for c in runs if f" {flag} {value} " not in c]
            assert not missing, f"{script}: {command} without {flag} {value}: {missing}"
    code = "\n".join(ln for ln in (ROOT / "studies" / script).read_text().splitlines() if not ln.startswith("#"))
    shared = ("--env", "--history-length", "--max-steps")  # also set by the drivers' RL and learning commands
    own = [f for f, _ in _recipe("SKILL_LITERATE") + _recipe("ORACLE_PLAY") if f not in shared]
    assert not [f for f in own if f in code], f"{script} writes out recipe flags again"


def _recipe_arm(name: str) -> str:
    """An arm (a string variable) of studies/recipe.sh, as the drivers that source it see it."""
    return subprocess.run(["bash", "-c", f". studies/recipe.sh; echo ${name}"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_smollm2_study_trains_grpo_and_t_at_the_headroom_plays_settings(tmp_path):
    """studies/smollm2_study.sh: one studies/learning.py process (a SmolLM2 learner does not fit twice in 24 GB) with
    GRPO and the recipe's T from the SFT, the headroom play of studies/smollm2_headroom.sh read where it exists (its
    settings must match: answers of 32 tokens, prompts of 2048, bf16), and no run without an RL learning rate."""
    log, bin_dir, sft = tmp_path / "calls.log", tmp_path / "bin", tmp_path / "sft_t120_e1"
    _package_stand_ins(bin_dir, log)
    with_bf16, avx2_only = fake_cpuinfo(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(bin_dir / "python"), "LR": "1e-5", "SEEDS": "0",
           "CPUINFO": str(with_bf16)}
    run = lambda e: subprocess.run(["bash", str(ROOT / "studies" / "smollm2_study.sh"), str(sft),  # noqa: E731
                                    str(tmp_path / "out")], capture_output=True, text=True, env=e, cwd=ROOT,
                                   stdin=subprocess.DEVNULL, timeout=30)
    assert run(env).returncode == 0
    (call,) = log.read_text().splitlines()
    t_arm = _recipe_arm("T_ARM")
    assert t_arm.startswith("opid:") and f"--variants grpo,{t_arm} " in call and f"--opid-variant {t_arm} " in call
    for setting in (f"--base {sft} ", "--seeds 0 ", "--lr 1e-5 ", "--dtype bfloat16 ", "--torch-threads 2 ",
                    "--micro-batch-size 4 ",
                    "--max-new-tokens 32 ", "--max-prompt-len 2048 ", "--headroom-panel alfworld/valid_unseen@v1"):
        assert setting in call + " ", setting
    assert "--shard" not in call and "--headroom-results" not in call and "--results" not in call
    played = tmp_path / "sft_t120_e1-alfworld_valid_unseen_v1" / "results.json"
    played.parent.mkdir()
    played.write_text("{}")
    assert run({**env, "ARMS": "all", "RESULTS": "r.json"}).returncode == 0
    call = log.read_text().splitlines()[-1]
    assert f"--headroom-results {played} " in call and call.endswith("--results r.json")
    assert f"--variants grpo,{t_arm},{t_arm}+shuffle_skills=true " in call
    assert run({**env, "ARMS": "t", "ANCHOR": "1"}).returncode == 0  # T alone, then T with the teacher anchor
    assert f"--variants {t_arm},{t_arm}+teacher_anchor_coeff=1 " in log.read_text().splitlines()[-1]
    assert run({**env, "ARMS": "grpo", "UNQUOTED": "1"}).returncode == 0  # GRPO, then T with unquoted step skills
    assert f"--variants grpo,{t_arm}+analyzer.quote_sampled=false " in log.read_text().splitlines()[-1]
    assert run({**env, "ARMS": "t", "NO_TEACHER_SAMPLES": "1"}).returncode == 0  # then T without teacher samples
    assert f"--variants {t_arm},{t_arm}+teacher_sample_adv_weight=0 " in log.read_text().splitlines()[-1]
    assert run({**env, "ARMS": "base", "NO_STEP": "0.3"}).returncode == 0  # OPID without step skills alone
    assert "--variants no_step_skill:w_ep=0.3+normalize_teacher_adv=true " in log.read_text().splitlines()[-1]
    every = _recipe_arm("EVERY_STEP_ARM")
    assert run({**env, "ARMS": "base", "EVERY_STEP": "1"}).returncode == 0  # a step skill at every step, alone
    assert f"--variants {every} " in log.read_text().splitlines()[-1]
    assert all(s in every for s in ("w_step=0.3", "max_step_skills_per_traj=30", "analyzer.on_plan_step_skills=30",
                                    "analyzer.quote_sampled=false")) and "teacher_sample" not in every
    for arms, variants in (("grpo", "grpo"), ("shuffled", f"{t_arm}+shuffle_skills=true"),  # one arm per sitting
                           ("base", "")):  # the base's plays alone
        assert run({**env, "ARMS": arms}).returncode == 0
        assert f"--variants {variants} " in log.read_text().splitlines()[-1]
        assert "--cached-only" not in log.read_text().splitlines()[-1]
    assert run({**env, "ARMS": "base", "UNQUOTED": "1"}).returncode == 0  # no empty arm before the extra one
    assert f"--variants {t_arm}+analyzer.quote_sampled=false " in log.read_text().splitlines()[-1]
    assert run({**env, "ARMS": "all", "REPORT": "1"}).returncode == 0  # the report of what has finished
    assert log.read_text().splitlines()[-1].endswith(" --cached-only")
    for bad, says in (({"LR": ""}, "LR=: set the RL learning rate"), ({"DTYPE": "float16"}, "DTYPE=float16"),
                      ({"ARMS": "opid"}, "ARMS=opid: choose"),
                      ({"CPUINFO": str(avx2_only)}, "DTYPE=bfloat16 on a CPU without AVX512-BF16 or AMX")):
        p = run({**env, **bad})
        assert p.returncode == 2 and says in p.stderr, p.stderr
    assert len(log.read_text().splitlines()) == 12  # the refused calls started nothing
    for allowed in ({"SLOW_BF16": "1"}, {"REPORT": "1"}, {"DTYPE": "float32"}):  # run anyway; trains nothing; fp32
        assert run({**env, "CPUINFO": str(avx2_only), **allowed}).returncode == 0, allowed
    assert len(log.read_text().splitlines()) == 15
    # with no OUT_DIR the study lies in the repo, where git keeps its finished jobs and settings, not its run
    # folders (policy weights) or claims, so a fresh machine resumes it
    p = subprocess.run(["bash", str(ROOT / "studies" / "smollm2_study.sh"), str(sft)], capture_output=True, text=True,
                       env=env, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode == 0 and "--out studies/results/smollm2_study " in log.read_text().splitlines()[-1] + " "
    study = "studies/results/smollm2_study/"
    kept = ("runs/grpo-s0.json", "runs/base-s0.json", "settings.json", "dtype", "learning.json")
    dropped = ("runs/grpo-s0/policy/model.safetensors", "runs/grpo-s0/result.json", "runs/grpo-s0.json.claim")
    for path in kept + dropped:
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", study + path], cwd=ROOT).returncode == 0
        assert ignored == (path in dropped), path


STUDY_MODULES = sorted(p.stem for p in (ROOT / "studies").glob("*.py") if "__main__" in p.read_text())


@pytest.mark.parametrize("name", STUDY_MODULES)
def test_each_study_script_runs_as_a_module_from_the_root(name):
    """`python -m studies.NAME --help` from the repository root, with no PYTHONPATH: the scripts import each other
    as `studies.X`, never through a sys.path edit."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", f"studies.{name}", "--help"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout.startswith("usage:"), p.stderr[-2000:]
