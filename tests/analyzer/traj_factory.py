"""Hand-made ALFWorld-like trajectories for the analyzer tests."""

from __future__ import annotations

from opid_rllib.analyzer import StepRecord, TrajectoryRecord

TASK = "put a cool mug in shelf."
ADM = ["go to countertop 1", "go to fridge 1", "go to shelf 1", "go to cabinet 1", "look", "inventory"]


def _resp(action: str) -> str:
    return f"<think>I should {action}.</think><action>{action}</action>"


def make_traj(rows, success, env_name="alfworld", task=TASK, ground_truth=None, gamma=0.95):
    """rows: (action, next-observation, expert_next | None, valid) tuples."""
    steps, obs = [], f"You are in the middle of a room. Your task is to: {task}"
    final = 10.0 if success else 0.0
    n = len(rows)
    for i, (action, next_obs, expert, valid) in enumerate(rows):
        reward = final if i == n - 1 else 0.0
        steps.append(StepRecord(
            index=i, observation=obs, response=_resp(action) if valid else f"I will {action}",
            action=action, action_valid=valid, reward=reward, ret=final * gamma ** (n - 1 - i),
            admissible_actions=list(ADM) + [action] * (valid and not action.startswith("fly")),
            expert_actions=[expert, "take mug 1 from countertop 1"] if expert else [],
        ))
        obs = next_obs
    return TrajectoryRecord(traj_id="t-1", group_id="g-1", task_id="alfworld/cool-mug-1", task=task,
                            task_type="pick_cool_then_place_in_recep", env_name=env_name,
                            success=success, episode_reward=final if success is not None else 0.0,
                            steps=steps, ground_truth=ground_truth or {})


SUCCESS_ROWS = [
    ("look", "You are in the middle of a room.", "go to countertop 1", True),
    ("go to cabinet 1", "The cabinet 1 is closed.", "go to countertop 1", True),
    ("open cabinet 1", "You open the cabinet 1. It is empty.", "go to countertop 1", True),
    ("close cabinet 1", "You close the cabinet 1.", "go to countertop 1", True),
    ("go to countertop 1", "On the countertop 1, you see a mug 1.", "go to countertop 1", True),
    ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1.",
     "take mug 1 from countertop 1", True),
    ("go to fridge 1", "The fridge 1 is closed.", "go to fridge 1", True),
    ("cool mug 1 with fridge 1", "You cool the mug 1 using the fridge 1.", "cool mug 1 with fridge 1", True),
    ("go to shelf 1", "On the shelf 1, you see nothing.", "go to shelf 1", True),
    ("move mug 1 to shelf 1", "You move the mug 1 to the shelf 1.", "move mug 1 to shelf 1", True),
]

FAILURE_ROWS = [
    ("go to countertop 1", "On the countertop 1, you see a mug 1.", "go to countertop 1", True),
    ("go to cabinet 1", "The cabinet 1 is closed.", "take mug 1 from countertop 1", True),
    ("go to countertop 1", "On the countertop 1, you see a mug 1.", "go to countertop 1", True),
    ("go to cabinet 1", "The cabinet 1 is closed.", "take mug 1 from countertop 1", True),
    ("take the mug", "Nothing happens.", "go to countertop 1", False),
    ("fly to shelf 1", "Nothing happens.", "go to countertop 1", True),
    ("go to cabinet 1", "The cabinet 1 is closed.", "go to countertop 1", True),
]
