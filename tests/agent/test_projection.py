"""Response -> (action, format_valid): the verl-agent projection rules for each env."""

from __future__ import annotations

import pytest

from opid_rllib.prompts import project_action

GOOD = "<think>The apple is in the fridge.</think>\n<action>Go To Fridge 1</action>"


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_well_formed_is_lowercased_and_valid(env):
    assert project_action(env, GOOD) == ("go to fridge 1", True)


@pytest.mark.parametrize("text, expected", [
    # missing think tags: action extracted but invalid
    ("<action>look</action>", ("look", False)),
    ("<think>hmm<action>look</action>", ("look", False)),
    ("</think><action>look</action>", ("look", False)),
    # whitespace inside the action tag is stripped
    ("<think>x</think><action>  open drawer 1 \n</action>", ("open drawer 1", True)),
    # multiple action blocks: the first one wins, still valid
    ("<think>x</think><action>look</action><action>inventory</action>", ("look", True)),
    # nested opening tag: text up to the first closing tag after the first opening tag
    ("<think>x</think><action>go <action>look</action>", ("go <action>look", True)),
    # upper-case tags are accepted after lower-casing
    ("<THINK>x</THINK><ACTION>Look</ACTION>", ("look", True)),
    # CJK anywhere makes the response invalid, action still extracted
    ("<think>我想</think><action>look</action>", ("look", False)),
    ("<think>x</think><action>look ひ</action>", ("look ひ", False)),
    ("<think>x</think><action>look 한</action>", ("look 한", False)),
])
def test_alfworld_edge_cases(text, expected):
    assert project_action("alfworld", text) == expected


def test_non_cjk_unicode_stays_valid():
    assert project_action("alfworld", "<think>café ½ 🙂</think><action>look</action>") == ("look", True)


def test_missing_action_tags_falls_back_to_tail():
    text = "<think>I should look around the kitchen now</think> I will go to countertop number 1"
    action, valid = project_action("alfworld", text)
    assert (action, valid) == (text.lower()[-30:].strip(), False)
    assert len(text.lower()[-30:]) == 30
    action, valid = project_action("webshop", text)
    assert (action, valid) == (text.lower()[-20:].strip(), False)


def test_unclosed_action_tag_falls_back():
    assert project_action("alfworld", "<think>x</think><action>look") == ("<think>x</think><action>look", False)
    assert project_action("alfworld", "") == ("", False)


def test_closing_before_opening_is_not_a_block():
    text = "<think>x</think></action> look <action>"
    assert project_action("alfworld", text)[1] is False


def test_webshop_search_action():
    reply = "<think>q</think><action>search[Red Shirt]</action>"
    assert project_action("webshop", reply) == ("search[red shirt]", True)


# ---- SearchQA ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("<think>need facts</think><search> Hamlet author </search>", ("<search>Hamlet author</search>", True)),
    ("<think>known</think><answer>William Shakespeare</answer>", ("<answer>William Shakespeare</answer>", True)),
    # think is not required by the search projection (Search-R1 checks only the action block)
    ("<answer>Paris</answer>", ("<answer>Paris</answer>", True)),
    # both kinds present: first block returned, invalid
    ("<search>a</search><answer>b</answer>", ("<search>a</search>", False)),
    ("<answer>b</answer> then <search>a</search>", ("<answer>b</answer>", False)),
    # a stray tag of the other kind also counts as "both"
    ("<search>a</search> <answer>", ("<search>a</search>", False)),
    # repeated tags
    ("<search>a</search><search>b</search>", ("<search>a</search>", False)),
    ("<answer>a</answer></answer>", ("<answer>a</answer>", False)),
    # neither / incomplete blocks
    ("I think the answer is Paris", ("", False)),
    ("<search>unclosed", ("", False)),
    ("</search>a<search>", ("", False)),
    # multi-line content is kept (stripped), case preserved
    ("<answer>\nNew York City\n</answer>", ("<answer>New York City</answer>", True)),
])
def test_searchqa_projection(text, expected):
    assert project_action("searchqa", text) == expected


def test_searchqa_mismatched_close_is_not_a_block():
    assert project_action("searchqa", "<search>a</answer>") == ("", False)
