"""opid-rllib: OPID (On-Policy Skill Distillation) as a Ray RLlib algorithm.

`import opid_rllib` registers "OPID" with Ray Tune, so `tune.Tuner("OPID", param_space=config)` works.
"""

__version__ = "0.1.0"


def __getattr__(name):  # lazy: importing the package must not import Ray/torch
    if name in ("OPID", "OPIDConfig"):
        from opid_rllib import algorithm

        return getattr(algorithm, name)
    raise AttributeError(name)


def register() -> None:
    """Register the "OPID" trainable with Tune (done on import of opid_rllib.algorithm)."""
    from opid_rllib import algorithm  # noqa: F401


__all__ = ["OPID", "OPIDConfig", "register"]
