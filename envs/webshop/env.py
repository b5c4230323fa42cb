"""opid/WebShop-v0: WebShop as a TextEnv, offline (built-in catalog, default) or against a real server.

Offline: catalog, instructions and splits come from `catalog.build_world(seed)`; pages and actions
follow `pages.py`; buying scores the product with `reward.get_reward` (WebShop's formula). The env
reward is the reference's binarisation, 10.0 when the score is exactly 1.0 else 0.0; the graded
score stays in info["score"]. task_type is the target's category.

Real server (`server_url="http://host:3000"`): a running WebShop Flask app, driven over HTTP by
`client.WebShopClient`; task ids are its fixed sessions "fixed_<goal index>".
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Sequence

from envs.base import TextEnv, setting
from envs.webshop.catalog import Goal, Product, World, build_world
from envs.webshop.client import WebShopClient
from envs.webshop.pages import (BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE, SEP, PageState,
                                admissible_actions, render, transition)
from envs.webshop.reward import get_reward
from envs.webshop.search import PAGE_SIZE, SearchEngine

SUCCESS_REWARD = 10.0
# WebShop's own goal split convention (web_agent_text_env users: test = goals 0-499, eval 500-1499,
# train 1500+). The upper train bound depends on the server's goal file; override with server_task_range.
SERVER_TASK_RANGES = {"test": (0, 500), "valid": (500, 1500), "train": (1500, 6000)}


@lru_cache(maxsize=4)
def get_engine(seed: int = 0) -> SearchEngine:
    """One index per catalog per process: all env copies share it (and its query cache)."""
    return SearchEngine(build_world(seed).products)


def expert_plan(state: PageState, goal: Goal, engine: SearchEngine, catalog: dict[str, Product]) -> list[str]:
    """Shortest plan from `state`: search the instruction's key words (or the target's title when the
    key words miss it), page to the target, open it, click the required options, buy."""
    target = goal.asin
    query = goal.query
    results = engine.search(query)
    if target not in results:
        query = catalog[target].title.lower()
        results = engine.search(query)

    def item_tail(chosen: dict) -> list[str]:
        return [f"click[{v.lower()}]" for d, v in goal.options.items() if chosen.get(d) != v] + [f"click[{BUY_NOW}]"]

    def from_results(res: Sequence[str], page: int) -> list[str]:
        tp = res.index(target) // PAGE_SIZE + 1
        moves = [f"click[{NEXT_PAGE}]"] * (tp - page) + [f"click[{PREV_PAGE}]"] * (page - tp)
        return moves + [f"click[{target.lower()}]"] + item_tail({})

    fresh = [f"search[{query}]"] + from_results(results, 1)
    if state.kind == "done":
        return []
    if state.kind == "search":
        return fresh
    cands = []
    here = target in state.results
    if state.kind == "results" and here:
        cands.append(from_results(state.results, state.page))
    elif state.kind == "item":
        if state.asin == target:
            cands.append(item_tail(state.options))
        elif here:
            cands.append([f"click[{PREV_PAGE}]"] + from_results(state.results, state.page))
    elif state.kind in ("description", "features"):
        if state.asin == target:
            cands.append([f"click[{PREV_PAGE}]"] + item_tail(state.options))
        elif here:
            cands.append([f"click[{PREV_PAGE}]"] * 2 + from_results(state.results, state.page))
    cands.append([f"click[{BACK_TO_SEARCH}]"] + fresh)
    return min(cands, key=len)


class WebShopEnv(TextEnv):
    """WebShop shopping tasks: search, browse, pick options, buy. One task = one instruction."""

    env_name = "webshop"
    default_max_steps = 15

    def __init__(self, split: str = "train", max_steps: int | None = None, seed: int = 0,
                 server_url: str | None = None, server_timeout: float = 10.0,
                 server_task_range: tuple[int, int] | None = None, expert: bool = True, **kwargs: Any):
        super().__init__(split=split, max_steps=max_steps, **kwargs)
        if isinstance(expert, str) and expert in ("handcoded", "none"):  # ALFWorld's names for the two
            expert = expert == "handcoded"
        if not isinstance(expert, bool):
            raise ValueError(f"expert={expert!r}: choose True/False (or 'handcoded'/'none'); WebShop has one expert")
        self.expert = expert
        seed = setting("seed", seed, int)
        server_timeout = setting("server_timeout", server_timeout, float)
        if server_task_range is not None:
            if not (isinstance(server_task_range, (list, tuple)) and len(server_task_range) == 2):
                raise ValueError(f"server_task_range={server_task_range!r}: give (start, stop)")
            server_task_range = (setting("server_task_range[0]", server_task_range[0], int),
                                 setting("server_task_range[1]", server_task_range[1], int))
        self._client: WebShopClient | None = None
        self._world: World | None = None
        if server_url:
            rng = server_task_range or SERVER_TASK_RANGES.get(split)
            if rng is None:
                raise ValueError(f"split={split!r}: no server task range; pass server_task_range=(start, stop)")
            self._server_ids = [f"fixed_{i}" for i in range(*rng)]
            self._client = WebShopClient(server_url, timeout=server_timeout)
        else:
            self._world = build_world(int(seed))
            if split not in self._world.splits:
                raise ValueError(f"split={split!r}: unknown; choose one of {sorted(self._world.splits)}")
            self._engine = get_engine(int(seed))
            self._catalog = self._world.by_asin
        self._state = PageState()
        self._goal: Goal | None = None
        self._score = 0.0

    def task_ids(self) -> Sequence[str]:
        return self._server_ids if self._client else self._world.splits[self.split]

    # ---- offline -----------------------------------------------------------------------
    def _info(self, action_valid: bool = True) -> dict[str, Any]:
        g = self._goal
        won = self._state.kind == "done" and self._score == 1.0
        info = {"task_id": self._task_id, "task": g.instruction, "task_type": g.category,
                "admissible_actions": admissible_actions(self._state, self._catalog), "won": won,
                "action_valid": action_valid, "score": self._score, "page": self._state.kind,
                "ground_truth": {"asin": g.asin, "category": g.category, "product_type": g.product_type,
                                 "title": self._catalog[g.asin].title, "attributes": list(g.attributes),
                                 "options": dict(g.options), "price_upper": g.price_upper,
                                 "price": self._catalog[g.asin].price}}
        if self.expert:
            info["expert_actions"] = expert_plan(self._state, g, self._engine, self._catalog)
        return info

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        if self._client:
            return self._server_reset(task_id)
        if task_id not in self._world.goals:
            raise ValueError(f"task_id={task_id!r}: unknown WebShop task (ids look like 'webshop-test-0001')")
        self._goal = self._world.goals[task_id]
        self._state, self._score = PageState(), 0.0
        return render(self._state, self._goal.instruction, self._catalog), self._info()

    def _step_task(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._client:
            return self._server_step(action)
        new, err = transition(self._state, action, self._catalog, self._engine.search)
        if err:
            page = render(self._state, self._goal.instruction, self._catalog)
            return f"Invalid action: {err}.{SEP}{page}", 0.0, False, self._info(action_valid=False)
        reward, done = 0.0, False
        if new.kind == "done":
            self._score, details = get_reward(self._catalog[new.asin], self._goal, new.options)
            new = replace(new, score=self._score)
            reward, done = (SUCCESS_REWARD if self._score == 1.0 else 0.0), True
        self._state = new
        info = self._info()
        if done:
            info["purchase"] = {"asin": new.asin, "options": dict(new.options), **details}
        return render(new, self._goal.instruction, self._catalog), reward, done, info

    # ---- real server -------------------------------------------------------------------
    def _server_info(self, action_valid: bool = True) -> dict[str, Any]:
        page = self._client.page
        score = page.score if page.score is not None else 0.0
        return {"task_id": self._task_id, "task": self._client.instruction, "task_type": "webshop",
                "admissible_actions": page.admissible_actions(), "won": score == 1.0,
                "action_valid": action_valid, "score": score, "page": page.kind}

    def _server_reset(self, task_id: str) -> tuple[str, dict[str, Any]]:
        page = self._client.reset(task_id)
        return page.text, self._server_info()

    def _server_step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        page, err = self._client.step(action)
        if err:
            return f"Invalid action: {err}.{SEP}{page.text}", 0.0, False, self._server_info(False)
        done = page.score is not None
        reward = SUCCESS_REWARD if done and page.score == 1.0 else 0.0
        return page.text, reward, done, self._server_info()
