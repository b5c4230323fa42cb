"""docs/STUDIES.md's generated tables match the result JSONs (`python -m studies.tables --check`), and the check
catches a figure edited by hand. Unmarked: a doc check of a second, it runs in the fast lane too."""

from studies import tables


def test_the_studies_doc_tables_are_the_ones_the_jsons_give(capsys):
    assert tables.main(["--check"]) == 0, capsys.readouterr().err


def test_a_figure_changed_by_hand_is_reported_and_rewritten(tmp_path, capsys):
    doc = tmp_path / "STUDIES.md"
    text = tables.DOC.read_text()
    row = next(ln for ln in tables.render("onplan_3_seeds").splitlines() if ln.startswith("| GRPO |"))
    assert row in text
    doc.write_text(text.replace(row, row.replace("/ 18.1 |", "/ 19.1 |")))
    assert tables.main(["--check", "--doc", str(doc)]) == 1
    assert "stale tables ['onplan_3_seeds']" in capsys.readouterr().err
    assert tables.main(["--doc", str(doc)]) == 0 and doc.read_text() == text


def test_the_contents_and_the_other_docs_link_to_headings_that_exist():
    text = tables.DOC.read_text()
    assert tables.slug("The issue's protocol (machine A): one seed") == "the-issues-protocol-machine-a-one-seed"
    assert "## Contents" in text and text.count("](#") >= 20  # one link per study section
    assert tables.broken_links(text) == []
    assert tables.broken_links(text + "\n[x](#no-such-study)\n") == ["STUDIES.md#no-such-study"]


def test_an_arm_of_another_study_is_read_from_its_own_results_file():
    """The protocol table's last row is T of the no-hint study: learning_nohint.json, not learning.json."""
    t_row = next(ln for ln in tables.render("nohint_3_seeds").splitlines() if ln.startswith("| T (teacher"))
    last = tables.render("protocol_nohint").splitlines()[-1]
    assert "`learning_nohint.json`" in last and last.split("|")[2:] == t_row.split("|")[2:]
