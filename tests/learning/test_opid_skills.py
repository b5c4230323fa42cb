"""OPID's learning test: where the teacher knows what the student cannot see, OPID must learn where GRPO has no signal.

Signpost houses (tuned_examples/signpost_skills.py): no sign shows a room's door, the hindsight analyzer reads it from
the finished episode, and the base copies the door a step skill names, so OPID's self-teacher is the better policy and
nearly every group starts all-failed, where GRPO's outcome advantage is zero. Through the real RLlib Algorithm, Learner
and connectors, OPID as the paper writes it (raw Delta, critical-first routing) must reach the target on seed 0 from a
start where its own batches carry no outcome signal at all: every group of its first iterations failed alike, so GRPO's
advantage was zero on every token and only the skill term moved the policy. GRPO's own curve on the houses is
bench/learning_gap.py's comparison (`python -m bench.learning_gap runs --arms grpo,opid --seeds 0,1,2`: GRPO at most
12.5 % in 30 iterations), not this test's: a GRPO arm here cost a minute of the suite's two cores to show the zero
advantage that this test reads directly. A broken skill path fails it (each break checked in a scratch copy,
docs/LEARNING_GATE.md): Delta's sign flipped, the skill not inserted (Delta 0: GRPO's signal alone, which left OPID at
0 %), step skills routed to the wrong step (the routing check), or the re-score taken with the weights after the update
(the sampler-gap check: the re-score's log pi_old(y | x) must be the sampler's).
"""

import importlib

import pytest

# The base's build (about 3.5 min on a quiet core, cached after) and OPID's run took up to 15 min beside six other
# jobs on 2 cores, at the suite's 900 s limit: this module gets more.
pytestmark = [pytest.mark.learning, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1800)]

# OPID must reach the target within this many iterations (it took 13 on seed 0, bench/results/learning_gap.json).
OPID_ITERS = 18
# OPID's first iterations with no outcome signal (every group all-failed): it took 5 on seed 0.
SILENT_ITERS = 3


@pytest.fixture(scope="module")
def houses():
    import ray

    recipe = importlib.import_module("tuned_examples.signpost_skills")
    base = recipe.warm_start(1.0, log=None)
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield recipe, base
    ray.shutdown()


def test_opid_learns_where_grpo_has_no_signal(houses):
    recipe, base = houses
    opid = recipe.run("opid", base, seed=0, stop_iters=OPID_ITERS, recompute_old_logp=True)
    assert opid["iters_to_target"] is not None, f"OPID did not reach {recipe.TARGET}: {opid['curve']}"
    assert max(opid["curve"][:3]) <= 0.1, opid["curve"]  # it started where the student is: near 0
    # the re-score ran with the sampling weights: its log pi_old(y | x) is the sampler's
    assert opid["max_sampler_gap"] < 1e-3, opid["max_sampler_gap"]
    # critical-first routing: step skills exactly on the steps that left the plan, the episode skill on the others
    assert opid["misrouted_steps"] == 0, opid["skill"]
    # the teacher lowers the door the student took wrongly, and raises the one it took rightly
    first = opid["skill"][0]
    assert first["step_off_plan"] < -0.1 and first.get("episode_on_plan", 0.0) >= 0.0, first
    # GRPO's whole advantage is the outcome term: zero on every token of these iterations' batches (the base's start),
    # so the climb that followed began from the skill term alone
    silent = next((i for i, v in enumerate(opid["outcome_signal"]) if v != 0.0), len(opid["outcome_signal"]))
    assert silent >= SILENT_ITERS, (opid["outcome_signal"], opid["curve"])
