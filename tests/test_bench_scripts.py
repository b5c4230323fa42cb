"""The docs' numbers come from commands: every bench/, studies/ and tuned_examples/ script a doc names must exist,
each runs from the repository root as `python -m PACKAGE.NAME`, and none edits sys.path to find its neighbours."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),  # docs/STUDIES.md holds most study commands
        *(ROOT / d / "README.md" for d in ("bench", "studies", "tuned_examples"))]
PACKAGES = ("bench", "studies", "tuned_examples")


def scripts_named(text: str) -> set[str]:
    """Script paths a text names, by path (`bench/x.py`) or as a module (`python -m studies.x`)."""
    paths = set(re.findall(r"(?<![\w/.])(?:bench|studies|tuned_examples)/[a-z0-9_]+\.(?:py|sh)\b", text))
    modules = re.findall(r"-m ((?:bench|studies|tuned_examples)\.[a-z0-9_]+)\b", text)
    return paths | {m.replace(".", "/") + ".py" for m in modules}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_and_image_a_doc_names_exists(doc):
    text = doc.read_text()
    missing = sorted(p for p in scripts_named(text) if not (ROOT / p).is_file())
    assert not missing, f"{doc.name} names scripts that are not in the repo: {missing}"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)  # relative to the doc's own folder, as GitHub reads them
    assert not [i for i in images if not (doc.parent / i).is_file()], images


def test_the_readme_and_the_studies_quote_commands():
    for doc, least in (("README.md", 2), ("docs/RESULTS.md", 10), ("docs/STUDIES.md", 15), ("bench/README.md", 12)):
        named = scripts_named((ROOT / doc).read_text())
        assert len(named) >= least, (doc, named)  # a broken regex (or a lost document) would find none
    assert "studies/learning.py" in scripts_named("python -m studies.learning --out x")


def test_no_script_edits_sys_path():
    """Scripts import their neighbours as packages (`from studies import run_cache`), run with `python -m`."""
    edits = [f"{p.relative_to(ROOT)}:{i}" for d in (*PACKAGES, "scripts", "opid_rllib", "envs")
             for p in sorted((ROOT / d).rglob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"sys\.path\.(insert|append)|sys\.path \+?=", line)]
    assert not edits, edits


@pytest.mark.parametrize("module", ["bench.faults", "bench.throughput", "bench.dtype_speed", "bench.learning_gate",
                                    "bench.gpu_check"])
def test_a_bench_module_that_imports_its_neighbours_runs_from_the_root(module):
    """`python -m bench.X --help` from the repository root, with no PYTHONPATH: the root is what finds `bench`,
    `studies` and `opid_rllib` (gpu_check.py runs so on a GPU machine without the package installed)."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout.startswith("usage:"), p.stderr[-2000:]
