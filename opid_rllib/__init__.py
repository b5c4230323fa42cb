"""opid-rllib: OPID (On-Policy Skill Distillation) as a Ray RLlib algorithm.

`import opid_rllib` makes "OPID" a Tune trainable, so `tune.Tuner("OPID", param_space=config)` works,
without importing Ray or torch: see `_add_to_rllib_registry`.
"""

import importlib.abc
import sys

__version__ = "0.1.0"

# Tune resolves a trainable name it does not know by calling `ray.rllib._register_all()`, which
# registers every entry of this module's `ALGORITHMS` dict (name -> importer) in the current Ray
# session. An "OPID" entry there is found on every lookup, in every session (Tune's own registry
# is per Ray session and is wiped by `ray.shutdown()`), and it imports OPID only when asked.
_RLLIB_REGISTRY = "ray.rllib.algorithms.registry"


def _import_opid():
    from opid_rllib.algorithm import OPID, OPIDConfig

    return OPID, OPIDConfig()


def _add_to_rllib_registry(module) -> None:
    module.ALGORITHMS.setdefault("OPID", _import_opid)


class _RegistryHook(importlib.abc.MetaPathFinder):
    """Adds the entry right after RLlib's registry module is imported (that import costs ~5 s and
    pulls in torch, so `import opid_rllib` must not do it itself)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _RLLIB_REGISTRY:
            return None
        spec = None
        for finder in list(sys.meta_path):  # whichever finder would have found it without us
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None:
            return None
        spec.loader = _AfterExecLoader(spec.loader)
        return spec


class _AfterExecLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _remove_hook()
        _add_to_rllib_registry(module)

    def __getattr__(self, name):  # get_source, get_filename, ... for tracebacks and inspect
        return getattr(self._loader, name)


def _remove_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RegistryHook)]


if _RLLIB_REGISTRY in sys.modules:
    _add_to_rllib_registry(sys.modules[_RLLIB_REGISTRY])
elif not any(isinstance(f, _RegistryHook) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegistryHook())


def __getattr__(name):  # lazy: importing the package must not import Ray/torch
    if name in ("OPID", "OPIDConfig"):
        from opid_rllib import algorithm

        return getattr(algorithm, name)
    raise AttributeError(name)


__all__ = ["OPID", "OPIDConfig"]
