"""Search-R1-style QA env (opid/SearchQA-v0): synthetic offline world, bm25s retriever over HTTP."""

from .env import SearchQAEnv

__all__ = ["SearchQAEnv"]
