"""Lenient parsing of messy analyzer answers."""

import json

import pytest

from opid_rllib.analyzer import ParseError, parse_analysis
from opid_rllib.analyzer.parsing import extract_analysis_object

CANDS = list(range(10))
GOOD = {"episode_summary": "It went fine.", "episode_skill": "Take the mug first.",
        "step_skills": {"0": "Go to the countertop.", "3": "Cool the mug with the fridge."}}


def test_plain_json():
    s = parse_analysis(json.dumps(GOOD), CANDS, 5)
    assert s.episode_summary == "It went fine."
    assert s.episode_skill == "Take the mug first."
    assert s.step_skills == {0: "Go to the countertop.", 3: "Cool the mug with the fridge."}
    assert s.ok and s.error is None


def test_fenced_with_prose_and_trailing_commas():
    text = ("Sure! Here is my analysis of {the episode}:\n```json\n"
            '{"episode_summary": "s", "episode_skill": "k",\n'
            ' "step_skills": {"1": "a", "2": "b",},\n}\n```\nHope this helps.')
    s = parse_analysis(text, CANDS, 5)
    assert (s.episode_skill, s.step_skills) == ("k", {1: "a", 2: "b"})


def test_prose_around_raw_json_and_inner_object_not_chosen():
    # The first `{` found is a nested dict without episode_skill; the outer object must win.
    text = 'Thinking: {"x": 1} then the answer ' + json.dumps(GOOD) + " end."
    assert parse_analysis(text, CANDS, 5).episode_skill == "Take the mug first."


def test_python_dict_style_single_quotes():
    text = ("{'episode_summary': 'ok', 'episode_skill': 'Open the fridge before cooling.', "
            "'step_skills': {2: 'Open fridge 1.', '4': 'Cool it.', }, }")
    s = parse_analysis(text, CANDS, 5)
    assert s.episode_skill == "Open the fridge before cooling."
    assert s.step_skills == {2: "Open fridge 1.", 4: "Cool it."}


def test_non_int_keys_dropped_and_step_prefix_accepted():
    obj = {"episode_skill": "k", "step_skills": {"first": "x", "1.5": "y", "Step 2": "z", "7": "w", "": "v"}}
    assert parse_analysis(json.dumps(obj), CANDS, 5).step_skills == {2: "z", 7: "w"}


def test_filtered_to_candidates_then_truncated_in_dict_order():
    obj = {"episode_skill": "k",
           "step_skills": {"9": "a", "42": "out of range", "-1": "neg", "1": "b", "5": "c", "0": "d", "3": "e"}}
    s = parse_analysis(json.dumps(obj), CANDS, 3)
    assert list(s.step_skills) == [9, 1, 5]          # dict order, not sorted; 42/-1 dropped
    assert parse_analysis(json.dumps(obj), CANDS, 0).step_skills == {}


def test_values_stripped_and_empty_values_dropped():
    obj = {"episode_skill": "  k  ", "episode_summary": None, "step_skills": {"1": "  a \n", "2": "  "}}
    s = parse_analysis(json.dumps(obj), CANDS, 5)
    assert (s.episode_skill, s.episode_summary, s.step_skills) == ("k", "", {1: "a"})


def test_list_shaped_step_skills():
    obj = {"episode_skill": "k", "step_skills": [{"step": 4, "skill": "a"}, {"index": "6", "advice": "b"}]}
    assert parse_analysis(json.dumps(obj), CANDS, 5).step_skills == {4: "a", 6: "b"}


def test_missing_step_skills_is_fine():
    assert parse_analysis('{"episode_skill": "k"}', CANDS, 5).step_skills == {}


@pytest.mark.parametrize("text, msg", [
    ('{"episode_summary": "s", "step_skills": {"1": "a"}}', "episode_skill"),
    ('{"episode_summary": "s", "episode_skill": "   ", "step_skills": {}}', "empty"),
    ("I could not analyse this.", "no JSON object"),
    ("", "no JSON object"),
    ('```json\n{"episode_skill": "trunc', "no JSON object"),
    # non-text skills (a small model's junk, seen from SmolLM2-135M on llama.cpp): refused, not stringified
    ('{"episode_skill": {"recursive_referenced_skillsList[0]: [": 1}}', "'episode_skill' is a dict, not a sentence"),
    ('{"episode_skill": "{\'recursive_referenced_skillsList[0]: [\': 1}"}', "'episode_skill' is not a sentence"),
    ('{"episode_skill": 42}', "'episode_skill' is a int"),
    ('{"episode_skill": "Go to the fridge.", "step_skills": {"1": ["a", {"b": 2}]}}', "step skill '1' is a list"),
    ('{"episode_skill": "Go to the fridge.", "step_skills": {"1": "[1, 2, 3]"}}', "step skill '1' is not a sentence"),
    ('{"episode_skill": "12 / 3 ..."}', "not a sentence"),
    ('{"episode_skill": "..."}', "not a sentence"),
    # the format example's placeholder copied back (SmolLM2-135M does)
    ('{"episode_skill": "<one reusable skill for this task>"}', "'episode_skill' is the format example's placeholder"),
    ('{"episode_skill": "Go.", "step_skills": {"0": "<advice for step 0>"}}', "step skill '0' is the format example"),
])
def test_rejections(text, msg):
    with pytest.raises(ParseError, match=msg):
        parse_analysis(text, CANDS, 5)


def test_unescaped_newline_inside_string_is_tolerated():
    text = '{"episode_skill": "line one\nline two", "step_skills": {}}'
    assert parse_analysis(text, CANDS, 5).episode_skill == "line one\nline two"


def test_keys_case_insensitive_and_none_candidates():
    obj = {"Episode_Skill": "k", "STEP_SKILLS": {"12": "a"}}
    assert extract_analysis_object(json.dumps(obj))["episode_skill"] == "k"
    assert parse_analysis(json.dumps(obj), None, 5).step_skills == {12: "a"}


def test_degenerate_answers_parse_fast_and_fail_cleanly():
    """A reply of 16,000 "{" (quadratic to scan from every brace: 12 s a parse before the scan budget) or one
    nested past Python's recursion limit is a ParseError within a second or two, and a dict literal after a
    hundred stray braces is still found."""
    import time

    for text in ("{" * 16000, '{"episode_skill": ' * 1500):
        t0 = time.perf_counter()
        with pytest.raises(ParseError):
            parse_analysis(text, CANDS, 5)
        assert time.perf_counter() - t0 < 3.0
    s = parse_analysis("{" * 100 + " Here: " + repr(GOOD), CANDS, 5)
    assert s.episode_skill == "Take the mug first."
