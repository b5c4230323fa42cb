"""The analyzer's user prompt (one message, no system prompt).

Why this shape: the analyzer sees the whole finished episode (raw observations, the policy's own
responses, discounted returns and the outcome label) and must answer with one JSON object
`{episode_summary, episode_skill, step_skills}`. Step skills are phrased as advice *usable at that
step*, because they are later inserted into that step's prompt for teacher re-scoring.
"""

from __future__ import annotations

from opid_rllib.analyzer.base import TrajectoryRecord

# Only the tail of a bad answer goes back to the model: enough to see what went wrong, bounded.
RETRY_TAIL_CHARS = 2000

_FORMAT_EXAMPLE = """{
  "episode_summary": "<two or three sentences on what happened>",
  "episode_skill": "<one reusable skill for this task>",
  "step_skills": {"0": "<advice for step 0>", "2": "<advice for step 2>"}
}"""


# The answer's shape for servers that take structured output (`response_format`). Not strict:
# step_skills has free keys (step indices), which OpenAI's strict mode cannot express.
ANALYSIS_JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "episode_summary": {"type": "string"},
        "episode_skill": {"type": "string"},
        "step_skills": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["episode_summary", "episode_skill", "step_skills"],
}


# One sentence, as the parser takes it (parsing._skill_text): it starts with a letter and holds no quote, backslash,
# angle bracket (a copied "<placeholder>") or line break. A grammar-constrained server enforces it token by token.
_SENTENCE = {"type": "string", "pattern": r'^[A-Za-z][^"\\<>\n]{9,}$'}


def constrained_schema(candidates: list[int]) -> dict:
    """ANALYSIS_JSON_SCHEMA narrowed for grammar-constrained decoding (llama-cpp-python's json_object + schema):
    sentences only, and step_skills keyed by this trajectory's step indices. SmolLM2-135M, given the loose schema,
    wrote "<advice for step 0>", invented keys and strings with raw line breaks."""
    return {"type": "object", "additionalProperties": False,
            "properties": {"episode_summary": _SENTENCE, "episode_skill": _SENTENCE,
                           "step_skills": {"type": "object", "additionalProperties": False,
                                           "properties": {str(i): _SENTENCE for i in candidates}}},
            "required": ["episode_summary", "episode_skill", "step_skills"]}


def response_format_payload(kind: str, candidates: list[int] | None = None) -> dict | None:
    """The `response_format` request field for a structured-output level (None for "none"); json_object_schema
    carries `constrained_schema(candidates)` when the step indices are given."""
    if kind == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": "trajectory_analysis", "schema": ANALYSIS_JSON_SCHEMA, "strict": False}}
    if kind == "json_object_schema":
        schema = ANALYSIS_JSON_SCHEMA if candidates is None else constrained_schema(candidates)
        return {"type": "json_object", "schema": schema}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def outcome_label(success: bool | None) -> str:
    if success is None:
        return "unknown"
    return "success" if success else "failure"


def _skill_duty(label: str) -> str:
    if label == "success":
        return ("The episode succeeded: distil the workflow that worked - the core decision rule "
                "and the order of actions - so it can be repeated on this task.")
    if label == "failure":
        return ("The episode failed: distil avoidance rules - name the core mistake and the "
                "warning signs that should have triggered a change of course.")
    return ("The outcome is unknown: either distil the workflow that worked or the avoidance "
            "rules for what went wrong, whichever the episode supports better.")


def build_analysis_prompt(traj: TrajectoryRecord, max_step_skills: int) -> str:
    """Prompt asking for ONLY a JSON object; candidates are all step indices."""
    candidates = [s.index for s in traj.steps]
    k = max(0, min(int(max_step_skills), len(candidates)))
    label = outcome_label(traj.success)
    lines = [
        "Analyze the agent episode below and return ONLY valid JSON (no prose, no markdown).",
        "",
        "Your duties:",
        "1. Write a short `episode_summary` of what the agent did and how the episode ended.",
        f"2. Write one `episode_skill`. {_skill_duty(label)}",
        f"3. Pick at most {k} critical steps from the candidate steps and give each a short, "
        "action-oriented decision skill in `step_skills`. Use the whole episode to decide what "
        "should have been done, but phrase every skill as advice the agent can apply at that "
        "step.",
        "",
        "Constraints:",
        "- Step indices are 0-based and must come from the candidate steps.",
        "- Judge progress against the task description.",
        "- Each step skill is one short imperative sentence addressed to the agent, not a "
        "retrospective explanation.",
        "- Output exactly three top-level keys: episode_summary, episode_skill, step_skills.",
        "- The steps you choose are exactly the keys of step_skills.",
        "",
        "Format example:",
        _FORMAT_EXAMPLE,
        "",
        "Episode context:",
        f"Task: {traj.task}",
        f"episode_success: {label}",
        f"Candidate steps: {candidates}",
        "",
        "Trajectory:",
    ]
    for s in traj.steps:
        lines += [
            f"Step {s.index}",
            f"Observation: {s.observation}",
            f"Response: {s.response}",
            f"Return: {float(s.ret):.6f}",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def build_retry_prompt(original: str, error: str, bad_output: str) -> str:
    """Second-chance prompt after an unparsable answer."""
    tail = (bad_output or "")[-RETRY_TAIL_CHARS:]
    return (
        f"{original.rstrip()}\n\n"
        "Your previous answer could not be used.\n"
        f"Parse error: {error}\n"
        "End of your previous answer:\n"
        f"{tail}\n\n"
        "Return only one JSON object of this shape, with your own sentences in place of the <...> descriptions, "
        "and nothing else:\n"
        f"{_FORMAT_EXAMPLE}\n"
    )
