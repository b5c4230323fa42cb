"""Golden strings for the per-step prompts, the skill slots and the chat wrapping.

The goldens are literal on purpose: any wording change must be a deliberate test edit, because
the tiny tokenizer's corpus and the reference comparisons depend on it.
"""

from __future__ import annotations

import pytest

from opid_rllib.prompts import build_prompt, canonical_env_name, chat_prompt, insert_skills, truncate_left
from opid_rllib.prompts.skills import STEP_ANCHOR, TASK_LINE_PATTERNS

TURN_ACT = (
    "Now it's your turn to take an action. First reason step by step about the current situation and "
    "what your goal still needs; this reasoning MUST be written inside <think> </think> tags. Then choose "
    "exactly one {kind} action for this step and write it inside <action> </action> tags."
)
TURN_SEARCH = (
    "Now it's your turn to respond for the current step. First reason about what you already know and what "
    "is still missing; this reasoning MUST be written inside <think> </think> tags. If you need more "
    "knowledge, write a search query inside <search> </search> tags and the search engine will return the "
    "top results between <information> and </information>. If you have enough knowledge, give the final "
    "answer, without explanation, inside <answer> </answer> tags, for example <answer> Beijing </answer>. "
    "Output exactly one <search> block or one <answer> block, never both."
)
ALF_INTRO = "You are an expert agent acting in the ALFRED Embodied Environment, a simulated household."
WS_INTRO = "You are an expert autonomous shopping agent acting in the WebShop e-commerce environment."
SQ_INTRO = ("You are an expert agent that answers the given question step by step, calling a search "
            "engine whenever you need facts you are not sure about.")

OBS0 = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
        "you see a cabinet 1, a fridge 1.\n\nYour task is to: put a cool apple in fridge.")
ADM = ["go to cabinet 1", "go to fridge 1", "help", "inventory", "look"]
ADM_TXT = "['go to cabinet 1', 'go to fridge 1', 'inventory', 'look']"
HIST = [(OBS0, "go to cabinet 1"),
        ("You arrive at cabinet 1. The cabinet 1 is closed.", "open cabinet 1"),
        ("You open the cabinet 1. In it, you see a apple 1.", "take apple 1 from cabinet 1")]
TASK = "put a cool apple in fridge"

ALF0 = (
    ALF_INTRO + "\n"
    "Your current observation is: " + OBS0 + "\n"
    "The admissible actions in the current state are: " + ADM_TXT + ".\n\n" + TURN_ACT.format(kind="admissible")
)
ALF3 = (
    ALF_INTRO + " Your task is to: put a cool apple in fridge\n"
    "Before this step you already took 3 steps. Here are the last 2 observations and the actions you took:\n"
    "[Observation 2: 'You arrive at cabinet 1. The cabinet 1 is closed.', Action 2: 'open cabinet 1']\n"
    "[Observation 3: 'You open the cabinet 1. In it, you see a apple 1.', Action 3: 'take apple 1 from cabinet 1']\n"
    "You are now at step 4 and your current observation is: You pick up the apple 1 from the cabinet 1.\n"
    "The admissible actions in the current state are: " + ADM_TXT + ".\n\n" + TURN_ACT.format(kind="admissible")
)


def alf(step=3, history=HIST, history_length=2, obs="You pick up the apple 1 from the cabinet 1."):
    return build_prompt("alfworld", task=TASK, obs=obs, history=history, admissible=ADM, step=step,
                        history_length=history_length)


# ---- ALFWorld ---------------------------------------------------------------------------------
def test_alfworld_step0_golden():
    assert alf(step=0, history=[], history_length=5, obs=OBS0) == ALF0


def test_alfworld_later_step_golden():
    assert alf() == ALF3


def test_alfworld_history_window_and_numbering():
    full = alf(history_length=10)
    assert "Here are the last 3 observations" in full and "[Observation 1: '-= Welcome" in full
    one = alf(history_length=1)
    assert "Here are the last observation and the action you took:\n[Observation 3:" in one
    assert "Observation 2" not in one


@pytest.mark.parametrize("hl", [0, -1])
def test_alfworld_no_history(hl):
    p = alf(history_length=hl)
    assert "Observation" not in p
    assert "Before this step you already took 3 steps. You are now at step 4 and your current" in p


def test_alfworld_step0_adds_task_line_when_obs_lacks_it():
    p = alf(step=0, history=[], obs="You are in the middle of a room.")
    assert "You are in the middle of a room.\nYour task is to: put a cool apple in fridge\n" in p


def test_prompts_are_deterministic():
    assert alf() == alf()
    assert build_prompt("alfworld", task=TASK, obs=OBS0) == build_prompt("ALFWorld", task=TASK, obs=OBS0)


# ---- WebShop ----------------------------------------------------------------------------------
def test_webshop_goldens():
    task = "i need a red shirt under 30 dollars"
    p0 = build_prompt("webshop", task=task, obs="WebShop [SEP] Search", admissible=["search[<your query>]"],
                      step=0, history_length=2)
    assert p0 == (
        WS_INTRO + "\nYour task is to: i need a red shirt under 30 dollars\n"
        "Your current observation is: WebShop [SEP] Search\n"
        "The available actions in the current state are: ['search[<your query>]'].\n\n"
        + TURN_ACT.format(kind="available"))
    p1 = build_prompt("webshop", task=task, obs="Results [SEP] B01 [SEP] red shirt [SEP] $19.99",
                      history=[("WebShop [SEP] Search", "search[red shirt]")],
                      admissible=["click[b01]", "click[next >]"], step=1, history_length=2)
    assert p1 == (
        WS_INTRO + "\nYour task is to: i need a red shirt under 30 dollars\n"
        "Before this step you already took 1 step. Here are the last observation and the action you took:\n"
        "[Observation 1: 'WebShop [SEP] Search', Action 1: 'search[red shirt]']\n"
        "You are now at step 2 and your current observation is: Results [SEP] B01 [SEP] red shirt [SEP] $19.99\n"
        "The available actions in the current state are: ['click[b01]', 'click[next >]'].\n\n"
        + TURN_ACT.format(kind="available"))


# ---- SearchQA ---------------------------------------------------------------------------------
SQ_HIST = [("who wrote hamlet?", "<search>hamlet author</search>"),
           ("Doc 1: Hamlet is a play", "<search>hamlet playwright</search>")]


def test_searchqa_goldens():
    p0 = build_prompt("searchqa", task="who wrote hamlet?", obs="who wrote hamlet?", step=0, history_length=4)
    assert p0 == SQ_INTRO + "\nYour question: who wrote hamlet?\n\n" + TURN_SEARCH
    p2 = build_prompt("searchqa", task="who wrote hamlet?", obs="Doc 2: Shakespeare", history=SQ_HIST,
                      step=2, history_length=4)
    assert p2 == (
        SQ_INTRO + "\nYour question: who wrote hamlet?\n"
        "Before this step you already took 2 steps. Here are your last 2 actions, each followed by the "
        "information it returned:\n"
        "<search>hamlet author</search>\n<information>Doc 1: Hamlet is a play</information>\n"
        "<search>hamlet playwright</search>\n<information>Doc 2: Shakespeare</information>\n"
        "You are now at step 3.\n\n" + TURN_SEARCH)


def test_searchqa_window_no_double_wrap_and_invalid_action():
    hist = [("q", ""), ("<information>Doc A</information>", "<search>x</search>")]
    p = build_prompt("searchqa", task="q", obs="<information>Doc B</information>", history=hist, step=2,
                     history_length=1)
    assert "Here is your last action, followed by the information it returned:\n" \
           "<search>x</search>\n<information>Doc B</information>\nYou are now at step 3." in p
    p = build_prompt("searchqa", task="q", obs="Doc A", history=hist[:1], step=1, history_length=3)
    assert "(no valid search or answer)\n<information>Doc A</information>" in p


def test_searchqa_no_history_shows_current_observation():
    p = build_prompt("searchqa", task="q?", obs="Doc 2: Shakespeare", history=SQ_HIST, step=2, history_length=0)
    assert "Before this step you already took 2 steps. Your current observation is: Doc 2: Shakespeare\n" in p
    assert "<search>hamlet" not in p


def test_env_name_aliases_and_unknown():
    assert canonical_env_name("opid/ALFWorld-v0") == "alfworld"
    assert canonical_env_name("search_qa") == "searchqa"
    with pytest.raises(ValueError, match="no prompt template"):
        build_prompt("sciworld", task="t", obs="o")


# ---- skill slots ------------------------------------------------------------------------------
EP = "**Episode-Level Skill**\n" \
     "Consult this episode-level skill, learned from earlier attempts at tasks like this one, whenever you " \
     "choose an action in the current episode:\n[Find the apple first, then cool it in the fridge.]"
ST = "**Critical-Step Skill**\nApply this critical-step skill to the decision at the current step only:\n" \
     "[You hold the apple: go to fridge 1 now.]"
EP_SKILL, ST_SKILL = "Find the apple first, then cool it in the fridge.", " You hold the apple: go to fridge 1 now. "


def test_skills_neither_is_identity():
    assert insert_skills(ALF3) == ALF3
    assert insert_skills(ALF3, episode_skill="", step_skill="  ") == ALF3


def test_episode_skill_after_task_line():
    line1, rest = ALF3.split("\n", 1)
    assert insert_skills(ALF3, episode_skill=EP_SKILL) == line1 + "\n\n" + EP + "\n\n" + rest


def test_episode_skill_after_task_line_inside_step0_observation():
    p = insert_skills(ALF0, episode_skill=EP_SKILL)
    assert "Your task is to: put a cool apple in fridge.\n\n" + EP + "\n\nThe admissible actions" in p


def test_step_skill_before_turn_anchor():
    head, tail = ALF3.split("\n\nNow it's your turn", 1)
    assert insert_skills(ALF3, step_skill=ST_SKILL) == head + "\n\n" + ST + "\n\nNow it's your turn" + tail


def test_both_skills_full_golden():
    line1, rest = ALF3.split("\n", 1)
    head, tail = rest.split("\n\nNow it's your turn", 1)
    expected = line1 + "\n\n" + EP + "\n\n" + head + "\n\n" + ST + "\n\nNow it's your turn" + tail
    assert insert_skills(ALF3, episode_skill=EP_SKILL, step_skill=ST_SKILL) == expected


def test_search_step0_both_skills_between_question_and_turn():
    p = build_prompt("searchqa", task="who wrote hamlet?", obs="", step=0)
    out = insert_skills(p, episode_skill="E", step_skill="S")
    assert "Your question: who wrote hamlet?\n\n**Episode-Level Skill**\n" in out
    assert out.index("**Episode-Level Skill**") < out.index("**Critical-Step Skill**") < out.index(STEP_ANCHOR)
    assert "[S]\n\nNow it's your turn" in out


def test_episode_fallback_before_turn_anchor_when_no_task_line():
    prompt = "Intro line.\nObservation: x\n\nNow it's your turn to act."
    assert insert_skills(prompt, episode_skill="E") == \
        "Intro line.\nObservation: x\n\n" + EP.split("[")[0] + "[E]\n\nNow it's your turn to act."
    both = insert_skills(prompt, episode_skill="E", step_skill="S")
    assert both.index("[E]") < both.index("[S]") < both.index("Now it's your turn")


def test_append_when_no_anchor_at_all():
    out = insert_skills("just text", episode_skill="E", step_skill="S")
    assert out.startswith("just text\n\n**Episode-Level Skill**") and out.endswith("[E]\n\n" + ST.split("[")[0] + "[S]")


@pytest.mark.parametrize("line", ["Your task is: buy milk", "Your current task is: buy milk", "Your question: why?"])
def test_other_task_line_patterns(line):
    out = insert_skills(f"Intro\n{line}\nmore\n\nNow it's your turn.", episode_skill="E")
    assert f"{line}\n\n**Episode-Level Skill**" in out
    assert any(p.search(line) for p in TASK_LINE_PATTERNS)


def test_skill_text_cannot_hijack_slots():
    # a skill mentioning the anchors must not move the other section
    out = insert_skills("no task here\n\nNow it's your turn.", episode_skill="Your task is to: x",
                        step_skill="Now it's your turn is a phrase")
    assert out.index("**Episode-Level Skill**") < out.index("**Critical-Step Skill**")
    assert out.endswith("\n\nNow it's your turn.")


# ---- chat + truncation ------------------------------------------------------------------------
class _FakeTok:
    def __init__(self, template):
        self.chat_template = template
        self.calls = []

    def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kw):
        self.calls.append(kw)
        assert tokenize is False and add_generation_prompt is True
        return "<" + messages[0]["content"] + ">"


def test_chat_prompt_passes_enable_thinking_only_when_supported():
    q3 = _FakeTok("... enable_thinking ...")
    assert chat_prompt(q3, "hi", enable_thinking=True) == "<hi>" and q3.calls == [{"enable_thinking": True}]
    plain = _FakeTok("{{ messages }}")
    chat_prompt(plain, "hi")
    assert plain.calls == [{}]
    assert chat_prompt(_FakeTok(None), "hi") == "hi\n"


def test_chat_prompt_with_tiny_tokenizer(tmp_path):
    from opid_rllib.models import build_tiny_model, load_tokenizer

    tok = load_tokenizer(build_tiny_model(tmp_path / "tiny"))
    assert chat_prompt(tok, "go") == "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert chat_prompt(tok, "go", enable_thinking=True) == "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n"


def test_truncate_left():
    assert truncate_left([1, 2, 3], 5) == ([1, 2, 3], False)
    assert truncate_left([1, 2, 3], 3) == ([1, 2, 3], False)
    assert truncate_left(range(10), 4) == ([6, 7, 8, 9], True)
    with pytest.raises(ValueError):
        truncate_left([1], 0)
