"""A synthetic product catalogue of any size, for indexing benchmarks: products with a
title and a description of a product's usual length, a brand, a category, a price, a
release date, an SKU, a list of EAN-13 codes, sparse ``attr_*`` attributes (the
category's own and a long tail of rare ones, as a marketplace's feed has) and, for some,
tags, a rating and a review count.

Each block of :data:`BLOCK` products is drawn at once by NumPy (PCG64, seeded by the seed
and the block's number): :func:`products` streams any number, the same seed gives the
same products on every machine (with the same NumPy: its generators' streams may change
between versions), and ``products(n)`` is the first ``n`` of any larger run.
``python -m ltr_toolkit.datasets.synthetic N -o products.jsonl`` writes them as JSONL
(gzip'd when the name ends in ``.gz``), one product a line, as ``ltr index jsonl`` reads.
The texts are made of a small vocabulary: realistic in length and shape (BM25, the
encoder and more_like_this do the work they do on a real catalogue), not in meaning.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Iterator

import numpy as np

from ..io.atomic import atomic_gzip, atomic_write

#: products drawn at a time (and the unit of the seeding: block k of seed s is the same
#: in every run)
BLOCK = 1000

BRANDS = ("Acme", "Brightline", "Corvo", "Dalton", "Everhold", "Fenwick", "Granite", "Halvor",
          "Ironbark", "Juniper", "Kestrel", "Lumen", "Marlow", "Northway", "Orison", "Pellham",
          "Quarry", "Redfern", "Solano", "Tamsin", "Ulric", "Veldt", "Wexford", "Yarrow", "Zephyr")
#: how often each brand sells (Zipf-like: a few brands have most products)
BRAND_SHARE = 1.0 / np.arange(1, len(BRANDS) + 1) ** 0.9

TAGS = ("new", "sale", "bestseller", "eco", "gift idea", "limited edition", "refurbished",
        "bundle", "free delivery", "staff pick", "clearance", "online only")

#: a category: its share, its price (log-normal mu, sigma), its words, its attributes
#: (a list: one of these texts; a tuple: a number from lo to hi with so many decimals)
CATEGORIES = {
    "Power tools": dict(
        share=0.22, price=(4.5, 0.6),
        nouns=("drill driver", "impact driver", "circular saw", "jigsaw", "angle grinder",
               "orbital sander", "rotary hammer", "multi-tool", "planer", "nail gun"),
        adjs=("cordless", "brushless", "compact", "heavy-duty", "18 V", "professional"),
        uses=("drilling into wood and metal", "driving long screws", "cutting sheet material",
              "renovation work", "everyday DIY jobs", "trade use on site"),
        extras=("two batteries", "a fast charger", "a carry case", "a belt clip",
                "a set of bits", "a side handle", "a dust bag"),
        attrs={"attr_voltage": ["12 V", "18 V", "36 V"], "attr_battery_ah": (1.5, 8.0, 1),
               "attr_torque_nm": (20, 180, 0), "attr_weight_kg": (0.9, 4.5, 2),
               "attr_speeds": (1, 4, 0), "attr_colour": ["yellow", "red", "blue", "green", "black"]}),
    "Kitchen": dict(
        share=0.2, price=(3.8, 0.7),
        nouns=("kettle", "toaster", "blender", "coffee grinder", "stand mixer", "air fryer",
               "food processor", "hand blender", "espresso machine", "juicer"),
        adjs=("stainless steel", "quiet", "compact", "retro", "digital", "family-size"),
        uses=("breakfast for the whole family", "small kitchens", "daily use",
              "batch cooking", "quick snacks", "entertaining guests"),
        extras=("a recipe book", "a measuring cup", "a spare jug", "a cleaning brush",
                "two speed settings", "a keep-warm function"),
        attrs={"attr_capacity_l": (0.5, 6.0, 1), "attr_power_w": (300, 2400, 0),
               "attr_colour": ["white", "black", "cream", "red", "silver"],
               "attr_weight_kg": (0.6, 9.0, 2), "attr_dishwasher_safe": ["yes", "no"]}),
    "Lighting": dict(
        share=0.15, price=(3.3, 0.8),
        nouns=("desk lamp", "floor lamp", "LED bulb", "ceiling light", "wall light",
               "strip light", "reading lamp", "pendant light"),
        adjs=("dimmable", "smart", "warm white", "energy-saving", "industrial", "minimalist"),
        uses=("reading in the evening", "a home office", "living rooms", "bedside tables",
              "kitchen worktops", "hallways"),
        extras=("a remote control", "an app", "a 2 m cable", "a wall bracket", "three bulbs"),
        attrs={"attr_lumens": (200, 3500, 0), "attr_colour_temperature_k": (2200, 6500, 0),
               "attr_fitting": ["E27", "E14", "GU10", "B22", "integrated"],
               "attr_power_w": (3, 60, 0), "attr_colour": ["white", "black", "brass", "grey"]}),
    "Garden": dict(
        share=0.13, price=(4.0, 0.8),
        nouns=("garden hose", "lawn mower", "hedge trimmer", "pruning shears", "leaf blower",
               "pressure washer", "sprinkler", "wheelbarrow", "grass trimmer"),
        adjs=("lightweight", "electric", "petrol", "cordless", "expandable", "weatherproof"),
        uses=("small lawns", "large gardens", "patios and decks", "hedges up to 2 m",
              "watering borders", "seasonal clean-ups"),
        extras=("a grass box", "a spray gun", "a spare blade", "a wall mount", "two nozzles"),
        attrs={"attr_cutting_width_cm": (20, 55, 0), "attr_length_m": (5, 50, 0),
               "attr_power_w": (400, 2200, 0), "attr_weight_kg": (0.4, 30.0, 1),
               "attr_colour": ["green", "orange", "black", "grey"]}),
    "Electronics": dict(
        share=0.2, price=(3.9, 0.9),
        nouns=("wireless headphones", "bluetooth speaker", "USB-C cable", "power bank",
               "mechanical keyboard", "webcam", "wireless mouse", "smart plug", "charger"),
        adjs=("noise-cancelling", "portable", "fast-charging", "waterproof", "ergonomic", "slim"),
        uses=("travel", "working from home", "gaming", "music on the go", "video calls",
              "charging two devices at once"),
        extras=("a USB-C cable", "a travel pouch", "a quick start guide", "a 2-year warranty",
                "spare ear tips"),
        attrs={"attr_battery_life_h": (4, 60, 0), "attr_connectivity": ["Bluetooth 5.3", "USB-C",
               "Wi-Fi", "2.4 GHz receiver"], "attr_colour": ["black", "white", "blue", "grey"],
               "attr_weight_kg": (0.02, 1.2, 3), "attr_power_w": (5, 100, 0)}),
    "Home": dict(
        share=0.1, price=(3.5, 0.7),
        nouns=("storage box", "bath towel", "duvet", "cushion", "curtain", "shelf unit",
               "laundry basket", "doormat", "mirror"),
        adjs=("cotton", "oak-effect", "foldable", "soft-touch", "hand-woven", "stackable"),
        uses=("bedrooms", "small flats", "bathrooms", "guest rooms", "tidy hallways"),
        extras=("a washable cover", "fixings", "a gift box", "two handles"),
        attrs={"attr_material": ["cotton", "polyester", "oak", "pine", "bamboo", "wool"],
               "attr_width_cm": (20, 200, 0), "attr_colour": ["white", "grey", "blue", "natural"],
               "attr_weight_kg": (0.2, 25.0, 1)}),
}
_NAMES = tuple(CATEGORIES)
_SHARE = np.array([c["share"] for c in CATEGORIES.values()])

SENTENCES = ("The {brand} {noun} is made for {use}.",
             "Its {adj} design makes it easy to use and to store.",
             "It comes with {extra} and {extra2}.",
             "A good choice for {use2}, with a {years}-year warranty.",
             "Customers rate it for {use} and say it is {adj2} and well made.",
             "This {adj} {noun} replaces model {old} in the {brand} {series} range.",
             "Every part is tested before it leaves the factory, and spares are available "
             "for at least {years} years.",
             "Weighing little for its size, it suits {use2} as well as {use}.",
             "Order before 2 pm for next-day delivery; returns are free for 30 days.",
             "In the box: the {noun}, {extra}, {extra2} and a printed manual.",
             "Compared with the previous {series} model it is lighter, quieter and {adj2}.",
             "The {brand} {series} {noun} has been a favourite for {use} since it came out.",
             "Please check the size and the specifications below before you order.",
             "Made with recycled packaging; the {noun} itself can be recycled at the end of "
             "its life.",
             "Pair it with other {brand} products for {use2}.")
SERIES = ("Pro", "Max", "Eco", "Studio", "Classic", "Flex", "Prime", "Core")
#: rare attributes of a marketplace feed: so many names, each in few products
TAIL_NAMES = 3000
_EPOCH = dt.date(2015, 1, 1)
_DAYS = (dt.date(2026, 6, 30) - _EPOCH).days


def products(n: int | None = None, seed: int = 0) -> Iterator[dict]:
    """The first ``n`` products of ``seed`` (None: without end), one dict each."""
    made = 0
    block = 0
    while n is None or made < n:
        for product in _Block(seed, block).products():
            if n is not None and made >= n:
                return
            yield product
            made += 1
        block += 1


class _Block:
    """The random draws of :data:`BLOCK` products (block ``number`` of ``seed``)."""

    def __init__(self, seed: int, number: int):
        rng = np.random.default_rng([int(seed), int(number)])
        self.first = int(number) * BLOCK
        self.category = rng.choice(len(_NAMES), BLOCK, p=_SHARE / _SHARE.sum())
        self.brand = rng.choice(len(BRANDS), BLOCK, p=BRAND_SHARE / BRAND_SHARE.sum())
        self.pick = rng.integers(0, 1 << 30, (BLOCK, 12))       # words, sentences, series
        self.sentences = rng.integers(3, 9, BLOCK)
        self.sentence_pick = rng.integers(0, len(SENTENCES) - 1, (BLOCK, 7))
        self.model = rng.integers(100, 9999, BLOCK)
        self.price_z = rng.standard_normal(BLOCK)
        self.day = rng.integers(0, _DAYS, BLOCK)
        self.eans = rng.integers(1, 4, BLOCK)
        self.tags = np.where(rng.random(BLOCK) < 0.4, rng.integers(1, 4, BLOCK), 0)
        self.tag_pick = rng.integers(0, len(TAGS), (BLOCK, 3))
        self.attr_on = rng.random((BLOCK, 6)) < 0.45
        self.attr_value = rng.random((BLOCK, 6))
        self.tail = np.minimum(rng.poisson(1.2, BLOCK), 6)
        self.tail_name = (rng.zipf(1.4, (BLOCK, 6)) - 1) % TAIL_NAMES
        self.tail_value = rng.integers(0, 1000, (BLOCK, 6))
        self.rated = rng.random(BLOCK) < 0.7
        self.rating = np.clip(np.round(rng.normal(4.1, 0.6, BLOCK), 1), 1.0, 5.0)
        self.reviews = rng.geometric(0.02, BLOCK)

    def products(self) -> Iterator[dict]:
        prices = self._prices()
        eans = _ean13(self.first * 3 + np.arange(BLOCK * 3)).reshape(BLOCK, 3)
        for j in range(BLOCK):
            yield self.product(j, prices[j], eans[j])

    def _prices(self) -> np.ndarray:
        """Log-normal by category, ending in .99 or .49 as shop prices do."""
        mu, sigma = (np.array([CATEGORIES[c]["price"][k] for c in _NAMES])[self.category]
                     for k in (0, 1))
        whole = np.maximum(np.floor(np.exp(mu + sigma * self.price_z)), 1.0)
        return np.round(whole + np.where(self.pick[:, 11] % 3, 0.99, 0.49), 2)

    def product(self, j: int, price: float, eans: np.ndarray) -> dict:
        cat = CATEGORIES[_NAMES[self.category[j]]]
        brand, pick = BRANDS[self.brand[j]], self.pick[j]
        words = {"brand": brand, "noun": _of(cat["nouns"], pick[0]), "adj": _of(cat["adjs"], pick[1]),
                 "adj2": _of(cat["adjs"], pick[2]), "use": _of(cat["uses"], pick[3]),
                 "use2": _of(cat["uses"], pick[4]), "extra": _of(cat["extras"], pick[5]),
                 "extra2": _of(cat["extras"], pick[6]), "series": _of(SERIES, pick[7]),
                 "years": 2 + pick[8] % 4, "old": f"{brand[:2].upper()}-{pick[9] % 900 + 100}"}
        i = self.first + j
        doc = {"id": f"p{i:08d}", "title": _title(words, brand, int(self.model[j]), pick[10]),
               "description": _description(words, self.sentence_pick[j, :self.sentences[j] - 1]),
               "brand": brand, "category": _NAMES[self.category[j]], "price": float(price),
               "release_date": (_EPOCH + dt.timedelta(days=int(self.day[j]))).isoformat(),
               "sku": f"{brand[:3].upper()}-{i:07d}",
               "ean": [str(e) for e in eans[:self.eans[j]]]}
        doc.update(self._attributes(j, cat))
        if self.tags[j]:
            doc["tags"] = list(dict.fromkeys(TAGS[t] for t in self.tag_pick[j, :self.tags[j]]))
        if self.rated[j]:
            doc["rating"], doc["reviews"] = float(self.rating[j]), int(self.reviews[j])
        return doc

    def _attributes(self, j: int, cat: dict) -> dict:
        """The category's attributes a product has (45% each: sparse, none a main text
        field), and its rare ones."""
        out = {}
        for k, (name, spec) in enumerate(cat["attrs"].items()):
            if self.attr_on[j, k]:
                out[name] = _value(spec, self.attr_value[j, k])
        for k in range(self.tail[j]):
            name = int(self.tail_name[j, k])
            value = int(self.tail_value[j, k])
            # one kind per name: even names hold numbers, odd ones short codes
            out[f"attr_x{name:04d}"] = value if name % 2 == 0 else f"v{value % 40}"
        return out


def _of(options, k) -> str:
    return options[int(k) % len(options)]


def _value(spec, u: float):
    """An attribute's value from a uniform draw ``u``: one of a list's texts, or a number
    of a (lo, hi, decimals) range."""
    if isinstance(spec, list):
        return spec[int(u * len(spec))]
    lo, hi, decimals = spec
    value = round(lo + u * (hi - lo), decimals)
    return int(value) if decimals == 0 else value


def _title(words: dict, brand: str, model: int, k) -> str:
    """``Kestrel Brushless Impact Driver KE-4821`` and, for some, what comes with it."""
    noun = " ".join(w[:1].upper() + w[1:] for w in words["noun"].split())
    adj = words["adj"][:1].upper() + words["adj"][1:]
    title = f"{brand} {adj} {noun} {brand[:2].upper()}-{model}"
    tail = ("", f", {words['series']} Series", f" with {words['extra']}", f" ({words['adj2']})")
    return title + _of(tail, k)


def _description(words: dict, others) -> str:
    """The first sentence (naming the product), then ``others`` (indices of the other
    sentences, repeats left out): 3 to 8 sentences, 30 to 120 words."""
    chosen = dict.fromkeys([0, *(1 + int(k) for k in others)])
    return " ".join(SENTENCES[s].format(**words) for s in chosen)


def _ean13(numbers: np.ndarray) -> np.ndarray:
    """Valid EAN-13 codes (a GS1 check digit) of 12-digit ``numbers`` offset into a
    made-up company prefix, as integers."""
    body = 400_638_100_000 + np.asarray(numbers, dtype=np.int64) % 100_000_000_000
    digits = (body[:, None] // 10 ** np.arange(11, -1, -1)) % 10
    weights = np.tile([1, 3], 6)
    check = (10 - (digits * weights).sum(axis=1) % 10) % 10
    return body * 10 + check


def write_jsonl(path, n: int, seed: int = 0) -> int:
    """``n`` products of ``seed`` into ``path`` as JSONL (gzip'd when it ends in ``.gz``),
    written atomically; the number written."""
    opener = atomic_gzip if str(path).endswith(".gz") else atomic_write
    with opener(path) as fh:
        for product in products(n, seed):
            fh.write(json.dumps(product, ensure_ascii=False) + "\n")
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltr_toolkit.datasets.synthetic",
                                     description="Write N synthetic products as JSONL.")
    parser.add_argument("n", type=int, help="How many products.")
    parser.add_argument("-o", "--output", required=True, help="The JSONL file (.gz: gzip'd).")
    parser.add_argument("--seed", type=int, default=0, help="The same seed, the same products.")
    args = parser.parse_args(argv)
    if args.n < 0:
        parser.error("N must be 0 or more")
    write_jsonl(args.output, args.n, args.seed)
    print(f"wrote {args.n} products to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
