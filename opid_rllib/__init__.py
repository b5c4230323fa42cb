"""opid-rllib: OPID (On-Policy Skill Distillation) as a Ray RLlib algorithm."""

__version__ = "0.1.0"
