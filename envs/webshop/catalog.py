"""Offline WebShop world: a product catalog and shopping instructions, generated from a seed.

Why generated, not shipped: the original WebShop needs a 1.18M-product scrape (or its 1000-product
"small" subset) that we cannot download here. We keep WebShop's structure instead: products with a
category, a product type, a title, attributes ("machine wash"), buying options (size/color), a
price, a description and feature bullets; each instruction names one target product's type words,
1-3 of its attributes, one value per option dimension and a price bound.

Determinism: only `random.Random(seed).random()` is used (Python guarantees that stream across
versions), wrapped in `_Rng`; a fingerprint test pins the generated content.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from functools import lru_cache

COLORS = ["black", "white", "navy blue", "grey", "red", "green", "beige", "pink", "brown", "purple"]
CLOTH_SIZES = ["x-small", "small", "medium", "large", "x-large", "xx-large"]
SHOE_SIZES = ["6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12"]
FL_OZ = ["1.7 fl oz", "3.4 fl oz", "6.7 fl oz", "8 fl oz", "16 fl oz"]
COUNTS = ["6 count", "12 count", "24 count", "36 count", "48 count"]
FLAVORS = ["chocolate", "vanilla", "peanut butter", "strawberry", "original", "mint", "caramel", "mango"]
SCENTS = ["lavender", "vanilla", "citrus", "rose", "unscented", "sandalwood", "ocean breeze"]
PACKS = ["1 pack", "2 pack", "3 pack", "4 pack", "6 pack"]
LENGTHS = ["3 ft", "6 ft", "10 ft", "15 ft", "25 ft"]
BAG_WEIGHTS = ["4 pound", "8 pound", "15 pound", "24 pound", "30 pound"]
DUMBBELL_WEIGHTS = ["5 pound", "10 pound", "15 pound", "20 pound", "25 pound", "30 pound"]
BED_SIZES = ["twin", "full", "queen", "king"]
CAPACITIES = ["12 oz", "16 oz", "20 oz", "32 oz", "40 oz"]
PET_SIZES = ["small", "medium", "large", "x-large"]

# category -> (attribute pool, {type name: (type nouns, title phrase, descriptors, options, price range)})
# Type nouns are unique across all types: WebShop's type reward compares title nouns.
CATEGORIES: dict[str, tuple[list[str], dict[str, tuple]]] = {
    "beauty": (
        ["long lasting", "cruelty free", "paraben free", "travel size", "natural ingredients",
         "sensitive skin", "alcohol free", "vegan formula"],
        {"womens perfume": (["perfume"], "Womens Perfume", ["Eau de Parfum Spray", "Floral Fragrance"],
                            {"size": FL_OZ}, (18, 95)),
         "mens cologne": (["cologne"], "Mens Cologne", ["Eau de Toilette", "Woody Fragrance"],
                          {"size": FL_OZ}, (15, 90)),
         "lipstick": (["lipstick"], "Matte Lipstick", ["Creamy Finish", "Bold Pigment"],
                      {"color": ["red", "pink", "nude", "plum", "coral", "berry"]}, (6, 30)),
         "face moisturizer": (["moisturizer"], "Face Moisturizer", ["Daily Cream", "Hydrating Lotion"],
                              {"size": FL_OZ, "scent": SCENTS}, (8, 45))}),
    "clothing": (
        ["machine wash", "slim fit", "button closure", "long sleeve", "relaxed fit", "moisture wicking",
         "cotton spandex", "elastic waist", "hand wash"],
        {"mens dress shirt": (["shirt"], "Mens Dress Shirt", ["Classic Collar", "Office Wear"],
                              {"color": COLORS, "size": CLOTH_SIZES}, (15, 60)),
         "womens yoga pants": (["pants", "leggings"], "Womens Yoga Pants Leggings", ["High Waist", "Workout"],
                               {"color": COLORS, "size": CLOTH_SIZES}, (12, 50)),
         "pullover hoodie": (["hoodie", "sweatshirt"], "Pullover Hoodie Sweatshirt", ["Fleece Lined", "Casual"],
                             {"color": COLORS, "size": CLOTH_SIZES}, (18, 65)),
         "denim jeans": (["jeans"], "Denim Jeans", ["Straight Leg", "Stretch Denim"],
                         {"color": ["light wash", "dark wash", "black", "grey"], "size": CLOTH_SIZES}, (20, 80))}),
    "shoes": (
        ["non slip", "rubber sole", "memory foam", "lace up", "waterproof", "arch support", "lightweight",
         "breathable mesh"],
        {"running shoes": (["shoes", "sneakers"], "Running Shoes Sneakers", ["Athletic Trainer", "Road Runner"],
                           {"color": COLORS, "size": SHOE_SIZES}, (25, 120)),
         "hiking boots": (["boots"], "Hiking Boots", ["Ankle High", "Trail Ready"],
                          {"color": ["brown", "black", "grey", "green"], "size": SHOE_SIZES}, (40, 160)),
         "slide sandals": (["sandals"], "Slide Sandals", ["Open Toe", "Summer Slides"],
                           {"color": COLORS, "size": SHOE_SIZES}, (10, 45)),
         "house slippers": (["slippers"], "House Slippers", ["Cozy Plush", "Indoor Outdoor"],
                            {"color": COLORS, "size": SHOE_SIZES}, (10, 40))}),
    "electronics": (
        ["fast charging", "noise cancelling", "high definition", "easy to carry", "water resistant",
         "long battery life", "plug and play", "dual band"],
        {"wireless earbuds": (["earbuds"], "Wireless Earbuds", ["Bluetooth 5.3", "In Ear"],
                              {"color": ["black", "white", "blue", "pink"]}, (15, 150)),
         "bluetooth speaker": (["speaker"], "Bluetooth Speaker", ["Portable Stereo", "Deep Bass"],
                               {"color": ["black", "blue", "red", "grey"]}, (20, 180)),
         "usb c charger": (["charger"], "USB C Wall Charger", ["PD Adapter", "Compact Plug"],
                           {"pack": PACKS}, (8, 45)),
         "hdmi cable": (["cable"], "HDMI Cable", ["4K Ready", "Braided Cord"],
                        {"length": LENGTHS}, (6, 35))}),
    "grocery": (
        ["gluten free", "sugar free", "non gmo", "keto friendly", "low carb", "individually wrapped",
         "usda organic", "high protein"],
        {"protein bars": (["bars"], "Protein Bars", ["Snack Box", "Chewy Bar"],
                          {"flavor": FLAVORS, "size": COUNTS}, (12, 45)),
         "green tea": (["tea"], "Green Tea Bags", ["Loose Leaf Blend", "Herbal Infusion"],
                       {"size": COUNTS}, (5, 30)),
         "coffee beans": (["beans"], "Arabica Coffee Beans", ["Medium Roast", "Dark Roast"],
                          {"size": ["12 oz", "2 pound", "5 pound"]}, (9, 55)),
         "beef jerky": (["jerky"], "Beef Jerky", ["Smoked Strips", "Savory Snack"],
                        {"flavor": ["original", "teriyaki", "peppered", "sweet and spicy"]}, (7, 40))}),
    "furniture": (
        ["easy assembly", "solid wood", "living room", "space saving", "height adjustable", "storage space",
         "metal legs", "mid century"],
        {"office chair": (["chair"], "Office Chair", ["Ergonomic Seat", "Swivel Seat"],
                          {"color": ["black", "grey", "white", "blue"]}, (60, 300)),
         "bookshelf": (["bookshelf"], "Bookshelf", ["5 Tier Rack", "Display Unit"],
                       {"color": ["walnut", "oak", "white", "black"]}, (40, 220)),
         "coffee table": (["table"], "Coffee Table", ["Round Top", "Rectangle Top"],
                          {"color": ["walnut", "oak", "white", "black"]}, (50, 260)),
         "bed frame": (["frame"], "Platform Bed Frame", ["Under Bed Clearance", "Noise Free"],
                       {"size": BED_SIZES}, (90, 400))}),
    "kitchen": (
        ["dishwasher safe", "bpa free", "non stick", "stainless steel", "leak proof", "easy clean",
         "heat resistant", "food grade"],
        {"knife set": (["knife", "knives"], "Kitchen Knife Set", ["Chef Block", "Sharp Blade"],
                       {"size": ["6 piece", "8 piece", "12 piece", "15 piece"]}, (25, 150)),
         "frying pan": (["pan"], "Frying Pan Skillet", ["Induction Ready", "Cookware"],
                        {"size": ["8 inch", "10 inch", "12 inch"]}, (15, 80)),
         "water bottle": (["bottle"], "Insulated Water Bottle", ["Sports Flask", "Vacuum Sealed"],
                          {"color": COLORS, "size": CAPACITIES}, (10, 45)),
         "coffee mug": (["mug"], "Ceramic Coffee Mug", ["Latte Cup", "Gift Idea"],
                        {"color": COLORS, "size": CAPACITIES}, (8, 30))}),
    "health": (
        ["easy to use", "rechargeable", "high quality", "portable design", "doctor recommended",
         "quiet operation", "low noise", "cordless design"],
        {"electric toothbrush": (["toothbrush"], "Electric Toothbrush", ["Sonic Clean", "Smart Timer"],
                                 {"color": ["black", "white", "pink", "blue"]}, (15, 120)),
         "vitamin d supplement": (["vitamin", "supplement"], "Vitamin D3 Supplement", ["Softgels", "Immune Support"],
                                  {"size": ["60 count", "120 count", "240 count"]}, (6, 35)),
         "hair dryer": (["dryer"], "Ionic Hair Dryer", ["Blow Dryer", "Salon Grade"],
                        {"color": ["black", "white", "pink", "purple"]}, (20, 150)),
         "massage gun": (["massager"], "Deep Tissue Massager Gun", ["Muscle Relief", "Percussion"],
                         {"color": ["black", "grey", "blue"]}, (30, 200))}),
    "pet supplies": (
        ["grain free", "easy to clean", "non toxic", "real meat", "machine washable", "odor control",
         "chew resistant", "all breed"],
        {"dog food": (["kibble"], "Dry Dog Food Kibble", ["Chicken Recipe", "Salmon Recipe"],
                      {"size": BAG_WEIGHTS}, (15, 90)),
         "cat litter": (["litter"], "Clumping Cat Litter", ["Dust Low", "Clay Blend"],
                        {"size": BAG_WEIGHTS}, (8, 40)),
         "dog leash": (["leash"], "Dog Leash", ["Padded Handle", "Reflective Rope"],
                       {"color": COLORS, "length": ["4 ft", "6 ft", "10 ft"]}, (8, 35)),
         "cat tree": (["tree"], "Cat Tree Tower", ["Scratching Post", "Multi Level"],
                      {"color": ["grey", "brown", "beige", "black"], "size": PET_SIZES}, (25, 120))}),
    "sports": (
        ["non slip", "easy to carry", "heavy duty", "high density", "quick dry", "water resistant",
         "anti tear", "extra thick"],
        {"yoga mat": (["mat"], "Yoga Mat", ["Exercise Pad", "Fitness Workout"],
                      {"color": COLORS}, (12, 70)),
         "camping tent": (["tent"], "Camping Tent", ["Dome Shelter", "Family Outdoor"],
                          {"size": ["2 person", "4 person", "6 person"]}, (40, 250)),
         "dumbbells": (["dumbbells"], "Dumbbells", ["Hex Grip", "Home Gym"],
                       {"size": DUMBBELL_WEIGHTS}, (15, 120)),
         "resistance bands": (["bands"], "Resistance Bands", ["Loop Set", "Strength Training"],
                              {"pack": PACKS}, (8, 35))}),
}

PRICE_BOUNDS = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 120, 150, 200, 250, 300, 400, 500]
SYLLABLES = ["lu", "mo", "ra", "ve", "ni", "ko", "sa", "ta", "zen", "vi", "xo", "pa", "del", "mar", "ori", "qua"]
FILLER = ["Backed by a 30 day return policy.", "Ships in simple recyclable packaging.",
          "Designed for everyday use at home or on the go.", "A thoughtful gift for friends and family."]
BULLET_TAILS = ["tested by our quality team", "a customer favorite", "great value for the price",
                "made with care", "trusted by thousands of buyers"]
TEMPLATES = ["i need {attrs_and} {name}{opts}, and price lower than {price} dollars",
             "i am looking for {name} that is {attrs_and}{opts}, and price lower than {price} dollars",
             "find me {attrs_comma} {name}{opts}, and price lower than {price} dollars",
             "i want to buy {name} which is {attrs_and}{opts}, and price lower than {price} dollars"]
ALL_ATTRIBUTES = sorted({a for pool, _ in CATEGORIES.values() for a in pool})


class _Rng:
    """Choice/sample built only on `random()`, whose stream Python keeps stable across versions."""

    def __init__(self, seed: int):
        self._r = random.Random(seed)

    def below(self, n: int) -> int:
        return min(int(self._r.random() * n), n - 1)

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def sample(self, seq, k: int) -> list:
        pool, out = list(seq), []
        for _ in range(min(k, len(pool))):
            out.append(pool.pop(self.below(len(pool))))
        return out

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self._r.random()


@dataclass(frozen=True)
class Product:
    asin: str
    category: str
    product_type: str
    type_nouns: tuple[str, ...]
    title: str
    brand: str
    attributes: tuple[str, ...]
    options: dict  # dim -> list of values, in display order
    price: float
    description: str
    features: tuple[str, ...]

    def text(self) -> str:
        """Lower-cased text the attribute reward falls back to (title, features, description)."""
        return " ".join([self.title, " ".join(self.features), self.description]).lower()


@dataclass(frozen=True)
class Goal:
    asin: str
    category: str
    product_type: str
    type_nouns: tuple[str, ...]
    instruction: str
    attributes: tuple[str, ...]
    options: dict  # dim -> required value
    price_upper: float
    query: str  # the instruction's key words, what the expert searches for


@dataclass
class World:
    """Catalog + instructions + splits for one seed. Shared read-only by all env copies."""
    seed: int
    products: list[Product]
    by_asin: dict[str, Product]
    goals: dict[str, Goal]  # task_id -> goal
    splits: dict[str, list[str]] = field(default_factory=dict)

    def fingerprint(self) -> str:
        payload = json.dumps({"products": [asdict(p) for p in self.products],
                              "goals": {k: asdict(g) for k, g in self.goals.items()},
                              "splits": self.splits}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


def _asin(rng: _Rng, used: set[str]) -> str:
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    while True:
        asin = "B0" + "".join(alphabet[rng.below(36)] for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


def _make_product(rng: _Rng, category: str, ptype: str, spec: tuple, brands: list[str], used: set[str]) -> Product:
    nouns, phrase, descriptors, option_pools, (lo, hi) = spec
    attrs = tuple(rng.sample(CATEGORIES[category][0], 2 + rng.below(3)))
    options = {}
    for dim, pool in option_pools.items():
        k = min(len(pool), 2 + rng.below(4))
        chosen = set(rng.sample(pool, k))
        options[dim] = [v for v in pool if v in chosen]
    brand = rng.choice(brands)
    shown = [a.title() for a in attrs[: 1 + rng.below(2)]]
    title = f"{brand} {' '.join(shown)} {phrase} - {rng.choice(descriptors)}"
    price = round(rng.uniform(lo, hi), 2)
    description = (f"This {ptype} by {brand} is {', '.join(attrs[:-1])} and {attrs[-1]}. "
                   f"{rng.choice(FILLER)}")
    features = tuple([f"{a.upper()} - {rng.choice(BULLET_TAILS)}." for a in attrs] + [rng.choice(FILLER)])
    return Product(_asin(rng, used), category, ptype, tuple(nouns), title, brand, attrs, options, price,
                   description, features)


def _make_goal(rng: _Rng, p: Product) -> Goal:
    attrs = tuple(rng.sample(p.attributes, 1 + rng.below(min(3, len(p.attributes)))))
    opts = {dim: rng.choice(values) for dim, values in p.options.items()}
    upper = float(next(b for b in PRICE_BOUNDS if b > p.price))
    opt_text = "".join(f"{', and' if i else ' with'} {d}: {v}" for i, (d, v) in enumerate(opts.items()))
    attrs_and = attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]
    text = rng.choice(TEMPLATES).format(attrs_and=attrs_and, attrs_comma=", ".join(attrs), name=p.product_type,
                                        opts=opt_text, price=f"{upper:.2f}")
    query = " ".join([*attrs, p.product_type, *opts.values()])
    return Goal(p.asin, p.category, p.product_type, p.type_nouns, text, attrs, opts, upper, query)


@lru_cache(maxsize=4)
def build_world(seed: int = 0, per_type: int = 25, goals_per_product: int = 2, test_per_category: int = 12) -> World:
    """~1000 products (10 categories x 4 types x 25), 2 instructions each; test targets unseen in train."""
    rng = _Rng(seed)
    brands = sorted({"".join(rng.choice(SYLLABLES) for _ in range(2 + rng.below(2))).title() for _ in range(80)})
    used: set[str] = set()
    products = [_make_product(rng, cat, ptype, spec, brands, used)
                for cat, (_, types) in CATEGORIES.items() for ptype, spec in types.items()
                for _ in range(per_type)]
    by_asin = {p.asin: p for p in products}
    # Test products: the first `test_per_category` of each category after a seeded shuffle, interleaved
    # round-robin so the test ids cycle through categories (any prefix is category-balanced).
    per_cat: dict[str, list[Product]] = {c: [] for c in CATEGORIES}
    for p in rng.sample(products, len(products)):
        per_cat[p.category].append(p)
    test_products = [per_cat[c][i] for i in range(test_per_category) for c in CATEGORIES]
    test_asins = {p.asin for p in test_products}
    goals: dict[str, Goal] = {}
    splits: dict[str, list[str]] = {"train": [], "test": []}
    seen: set[str] = set()
    for i, p in enumerate(test_products):
        g = _make_goal(rng, p)
        seen.add(g.instruction)
        tid = f"webshop-test-{i:04d}"
        goals[tid] = g
        splits["test"].append(tid)
    n = 0
    for p in products:
        if p.asin in test_asins:
            continue
        for _ in range(goals_per_product):
            g = _make_goal(rng, p)
            if g.instruction in seen:  # splits must be disjoint in instruction text
                continue
            seen.add(g.instruction)
            tid = f"webshop-train-{n:04d}"
            goals[tid] = g
            splits["train"].append(tid)
            n += 1
    return World(seed, products, by_asin, goals, splits)
