"""Compatibility names: routing moved to opid_rllib/prompts/skills.py (which skill slot a step fills, beside the
slots themselves, so the learner's corridor reads one file for it) and the shuffled-skills control to
opid_rllib/experimental/controls.py. New code imports from there."""

from opid_rllib.experimental.controls import shuffled_skill_donors
from opid_rllib.prompts.skills import ROUTING_MODES, Route, route, route_label, route_trajectory, usable_skills

__all__ = ["ROUTING_MODES", "Route", "route", "route_label", "route_trajectory", "shuffled_skill_donors",
           "usable_skills"]
