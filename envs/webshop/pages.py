"""WebShop's page flow and action grammar as a pure state machine, rendered in simple text mode.

Pages: search -> results (10 per page, at most 50) -> item (options, description, features, buy now)
-> done. Actions: `search[query]` (search page only) and `click[x]` for a clickable x shown on the
page, case-insensitive. Text follows WebShop's `observation_mode="text"`: the visible strings of the
page joined by " [SEP] " (e.g. "WebShop [SEP] Instruction: [SEP] ... [SEP] Search"). As in that
mode, chosen options are not highlighted; the agent's own history shows what it clicked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from envs.webshop.catalog import Product
from envs.webshop.search import PAGE_SIZE

SEP = " [SEP] "
SEARCH_PLACEHOLDER = "search[<your query>]"
BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE = "back to search", "next >", "< prev"
DESCRIPTION, FEATURES, BUY_NOW = "description", "features", "buy now"
_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class PageState:
    kind: str = "search"  # search | results | item | description | features | done
    query: str = ""
    results: tuple[str, ...] = ()
    page: int = 1
    asin: str | None = None
    options: dict = field(default_factory=dict)  # dim -> chosen value on the current item
    score: float | None = None

    @property
    def num_pages(self) -> int:
        return max(1, -(-len(self.results) // PAGE_SIZE))

    def page_asins(self) -> tuple[str, ...]:
        return self.results[(self.page - 1) * PAGE_SIZE: self.page * PAGE_SIZE]


def parse_action(action: str) -> tuple[str, str] | None:
    """`search[q]` / `click[x]` -> (kind, argument lower-cased and stripped), else None."""
    m = _ACTION.match(action or "")
    if not m:
        return None
    return m.group(1).lower(), " ".join(m.group(2).split()).lower()


def clickables(state: PageState, catalog: dict[str, Product]) -> list[str]:
    """Clickable strings of the page in display order (lower-cased, as WebShop exposes them)."""
    if state.kind == "results":
        out = [BACK_TO_SEARCH]
        if state.page > 1:
            out.append(PREV_PAGE)
        if state.page < state.num_pages:
            out.append(NEXT_PAGE)
        return out + [a.lower() for a in state.page_asins()]
    if state.kind == "item":
        p = catalog[state.asin]
        values = [v.lower() for vals in p.options.values() for v in vals]
        return [BACK_TO_SEARCH, PREV_PAGE, *values, DESCRIPTION, FEATURES, BUY_NOW]
    if state.kind in ("description", "features"):
        return [BACK_TO_SEARCH, PREV_PAGE]
    return []


def admissible_actions(state: PageState, catalog: dict[str, Product]) -> list[str]:
    head = [SEARCH_PLACEHOLDER] if state.kind == "search" else []
    return head + [f"click[{c}]" for c in clickables(state, catalog)]


def render(state: PageState, instruction: str, catalog: dict[str, Product]) -> str:
    head = ["Instruction:", instruction]
    if state.kind == "search":
        return SEP.join(["WebShop", *head, "Search"])
    if state.kind == "done":
        score = str(round(state.score, 4))
        return SEP.join(["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", score])
    parts = [*head, "Back to Search"]
    if state.kind == "results":
        parts.append(f"Page {state.page} (Total results: {len(state.results)})")
        if state.page > 1:
            parts.append("< Prev")
        if state.page < state.num_pages:
            parts.append("Next >")
        for asin in state.page_asins():
            p = catalog[asin]
            parts += [asin, p.title, f"${p.price:.2f}"]
        return SEP.join(parts)
    p = catalog[state.asin]
    parts.append("< Prev")
    if state.kind == "item":
        for dim, values in p.options.items():
            parts += [dim, *values]
        parts += [p.title, f"Price: ${p.price:.2f}", "Rating: N.A.", "Description", "Features", "Buy Now"]
    elif state.kind == "description":
        parts.append(p.description)
    else:
        parts += list(p.features)
    return SEP.join(parts)


def transition(state: PageState, action: str, catalog: dict[str, Product], search_fn) -> tuple[PageState, str | None]:
    """Apply one action. Returns (new state, None) or (unchanged state, reason it is invalid).

    Buying returns a "done" state with score None; the env fills in the score.
    """
    parsed = parse_action(action)
    if parsed is None:
        return state, "actions look like search[keywords] or click[button]"
    kind, arg = parsed
    if state.kind == "done":
        return state, "the episode is over"
    if kind == "search":
        if state.kind != "search":
            return state, "there is no search bar on this page; click[back to search] first"
        if not arg or arg == "<your query>":
            return state, "search[...] needs keywords"
        return PageState(kind="results", query=arg, results=search_fn(arg)), None
    if arg not in clickables(state, catalog):
        return state, f"'{arg}' is not clickable on this page"
    if arg == BACK_TO_SEARCH:
        return PageState(), None
    if state.kind == "results":
        if arg == NEXT_PAGE:
            return replace(state, page=state.page + 1), None
        if arg == PREV_PAGE:
            return replace(state, page=state.page - 1), None
        return replace(state, kind="item", asin=arg.upper(), options={}), None
    if state.kind == "item":
        if arg == PREV_PAGE:
            return replace(state, kind="results", asin=None, options={}), None
        if arg in (DESCRIPTION, FEATURES):
            return replace(state, kind=arg), None
        if arg == BUY_NOW:
            return replace(state, kind="done"), None
        for dim, values in catalog[state.asin].options.items():
            if arg in (v.lower() for v in values):
                value = next(v for v in values if v.lower() == arg)
                return replace(state, options={**state.options, dim: value}), None
    if state.kind in ("description", "features") and arg == PREV_PAGE:
        return replace(state, kind="item"), None
    return state, f"'{arg}' cannot be used here"  # unreachable with the clickables above
