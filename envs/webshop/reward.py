"""WebShop's purchase score, same structure as the original `get_reward`:

    score = r_type * (n_attr_matched + n_opt_matched + price_ok) / (n_attr + n_opt + 1)

r_type (type match) is 1.0 when the product type, the category or the title nouns agree, reduced to
0.5 when none does, 0.1 when the title shares < 10% of the goal's type nouns and 0.0 when it shares
none. Differences, because our catalog is generated: attribute matching is exact phrase matching
(original: fuzzy token_set_ratio > 85, then a substring check in title/features/description; our text
only ever mentions a product's own attributes, so the two coincide), option matching is exact on the
chosen values (original: fuzzy), and the type words are each product type's nouns instead of spaCy's.
"""

from __future__ import annotations

import re

from envs.webshop.catalog import Goal, Product

_WORD = re.compile(r"[a-z0-9]+")


def _norm(s: str) -> str:
    return " ".join(_WORD.findall(str(s).lower()))


def type_reward(product: Product, goal: Goal) -> dict:
    query_match = product.product_type == goal.product_type
    category_match = product.category == goal.category
    title_words = set(_WORD.findall(product.title.lower()))
    nouns = set(goal.type_nouns)
    title_score = len(nouns & title_words) / len(nouns) if nouns else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(product: Product, goal: Goal) -> int:
    own = {_norm(a) for a in product.attributes}
    text = _norm(product.text())
    return sum(1 for a in goal.attributes if _norm(a) in own or f" {_norm(a)} " in f" {text} ")


def option_matches(chosen: dict, goal: Goal) -> int:
    chosen_values = {_norm(v) for v in chosen.values()}
    return sum(1 for v in goal.options.values() if _norm(v) in chosen_values)


def get_reward(product: Product, goal: Goal, chosen_options: dict) -> tuple[float, dict]:
    """Score in [0, 1] of buying `product` with `chosen_options` (dim -> value) for `goal`."""
    t = type_reward(product, goal)
    n_attr, n_opt = len(goal.attributes), len(goal.options)
    attr_hits = attribute_matches(product, goal)
    opt_hits = option_matches(chosen_options, goal)
    price_ok = product.price <= goal.price_upper
    score = (attr_hits + opt_hits + int(price_ok)) / (n_attr + n_opt + 1) * t["r_type"]
    details = dict(t, r_att=attr_hits / n_attr if n_attr else None,
                   r_option=opt_hits / n_opt if n_opt else None, r_price=price_ok,
                   w_att=n_attr / (n_attr + n_opt + 1), w_option=n_opt / (n_attr + n_opt + 1),
                   w_price=1 / (n_attr + n_opt + 1))
    return float(score), details
