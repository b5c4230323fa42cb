"""The README's Usage block runs as printed, in order, in a scratch folder (issue 92): each line is read from the
README and shortened by flags only (fewer iterations, plays and steps), so the test breaks when the README drifts
from what the commands accept, name or write."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opid_rllib.cli.tune_console import STATUS_COLUMNS

ROOT = Path(__file__).resolve().parents[1]

# What each command gets on top of the README's flags (a flag given here replaces the README's value): the least
# that still runs every phase (warm start, a Tune iteration with its checkpoint, export, evaluation, report).
SHORTER = {
    "opid-sft": ["--tasks", "6", "--epochs", "1"],
    "opid-train": ["--stop-iters", "1", "--group-size", "2", "--tasks-per-iter", "1", "--max-steps", "2",
                   "--max-new-tokens", "16"],
    "opid-eval": ["--episodes", "2", "--max-steps", "2"],
}


def usage_lines(readme: str) -> list[list[str]]:
    """The commands of the README's Usage block (its first indented block), comments dropped, as argv lists."""
    section = readme.split("\n## Usage\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n((?: {4}\S.*\n)+)", section).group(1)
    return [shlex.split(line, comments=True) for line in block.splitlines()]


def shortened(argv: list[str]) -> list[str]:
    out = list(argv)
    extra = SHORTER.get(argv[0], [])
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def console_script(name: str) -> list[str]:
    """The installed console script (scripts/test.sh installs the package editable, so it runs the tree under test),
    else its entry point from pyproject.toml in this interpreter."""
    exe = Path(sys.executable).parent / name
    if exe.exists():
        return [str(exe)]
    target = re.search(rf'^{name} = "([\w.]+):(\w+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    module, func = target.groups()
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


def assert_readable_tune_console(text: str) -> None:
    """Issue 92's Tune console, piped: no colour codes, no line over 2,000 characters, no per-result config dump."""
    assert "\x1b[" not in text
    assert max(len(line) for line in text.splitlines()) <= 2000
    assert "with parameters=" not in text


def test_usage_block_is_parsed_into_the_commands_it_shows():
    lines = usage_lines((ROOT / "README.md").read_text())
    assert [argv[0] for argv in lines] == ["opid-sft", "opid-train", "tensorboard", "opid-export", "opid-eval",
                                           "opid-report"]
    assert shortened(["opid-train", "--stop-iters", "10", "--x"])[:4] == ["opid-train", "--stop-iters", "1", "--x"]


@pytest.mark.slow  # starts Ray (Tune) and loads the model in five processes
def test_usage_block_runs_as_printed(tmp_path):
    """The README's chain in a scratch folder: warm start -> Tune run (a readable piped console, its checkpoint
    printed) -> export of that path -> evaluation -> report."""
    lines = usage_lines((ROOT / "README.md").read_text())
    env = {k: v for k, v in os.environ.items() if k != "RAY_COLOR_PREFIX"}  # RAY_ADDRESS=local stays (conftest)
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    printed, times = "", {}
    for argv in lines:
        if argv[0] == "tensorboard":  # a server: it reads what opid-train wrote
            assert list(Path(tmp_path, argv[argv.index("--logdir") + 1]).rglob("events.out.tfevents.*"))
            continue
        cmd = shortened(argv)
        # through bash, as a user types it: the export line's glob expands there
        line = " ".join(shlex.quote(a) if "*" not in a else a for a in console_script(cmd[0]) + cmd[1:])
        t0 = time.perf_counter()
        p = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
        times[cmd[0]] = round(time.perf_counter() - t0, 1)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        if cmd[0] == "opid-train":
            printed = p.stdout
            assert_readable_tune_console(p.stdout + p.stderr)
    # the export line's path is the one opid-train printed, once
    said = re.findall(r"\[opid-train\] checkpoint: (\S+)", printed)
    export = next(argv for argv in lines if argv[0] == "opid-export")
    assert len(said) == 1 and [p.resolve() for p in tmp_path.glob(export[1])] == [Path(said[0]).resolve()]
    trial = Path(said[0]).parent
    last = json.loads((trial / "result.json").read_text().splitlines()[-1])
    for key in STATUS_COLUMNS:  # every column of Tune's status table is a number our results carry
        value = last
        for part in key.split("/"):
            value = value[part]
        assert isinstance(value, (int, float)), key
    assert (tmp_path / export[2] / "config.json").exists()
    assert list((tmp_path / "runs").rglob("report/index.html")), times
    print("seconds per command:", times)
