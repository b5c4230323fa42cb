"""Search-QA: EM normalisation, action parsing, env episode mechanics (in-process retriever)."""

import json

import pytest

import envs
from envs.base import REQUIRED_INFO_KEYS
from envs.searchqa.client import Hit, format_information, parse_contents
from envs.searchqa.reward import exact_match, normalize_answer, parse_action


@pytest.mark.parametrize("pred, gold, em", [
    ("The Eiffel Tower!", "eiffel tower", 1.0),
    ("  Paris\n ", "paris", 1.0),
    ("an apple", "Apple", 1.0),
    ("A  cat, the dog", "cat dog", 1.0),
    ("1,000", "1000", 1.0),
    ("theatre", "atre", 0.0),          # articles only as whole words
    ("Paris, France", "Paris", 0.0),
    ("Velm River", "the Velm river.", 1.0),
    ("", "paris", 0.0),
])
def test_exact_match_squad_normalisation(pred, gold, em):
    assert exact_match(pred, [gold]) == em


def test_exact_match_any_gold_and_normalize():
    assert exact_match("Velm", ["Velm River", "Velm"]) == 1.0
    assert exact_match("x", []) == 0.0
    assert normalize_answer("  The  Quick-Brown (Fox)  ") == "quickbrown fox"


@pytest.mark.parametrize("text, kind, content", [
    ("<think>need facts</think>\n<search> Kestrel  Dynamics\nfounder </search>", "search", "Kestrel Dynamics founder"),
    ("<answer>Paris</answer>", "answer", "Paris"),
    ("<think>x</think> <SEARCH>upper case</SEARCH> trailing", "search", "upper case"),
    ("I think <answer> 1923 </answer> is it", "answer", "1923"),
])
def test_parse_valid(text, kind, content):
    a = parse_action(text)
    assert (a.valid, a.kind, a.content) == (True, kind, content)


@pytest.mark.parametrize("text, why", [
    ("<search>a</search><answer>b</answer>", "both"),
    ("<search>a</search> then <search>b</search>", "more than once"),
    ("<answer>a</answer><answer>b</answer>", "more than once"),
    ("<search>a</search></search>", "more than once"),
    ("plain text, no tags", "no <search>"),
    ("<search>never closed", "incomplete"),
    ("</answer>backwards<answer>", "incomplete"),
    ("<search>   </search>", "empty"),
    ("<think>only thinking</think>", "no <search>"),
    ("", "no <search>"),
])
def test_parse_invalid(text, why):
    a = parse_action(text)
    assert not a.valid and a.kind is None and why in a.reason


# A Search-R1 retriever reply (return_scores=True) and, written out by hand from Search-R1's
# generation.py (`_passages2string`, then f"\n\n<information>{...strip()}</information>\n\n"),
# the exact bytes it appends to the rollout: the title line keeps its quotes, text newlines and a
# mid-list trailing space survive, only the ends of the whole block are stripped.
SEARCH_R1_REPLY = {"result": [[
    {"document": {"id": "17", "contents": '"Paris (city)"\nParis is the capital of France.\nIt lies on the Seine. '},
     "score": 3.25},
    {"document": {"id": "4", "contents": '"Berlin"\nBerlin is the capital of Germany.  '}, "score": 1.5},
]]}
GOLDEN = ('\n\n<information>Doc 1(Title: "Paris (city)") Paris is the capital of France.\nIt lies on the Seine. \n'
          'Doc 2(Title: "Berlin") Berlin is the capital of Germany.</information>\n\n')


def test_information_format_is_search_r1_byte_for_byte():
    from envs.searchqa.client import _to_hit

    hits = [_to_hit(item) for item in SEARCH_R1_REPLY["result"][0]]
    assert format_information(hits).encode() == GOLDEN.encode()
    assert [h.title for h in hits] == ["Paris (city)", "Berlin"]          # unquoted for title matching
    assert format_information([]) == "\n\n<information></information>\n\n"  # Search-R1 on no hits
    bare = [Hit("0", "A", "text a", 1.0), Hit("1", "B", "text b", 0.5)]   # hits built without contents
    want = "\n\n<information>Doc 1(Title: A) text a\nDoc 2(Title: B) text b</information>\n\n"
    assert format_information(bare) == want
    parsed = parse_contents('"Kestrel Dynamics"\nKestrel Dynamics is a firm.')
    assert parsed == ("Kestrel Dynamics", "Kestrel Dynamics is a firm.")


def test_env_observation_over_http_is_the_golden_bytes(tmp_path):
    """The env's observation after a search through the built-in HTTP server over a user corpus."""
    from opid_rllib.prompts import build_prompt

    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text("".join(json.dumps(item["document"]) + "\n" for item in SEARCH_R1_REPLY["result"][0]))
    env = envs.make("searchqa", split="test", topk=2, corpus_file=str(corpus))
    try:
        q_obs, info = env.reset(options={"task_id": env.task_ids()[0]})
        obs, *_ = env.step("<think>look it up</think><search>capital of France Seine</search>")
    finally:
        env.close()
    assert obs == GOLDEN
    # The per-step prompt shows the block once, framed by single newlines (no doubled blank lines).
    prompt = build_prompt("searchqa", task=info["task"], obs=obs, history=[(q_obs, "<search>capital</search>")],
                          admissible=None, step=1, history_length=2)
    assert "<search>capital</search>\n" + GOLDEN.strip() + "\nYou are now at step 2." in prompt


@pytest.fixture(scope="module")
def env():
    e = envs.make("opid/SearchQA-v0", split="test", retriever="local")
    yield e
    e.close()


def _multi_hop(env):
    return next(t for t in env.task_ids() if env.question(t).task_type == "multi_hop")


def test_reset_info_and_expert_plan(env):
    obs, info = env.reset(options={"task_id": _multi_hop(env)})
    assert set(REQUIRED_INFO_KEYS) <= set(info) and info["action_valid"] and not info["won"]
    assert obs == f"Question: {info['task']}" and info["task_type"] == "multi_hop"
    assert info["admissible_actions"] == ["<search>...</search>", "<answer>...</answer>"]
    gt = info["ground_truth"]
    assert len(gt["supporting_titles"]) == 2 and gt["answers"]
    plan = info["expert_actions"]
    assert [p.split(">")[0] for p in plan] == ["<search", "<search", "<answer"]
    assert plan[-1] == f"<answer>{gt['answers'][0]}</answer>"
    # after the first hop is retrieved, the plan drops its search
    obs, r, term, trunc, info = env.step(plan[0])
    assert obs.startswith('\n\n<information>Doc 1(Title: "') and obs.count("\nDoc ") == 2  # top-3
    assert gt["supporting_titles"][0] in info["retrieved_titles"]
    assert info["expert_actions"] == plan[1:]
    obs, r, term, trunc, info = env.step(f"<think>bridge</think>{plan[1]}")
    obs, r, term, trunc, info = env.step(plan[2])
    assert (r, term, trunc, info["won"], info["step"]) == (1.0, True, False, True, 3)
    assert obs.startswith("Answer submitted")


def test_wrong_answer_and_invalid_actions(env):
    tid = env.task_ids()[0]
    env.reset(options={"task_id": tid})
    obs, r, term, trunc, info = env.step("<search>a</search><answer>b</answer>")
    assert (r, term, trunc, info["action_valid"]) == (0.0, False, False, False)
    assert obs.startswith("Invalid action") and "<search>query</search>" in obs
    obs, r, term, trunc, info = env.step("<answer>definitely wrong</answer>")
    assert (r, term, info["won"], info["action_valid"]) == (0.0, True, False, True)
    obs, r, term, trunc, info = env.step("<answer>again</answer>")  # after the end: inert
    assert term and r == 0.0 and not info["action_valid"]


def test_truncation_at_four_turns(env):
    env.reset(options={"task_id": env.task_ids()[1]})
    assert env.max_steps == 4
    for k in range(1, 5):
        obs, r, term, trunc, info = env.step("<search>river city founded</search>")
        assert not term and r == 0.0 and trunc == (k == 4)
    # an answer on the last allowed turn terminates rather than truncates
    env.reset(options={"task_id": env.task_ids()[1]})
    for _ in range(3):
        env.step("garbage")
    gold = env.question(env.task_ids()[1]).answers[0]
    obs, r, term, trunc, info = env.step(f"<answer>{gold}</answer>")
    assert (r, term, trunc) == (1.0, True, False)


def test_random_reset_and_bad_kwargs():
    e = envs.make("searchqa", split="train", retriever="local")
    _, info = e.reset(seed=3)
    _, info2 = e.reset(seed=3)
    assert info["task_id"] == info2["task_id"] and info["task_id"].startswith("searchqa-train-")
    with pytest.raises(ValueError, match="split"):
        envs.make("searchqa", split="valid")
    with pytest.raises(ValueError, match="exclusive"):
        envs.make("searchqa", retriever="local", retriever_url="http://127.0.0.1:1/retrieve")
    with pytest.raises(KeyError, match="not in searchqa"):
        e.reset(options={"task_id": "nope"})
