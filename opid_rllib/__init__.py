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
    """(Re-)register the "OPID" trainable with Tune.

    Importing opid_rllib.algorithm registers it; call this again after a `ray.shutdown()` /
    `ray.init()` cycle in the same process, since Tune's registry lives in the Ray session.
    """
    from opid_rllib import algorithm

    algorithm._register_with_tune()


__all__ = ["OPID", "OPIDConfig", "register"]
