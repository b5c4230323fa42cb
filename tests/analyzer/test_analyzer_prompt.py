"""Golden checks on the analysis and retry prompts."""

import re

from traj_factory import FAILURE_ROWS, make_traj

from opid_rllib.analyzer import build_analysis_prompt, build_retry_prompt


def test_analysis_prompt_content(success_traj):
    p = build_analysis_prompt(success_traj, 5)
    assert p.startswith("Analyze the agent episode below and return ONLY valid JSON")
    for piece in ("episode_summary", "episode_skill", "step_skills", "workflow",
                  "at most 5 critical steps", "0-based", "task description",
                  "one short imperative sentence", "exactly three top-level keys",
                  "exactly the keys of step_skills", '"step_skills": {"0":'):
        assert piece in p, piece
    assert "Task: put a cool mug in shelf." in p
    assert "episode_success: success" in p
    assert "Candidate steps: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in p
    s = success_traj.steps[7]
    block = (f"Step 7\nObservation: {s.observation}\nResponse: {s.response}\n"
             f"Return: {s.ret:.6f}\n")
    assert block in p
    assert re.findall(r"^Return: (\S+)$", p, re.M)[-1] == "10.000000"
    assert p.count("\nStep ") == len(success_traj.steps)


def test_outcome_labels_and_k_capped_by_candidates():
    fail = make_traj(FAILURE_ROWS[:2], success=False)
    p = build_analysis_prompt(fail, 5)
    assert "episode_success: failure" in p and "avoidance rules" in p and "core mistake" in p
    assert "at most 2 critical steps" in p          # min(K, #candidates)
    unknown = make_traj(FAILURE_ROWS[:3], success=None)
    p = build_analysis_prompt(unknown, 1)
    assert "episode_success: unknown" in p and "at most 1 critical steps" in p
    assert "either" in p


def test_retry_prompt():
    bad = "x" * 3000 + "TAIL"
    r = build_retry_prompt("ORIGINAL PROMPT", "no JSON object found in the answer", bad)
    assert r.startswith("ORIGINAL PROMPT")
    assert "no JSON object found in the answer" in r
    assert ("x" * 1996 + "TAIL") in r and ("x" * 1997 + "TAIL") not in r   # last 2000 chars only
    # the shape is the first prompt's format example, with descriptions, not "..." that a small model copies back
    assert "only one JSON object" in r and '"episode_skill": "<one reusable skill for this task>"' in r
    assert '"..."' not in r


def test_constrained_schema_admits_what_the_parser_takes_and_nothing_it_refuses():
    """The grammar-level schema must agree with parsing._skill_text: its sentence pattern accepts a skill and
    rejects a copied <placeholder>, a line break, a leading digit or brace; step keys are the trajectory's steps."""
    import re

    from opid_rllib.analyzer.prompt import constrained_schema

    schema = constrained_schema([0, 2, 5])
    assert set(schema["properties"]["step_skills"]["properties"]) == {"0", "2", "5"}
    assert schema["properties"]["step_skills"]["additionalProperties"] is False
    pattern = re.compile(schema["properties"]["episode_skill"]["pattern"])
    for ok in ("Go to the fridge first, then take the apple.", "At this point, open drawer 1."):
        assert pattern.match(ok)
    for bad in ("<advice for step 0>", "Go to the\nfridge.", "12 steps were wasted.", "{'a': 1}", "Go.",
                'Say "hi" now please.'):
        assert not pattern.match(bad), bad
