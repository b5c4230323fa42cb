"""Offline search-QA world: a synthetic encyclopedia of fictional entities plus questions over it.

Why synthetic: NQ/HotpotQA need wiki-18 (tens of GB) and a dense retriever; offline CI and
small-model runs need a corpus that fits in memory, indexes in a second, and whose answers a
model cannot know from pre-training (the names are invented), so success needs retrieval.

Facts are stored in one direction only (a company passage names its founder, a person passage
never names the companies), so a two-hop question really needs two searches.

Determinism: only `random.Random(seed).random()` is used, whose sequence Python guarantees
across versions; a content hash (`world_sha256`) is pinned in the tests.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import dataclass, field

WORLD_SEED = 20260101
SIZES = {"country": 30, "city": 360, "person": 1500, "company": 600, "invention": 600}
TEST_PER_KIND = 150  # test split: 150 single-hop + 150 multi-hop questions


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """Search-R1 / wiki-18 layout: quoted title line, then the text."""
        return f'"{self.title}"\n{self.text}'


@dataclass(frozen=True)
class Question:
    task_id: str
    question: str
    answers: tuple[str, ...]
    task_type: str                      # "single_hop" | "multi_hop" | source dataset name
    template: str = ""
    support_titles: tuple[str, ...] = ()  # passages that hold the needed facts, in hop order
    expert_queries: tuple[str, ...] = ()  # one query per supporting passage that retrieves it


class _Rng:
    """Stable RNG: everything derives from random(), whose stream Python keeps fixed."""

    def __init__(self, seed: int):
        self._r = random.Random(seed)

    def below(self, n: int) -> int:
        return min(int(self._r.random() * n), n - 1)

    def randint(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def shuffle(self, lst: list) -> None:
        for i in range(len(lst) - 1, 0, -1):
            j = self.below(i + 1)
            lst[i], lst[j] = lst[j], lst[i]


_ONSETS = "b br c d dr f g gr h j k kr l m n p pr r s st t tr v z th sh".split()
_VOWELS = "a e i o u ae io ea".split()
_CODAS = ["", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk"]
PROFESSIONS = ("chemist architect painter engineer astronomer composer botanist cartographer "
               "physician novelist sculptor mathematician geologist linguist photographer "
               "economist poet historian inventor navigator").split()
TOPICS = ("tidal clocks", "glass lenses", "river maps", "folk songs", "crop rotation", "steam valves",
          "star charts", "salt trade", "printing inks", "bridge design", "bird migration", "coin minting")
INDUSTRIES = ("shipbuilding textile publishing mining brewing aviation pharmaceutical railway "
              "software telegraph porcelain insurance").split()
PURPOSES = ("device for measuring rainfall", "machine for weaving rope", "lamp that burns seal oil",
            "instrument for surveying valleys", "engine for pumping water", "press for pressing olives",
            "clock that runs on tides", "kiln for firing glass", "compass for deep mines", "loom for silk")
NOUNS = "loom compass engine lamp kiln press valve gauge clock sextant".split()
LANDMARKS = ("old stone bridge", "copper-roofed cathedral", "floating market", "lighthouse",
             "botanical garden", "clock tower", "salt caverns", "amphitheatre")
COMPANY_SUFFIX = "Dynamics Works Industries Labs Systems Holdings Foundry Company".split()


def _names(rng: _Rng, n: int, used: set[str], min_syl: int = 2, max_syl: int = 3) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        k = rng.randint(min_syl, max_syl)
        s = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(k)) + rng.choice(_CODAS)
        if 4 <= len(s) <= 11 and s not in used:
            used.add(s)
            out.append(s.capitalize())
    return out


@dataclass
class World:
    seed: int
    passages: list[Passage]
    questions: dict[str, list[Question]] = field(default_factory=dict)  # split -> questions

    @functools.cached_property
    def by_title(self) -> dict[str, Passage]:
        return {p.title: p for p in self.passages}

    def sha256(self) -> str:
        """Hash of the passages and the questions (content, not Python objects)."""
        h = hashlib.sha256()
        for p in self.passages:
            h.update(json.dumps([p.id, p.title, p.text]).encode())
        for split in sorted(self.questions):
            for q in self.questions[split]:
                h.update(json.dumps([split, q.task_id, q.question, list(q.answers), q.task_type,
                                     list(q.support_titles), list(q.expert_queries)]).encode())
        return h.hexdigest()


def _entities(rng: _Rng) -> dict:
    used: set[str] = set()
    n = SIZES
    e: dict = {}
    countries = _names(rng, n["country"], used)
    currencies = [c.lower() for c in _names(rng, n["country"], used)]
    e["country"] = [{"name": c, "currency": cur, "language": c + "ic"} for c, cur in zip(countries, currencies)]
    rivers = [r + " River" for r in _names(rng, 150, used)]
    e["city"] = [{"name": c, "country": rng.choice(countries), "river": rng.choice(rivers),
                  "year": rng.randint(700, 1850), "pop": rng.randint(20, 2000) * 1000,
                  "landmark": rng.choice(LANDMARKS)} for c in _names(rng, n["city"], used)]
    capitals: set[str] = set()
    for c in e["country"]:  # capital: a city of that country (move a non-capital city there if none)
        own = [x for x in e["city"] if x["country"] == c["name"]]
        if not own:
            own = [next(x for x in e["city"][rng.below(len(e["city"])):] + e["city"] if x["name"] not in capitals)]
            own[0]["country"] = c["name"]
        c["capital"] = own[0]["name"]
        capitals.add(c["capital"])
    city_names = [c["name"] for c in e["city"]]
    firsts, lasts = _names(rng, 200, used, 1, 2), _names(rng, 1000, used)
    people, seen = [], set()
    while len(people) < n["person"]:
        name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
        if name in seen:
            continue
        seen.add(name)
        people.append({"name": name, "city": rng.choice(city_names), "study": rng.choice(city_names),
                       "year": rng.randint(1800, 1980), "job": rng.choice(PROFESSIONS),
                       "topic": rng.choice(TOPICS)})
    e["person"] = people
    e["company"] = []
    for root in _names(rng, n["company"], used):
        f = rng.choice(people)
        e["company"].append({"name": f"{root} {rng.choice(COMPANY_SUFFIX)}", "founder": f["name"],
                             "year": f["year"] + rng.randint(22, 40), "hq": rng.choice(city_names),
                             "industry": rng.choice(INDUSTRIES)})
    e["invention"] = []
    for root in _names(rng, n["invention"], used):
        p = rng.choice(people)
        e["invention"].append({"name": f"{root} {rng.choice(NOUNS)}", "inventor": p["name"],
                               "year": p["year"] + rng.randint(20, 40), "maker": rng.choice(e["company"])["name"],
                               "purpose": rng.choice(PURPOSES)})
    return e


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _passage_text(kind: str, x: dict, v: int) -> str:
    if kind == "country":
        return (f"{x['name']} is a country whose capital is {x['capital']}. Its currency is the {x['currency']} "
                f"and its official language is {x['language']}.")
    if kind == "city":
        a = f"{x['name']} is a city in {x['country']}, on the banks of the {x['river']}."
        b = (f"It was founded in {x['year']} and has about {x['pop']:,} inhabitants; "
             f"it is known for its {x['landmark']}.")
        return f"{a} {b}"
    if kind == "person":
        last = x["name"].split()[-1]
        if v % 2:
            return (f"{x['name']} (born {x['year']} in {x['city']}) is {_a(x['job'])}. {last} studied in "
                    f"{x['study']} and is known for work on {x['topic']}.")
        return (f"{x['name']} is {_a(x['job'])} known for work on {x['topic']}. {last} was born in {x['city']} "
                f"in {x['year']} and later studied in {x['study']}.")
    if kind == "company":
        return (f"{x['name']} is {_a(x['industry'])} company founded in {x['year']} by {x['founder']}. "
                f"It is headquartered in {x['hq']}.")
    return (f"The {x['name']} is {_a(x['purpose'])} invented by {x['inventor']} in {x['year']}. "
            f"It is manufactured by {x['maker']}.")


def _candidates(e: dict) -> list[tuple[str, str, tuple, list[tuple[str, str]]]]:
    """(template, question, answers, [(support title, expert query), ...]) for every fact chain."""
    P = {p["name"]: p for p in e["person"]}
    C = {c["name"]: c for c in e["city"]}
    K = {c["name"]: c for c in e["company"]}
    N = {c["name"]: c for c in e["country"]}
    capitals = {c["capital"] for c in e["country"]}

    def river(c):
        return (c["river"], c["river"].rsplit(" ", 1)[0])

    out = []
    add = lambda tpl, q, ans, sup: out.append((tpl, q, tuple(str(a) for a in ans), [(s, s) for s in sup]))
    for p in e["person"]:
        n = p["name"]
        add("s_person_city", f"In which city was {n} born?", [p["city"]], [n])
        add("s_person_year", f"In what year was {n} born?", [p["year"]], [n])
        add("s_person_job", f"What is the profession of {n}?", [p["job"]], [n])
        add("m_person_river", f"Which river flows through the birthplace of {n}?", river(C[p["city"]]), [n, p["city"]])
        add("m_person_country", f"In which country was {n} born?", [C[p["city"]]["country"]], [n, p["city"]])
    for k in e["company"]:
        n, f = k["name"], P[k["founder"]]
        add("s_company_founder", f"Who founded {n}?", [f["name"]], [n])
        add("s_company_hq", f"In which city is {n} headquartered?", [k["hq"]], [n])
        add("s_company_year", f"In what year was {n} founded?", [k["year"]], [n])
        add("m_company_founder_city", f"In which city was the founder of {n} born?", [f["city"]], [n, f["name"]])
        add("m_company_founder_year", f"In what year was the founder of {n} born?", [f["year"]], [n, f["name"]])
        add("m_company_country", f"In which country is {n} headquartered?", [C[k["hq"]]["country"]], [n, k["hq"]])
    for i in e["invention"]:
        n, m = i["name"], K[i["maker"]]
        add("s_invention_inventor", f"Who invented the {n}?", [i["inventor"]], [n])
        add("s_invention_year", f"In what year was the {n} invented?", [i["year"]], [n])
        add("s_invention_maker", f"Which company manufactures the {n}?", [m["name"]], [n])
        add("m_invention_inventor_city", f"In which city was the inventor of the {n} born?",
            [P[i["inventor"]]["city"]], [n, i["inventor"]])
        add("m_invention_maker_founder", f"Who founded the company that manufactures the {n}?",
            [m["founder"]], [n, m["name"]])
        add("m_invention_maker_hq", f"In which city is the manufacturer of the {n} headquartered?",
            [m["hq"]], [n, m["name"]])
    for c in e["city"]:
        n = c["name"]
        add("s_city_country", f"In which country is {n}?", [c["country"]], [n])
        add("s_city_river", f"Which river flows through {n}?", river(c), [n])
        add("s_city_year", f"In what year was {n} founded?", [c["year"]], [n])
        if n not in capitals:
            add("m_city_capital", f"What is the capital of the country in which {n} lies?",
                [N[c["country"]]["capital"]], [n, c["country"]])
    for c in e["country"]:
        n = c["name"]
        add("s_country_capital", f"What is the capital of {n}?", [c["capital"]], [n])
        add("s_country_currency", f"What is the currency of {n}?", [c["currency"]], [n])
        add("s_country_language", f"What is the official language of {n}?", [c["language"]], [n])
    return out


def _split(rng: _Rng, cands: list) -> dict[str, list[Question]]:
    """Test: balanced single/multi, round-robin over templates. Train: every candidate whose
    supporting passages are disjoint from all test questions' (no fact leaks into train)."""
    by_tpl: dict[str, list] = {}
    for c in cands:
        by_tpl.setdefault(c[0], []).append(c)
    for tpl in sorted(by_tpl):
        rng.shuffle(by_tpl[tpl])
    test, used_titles = [], set()
    for prefix in ("s_", "m_"):
        tpls = sorted(t for t in by_tpl if t.startswith(prefix))
        # Small entity types (30 countries) get a small quota, else train would lose them all.
        quota = {t: max(3, len(by_tpl[t]) // 40) for t in tpls}
        picked, i = 0, 0
        while picked < TEST_PER_KIND:
            tpl = tpls[i % len(tpls)]
            i += 1
            if i > 1_000_000:
                raise RuntimeError(f"cannot draw {TEST_PER_KIND} {prefix}* test questions")
            if quota[tpl] <= 0 or not by_tpl[tpl]:
                continue
            cand = by_tpl[tpl].pop()
            if any(t in used_titles for t, _ in cand[3]):
                continue
            quota[tpl] -= 1
            test.append(cand)
            used_titles.update(t for t, _ in cand[3])
            picked += 1
    rest = [c for tpl in sorted(by_tpl) for c in by_tpl[tpl] if not any(t in used_titles for t, _ in c[3])]
    rng.shuffle(rest)
    rng.shuffle(test)

    def mk(split: str, items: list) -> list[Question]:
        return [Question(task_id=f"searchqa-{split}-{j:05d}", question=q, answers=a,
                         task_type="single_hop" if tpl.startswith("s_") else "multi_hop", template=tpl,
                         support_titles=tuple(t for t, _ in sup), expert_queries=tuple(x for _, x in sup))
                for j, (tpl, q, a, sup) in enumerate(items)]

    return {"train": mk("train", rest), "test": mk("test", test)}


@functools.lru_cache(maxsize=4)
def build_world(seed: int = WORLD_SEED) -> World:
    """The full world for `seed`: ~3k passages, train and test questions. Cached per process."""
    rng = _Rng(seed)
    e = _entities(rng)
    passages, order = [], ("country", "city", "person", "company", "invention")
    for kind in order:
        for v, x in enumerate(e[kind]):
            passages.append(Passage(id=str(len(passages)), title=x["name"], text=_passage_text(kind, x, v)))
    world = World(seed=seed, passages=passages)
    world.questions = _split(rng, _candidates(e))
    return world
