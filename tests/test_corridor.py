"""The corridor: the files a reader opens to follow the advantage from the learner's episodes to the loss's batch.

Counted from the imports (tests/test_import_map.py's graph), helpers included: every opid_rllib module the learner
connector package reaches, transitively. The research plug-ins are not in it (OPIDConfig passes them in; the
package never imports opid_rllib/experimental/), and docs/DESIGN.md lists exactly these files.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_map import import_graph

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 8  # issue 91: at most 8 files from the runner's output to the loss's batch (26 before it)


def corridor() -> set[str]:
    graph = import_graph()
    seen, todo = set(), ["opid_rllib.connectors"]
    while todo:
        mod = todo.pop()
        if mod not in seen:
            seen.add(mod)
            todo += graph.get(mod, ())
    return seen


def _path(mod: str) -> str:
    rel = mod.replace("opid_rllib.", "", 1).replace(".", "/")
    return rel + ("/__init__.py" if (ROOT / "opid_rllib" / rel).is_dir() else ".py")


def test_the_corridor_has_at_most_eight_files_and_no_research_code():
    files = corridor()
    assert len(files) <= LIMIT, sorted(files)
    assert not any(m.startswith("opid_rllib.experimental") for m in files)
    # then learner.py and losses.py: the loss (losses.py imports nothing of the package)
    assert not import_graph()["opid_rllib.losses"]


def test_design_md_lists_the_corridor_as_the_imports_give_it():
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    block = re.search(r"<!-- corridor: begin -->(.*?)<!-- corridor: end -->", text, re.S)
    assert block, "docs/DESIGN.md: the corridor's file list is missing"
    listed = set(re.findall(r"opid_rllib/([\w/]+\.py)", block.group(1)))
    assert listed == {_path(m) for m in corridor()}
    assert f"{len(corridor())} files" in block.group(1)
