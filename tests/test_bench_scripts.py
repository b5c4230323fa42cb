"""The README's numbers come from bench/ commands: every bench script it names must exist and parse, and the
study drivers that need a base must say so instead of starting an hour of work on a missing path."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL_SCRIPTS = sorted((ROOT / "bench").glob("*.sh"))


def test_every_bench_script_the_readme_names_exists():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"bench/[A-Za-z0-9_]+\.(?:py|sh)", readme))
    assert len(named) >= 10, named  # the README quotes many bench commands; a broken regex would find none
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"README names bench scripts that are not in the repo: {missing}"


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_bench_shell_scripts_parse(script):
    p = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("script", ["nohint_study.sh", "dagger_base.sh"])
def test_study_drivers_without_a_base_print_their_usage(script, tmp_path):
    p = subprocess.run(["bash", str(ROOT / "bench" / script)], capture_output=True, text=True, cwd=tmp_path,
                       stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode != 0
    assert "usage: bash bench/" + script + " BASE" in p.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written before the arguments are checked"


@pytest.mark.parametrize("script, env, says", [
    ("nohint_study.sh", {"ARMS": "opid"}, "ARMS=opid: choose all"),
    ("opid_vs_grpo_study.sh", {"SHARDS": "3"}, "SHARDS=3: choose 1 or 2"),
])
def test_study_drivers_refuse_a_setting_they_cannot_run_before_writing(script, env, says, tmp_path):
    p = subprocess.run(["bash", str(ROOT / "bench" / script), "BASE", str(tmp_path / "out")], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", **env}, stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode == 2
    assert says in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("crashing_shard", ["0/2", "1/2"])
def test_a_crashed_shard_stops_the_study_before_its_report(crashing_shard, tmp_path):
    """The two `bench/learning.py --shard` processes run side by side; a bare `wait` returned 0 after the
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
    p = subprocess.run(["bash", str(ROOT / "bench" / "sweep_expert_study.sh"), str(out), "0"], capture_output=True,
                       text=True, env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)}, stdin=subprocess.DEVNULL,
                       timeout=30, cwd=ROOT)
    calls = log.read_text().splitlines()
    assert p.returncode == 7, (p.returncode, p.stderr)
    assert sorted(c.split("--shard ")[1] for c in calls) == ["0/2", "1/2"]  # both shards ran, then it stopped
    assert not any("--results" in c for c in calls)
