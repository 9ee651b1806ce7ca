#!/usr/bin/env python3
"""Write the pattern-rule files for the pattern-matcher benchmark.

Usage: gen_rules.py OUT_DIR

Writes three files into OUT_DIR:

* ``seed_rules.json``  -- the pattern rules of 000 §5.5, unchanged (5 crisis regexes,
  8 keyword groups).
* ``large_rules.json`` -- the seed rules followed by generated rules, up to 500 crisis
  regexes and 2,000 keyword groups (1-4 keywords each).
* ``large_rules_no_wordb.json`` -- the same rules with every ``\\b`` removed: an ablation,
  because a Unicode word boundary changes how the Rust ``regex`` crate can run a set of
  regexes over non-ASCII text (see bench/README.md).

The generated regexes are phrase-like (alternations, optional groups, optional characters),
in the syntax that both Python ``re`` and Rust ``regex`` accept: no lookaround, no
backreferences. A few contain ``\\b`` (word boundary), as hand-written rules often do. Most
generated rules are built from words the corpus (gen_corpus.py) rarely or never uses, so
they rarely match; a small share is built from everyday co-parenting words and does match.
Output is deterministic (``random.Random(42)``). No rule uses the ``whole_word`` extension:
the seed's Python loop does not have it.
"""

import json
import os
import random
import sys

CRISIS_TARGET = 500
KEYWORD_TARGET = 2000

# 000 §5.5, as data.
SEED_RULES = {
    "crisis_patterns": [
        {
            "pattern": "want(s)? to (die|end it|hurt myself|kill myself)",
            "entities": ["handler_crisis", "rule_crisis_detection"],
            "is_critical": True,
        },
        {
            "pattern": "better off (dead|without me)",
            "entities": ["handler_crisis"],
            "is_critical": True,
        },
        {
            "pattern": "(not|don't|dont) feel safe",
            "entities": ["handler_crisis"],
            "is_critical": True,
        },
        {
            "pattern": "can'?t (go on|take it|do this) anymore",
            "entities": ["handler_crisis"],
            "is_critical": True,
        },
        {
            "pattern": "being (hit|abused|hurt)",
            "entities": ["handler_crisis", "domestic_violence"],
            "is_critical": True,
        },
    ],
    "keyword_boosts": [
        {"keywords": ["gray rock", "grey rock", "gray-rock"], "entity": "gray_rock"},
        {"keywords": ["biff", "biff response"], "entity": "biff_response"},
        {"keywords": ["parental alienation", "alienation"], "entity": "parental_alienation"},
        {
            "keywords": ["documentation", "document everything", "keep records"],
            "entity": "documentation_practices",
        },
        {"keywords": ["boundaries", "boundary", "set boundaries"], "entity": "boundary_setting"},
        {
            "keywords": ["loyalty bind", "loyalty conflict", "caught in the middle"],
            "entity": "loyalty_binds",
        },
        {"keywords": ["gatekeeping", "gatekeeper"], "entity": "gatekeeping"},
        {"keywords": ["coercive control"], "entity": "coercive_control_detailed"},
    ],
}

# --- crisis regex building blocks -------------------------------------------------------
# Rare slots: safety/crisis vocabulary that the corpus's everyday messages do not use.
RARE_SUBJECTS = [
    "he", "she", "they", "my ex", "his brother", "her boyfriend", "her girlfriend",
    "his new wife", "the stepdad", "the stepmom", "his father", "her mother",
]
RARE_VERBS = [
    ["threaten", "threatens", "threatened", "threatening"],
    ["choke", "choked", "choking"],
    ["shove", "shoved", "shoving"],
    ["stalk", "stalked", "stalking"],
    ["strangle", "strangled"],
    ["punch", "punched", "punching"],
    ["slap", "slapped", "slapping"],
    ["corner", "cornered"],
    ["trap", "trapped"],
    ["smash", "smashed", "smashing"],
    ["confiscate", "confiscated"],
    ["track", "tracked", "tracking"],
    ["harass", "harassed", "harassing"],
    ["intimidate", "intimidated", "intimidating"],
    ["kidnap", "kidnapped"],
    ["abduct", "abducted"],
    ["overdose", "overdosed"],
    ["starve", "starved"],
    ["burn", "burned", "burnt"],
    ["bruise", "bruised"],
]
RARE_OBJECTS = [
    "my passport", "my phone", "my car keys", "the kids' passports", "my medication",
    "my wallet", "the baby", "my throat", "my neck", "my arm", "the dog", "the gun",
    "a knife", "a weapon", "my bank card", "my inhaler", "the door", "my laptop",
]
RARE_TAILS = [
    "in front of the kids", "until i gave in", "so i could not leave", "when i tried to leave",
    "every single night", "with a belt", "behind closed doors", "and laughed",
    "after midnight", "in the driveway", "through the window", "across the parking lot",
]
RARE_FEELINGS = [
    "terrified", "petrified", "hopeless", "worthless", "suicidal", "numb", "trapped",
    "unsafe", "panicked", "desperate",
]
# Common slots: everyday phrasing the corpus uses, for the few rules that do match.
COMMON_ITEMS = ["inhaler", "shin guards", "swimsuit", "reading log", "permission slip", "jacket",
                "lunchbox", "water bottle", "charger", "retainer", "library book", "backpack"]
COMMON_EVENTS = ["birthday party", "sleepover", "school play", "recital", "science fair",
                 "field trip", "graduation", "soccer tournament"]
COMMON_NAMES = ["emma", "liam", "noah", "olivia", "ava", "mia", "lucas", "sophia"]


def alt(rng, words, k_min=1, k_max=4):
    """An alternation group of k distinct words, or the bare word when k == 1."""
    k = rng.randint(k_min, min(k_max, len(words)))
    chosen = rng.sample(words, k)
    if k == 1:
        return chosen[0]
    return "(" + "|".join(chosen) + ")"


def flexible_space(rng, phrase):
    """Sometimes allow a hyphen or no space between words, sometimes \\s+."""
    r = rng.random()
    if r < 0.15:
        return phrase.replace(" ", "[- ]?")
    if r < 0.25:
        return phrase.replace(" ", r"\s+")
    return phrase


def apostrophe_optional(phrase):
    return phrase.replace("'", "'?")


def rare_regex(rng):
    shape = rng.randrange(6)
    if shape == 0:
        # "(he|she) (threatened|threatens) (my passport|my phone)"
        rx = f"{alt(rng, RARE_SUBJECTS)} {alt(rng, rng.choice(RARE_VERBS))} {alt(rng, RARE_OBJECTS, 1, 3)}"
    elif shape == 1:
        # "(choked|shoved) me( in front of the kids)?"
        rx = f"{alt(rng, rng.choice(RARE_VERBS))} me( {rng.choice(RARE_TAILS)})?"
    elif shape == 2:
        # "i (feel|am|'m) (so )?(terrified|hopeless)"
        rx = f"(i feel|i am|i'm|im) (so |really |completely )?{alt(rng, RARE_FEELINGS, 1, 3)}"
    elif shape == 3:
        # "(took|hid) (my passport|my phone) (and|so) ..."
        verbs = rng.choice([["took", "takes", "taking"], ["hid", "hides", "hiding"],
                            ["broke", "breaks", "smashed"], ["stole", "steals", "stolen"]])
        rx = f"{alt(rng, verbs)} {alt(rng, RARE_OBJECTS, 1, 3)}( {rng.choice(RARE_TAILS)})?"
    elif shape == 4:
        # "no (reason|point) (to|in) (live|living|going on)"
        rx = rng.choice([
            "no (reason|point) (to|in) (live|living|going on)",
            "(end|ending) my (life|own life)",
            "(kill|hurt|harm)(ing)? (him|her)self",
            "(pills|razor|rope) (in|under) (the|my) (drawer|bathroom|bed)",
            "nobody would (miss|notice) (me|if i was gone)",
            "(restraining|protective|protection) order",
            "(call|called|calling) (the )?(police|cops|911) on (him|her|me)",
            "(he|she) (has|owns|keeps) (a )?(gun|rifle|pistol|firearm)s?",
        ])
        rx = f"{rx} {alt(rng, RARE_TAILS, 1, 2)}" if rng.random() < 0.7 else rx
    else:
        # "(he|she) (keeps|kept) (threatening|stalking) (me|us)"
        v = rng.choice(RARE_VERBS)
        rx = (f"{alt(rng, RARE_SUBJECTS)} (keeps|kept|keep|started|starts) {alt(rng, v)} "
              f"(me|us|the kids)( {rng.choice(RARE_TAILS)})?")
    rx = apostrophe_optional(flexible_space(rng, rx))
    if rng.random() < 0.08:
        rx = r"\b" + rx + r"\b"
    return rx


def common_regex(rng):
    names = alt(rng, COMMON_NAMES, 2, 4)
    templates = [
        f"(pick up|pickup|pick-up) {names}",
        f"{names} (left|forgot) (the|his|her) {alt(rng, COMMON_ITEMS, 2, 5)}",
        f"{names} (has|had) (a )?(fever|cold|cough)",
        f"(running|stuck) (about )?{alt(rng, ['5', '10', '15', '20'], 1, 2)} minutes late",
        f"you were late( again)? and {names} (was|is) upset",
        f"{names} (is|was|seems) nervous about the {alt(rng, COMMON_EVENTS, 2, 4)}",
        f"signed {names} up for",
        f"{names} (lost|pulled) a tooth",
        f"(drop|dropping) {names} off",
    ]
    rx = flexible_space(rng, rng.choice(templates))
    if rng.random() < 0.2:
        rx = r"\b" + rx
    return rx


# --- keyword building blocks ------------------------------------------------------------
# Rare vocabulary: family-law and psychology terms the corpus does not use.
RARE_MODIFIERS = [
    "parallel", "supervised", "therapeutic", "forensic", "collaborative", "reunification",
    "nesting", "bird-nesting", "high-conflict", "narcissistic", "triangulated", "enmeshed",
    "relocation", "guardian", "custodial", "noncustodial", "temporary", "ex parte",
    "emergency", "contempt", "stipulated", "mediated", "arbitrated", "court-ordered",
    "interim", "long-distance", "virtual", "right-of-first-refusal", "attachment",
    "trauma-informed", "cognitive", "dialectical", "emotional", "financial", "legal",
    "psychological", "reactive", "avoidant", "anxious", "disorganized",
]
RARE_HEADS = [
    "parenting", "visitation", "custody", "evaluation", "evaluator", "exchange",
    "mediation", "arbitration", "affidavit", "subpoena", "deposition", "stipulation",
    "motion", "hearing", "injunction", "therapy", "therapist", "assessment", "gaslighting",
    "stonewalling", "triangulation", "enmeshment", "parentification", "estrangement",
    "reunification", "modification", "relocation", "guardianship", "litigation",
    "abuse", "neglect", "regression", "dysregulation", "attunement", "co-regulation",
    "boundary-testing", "hoovering", "love-bombing", "flying monkeys", "smear campaign",
]
RARE_SINGLE = [
    "ad litem", "gaslighting", "stonewalling", "triangulation", "parentification",
    "hoovering", "love-bombing", "stipulation", "deposition", "subpoena", "affidavit",
    "guardianship", "estrangement", "enmeshment", "dysregulation", "arbitration",
    "interrogatory", "continuance", "garnishment", "imputation", "emancipation",
    "sequestration", "adjudication", "contemptuous", "narcissism", "codependency",
]
# Everyday words the corpus uses, for the few groups that match.
COMMON_KEYWORDS = [
    "retainer", "karate", "inhaler", "recital", "braces", "library book", "glasses",
    "science fair", "tutoring", "art class", "rain boots", "permission slip", "graduation",
    "thanksgiving", "school photos", "cough syrup", "antibiotic", "bus stop", "grandma",
]


def rare_keyword(rng):
    r = rng.random()
    if r < 0.15:
        return rng.choice(RARE_SINGLE)
    if r < 0.75:
        return f"{rng.choice(RARE_MODIFIERS)} {rng.choice(RARE_HEADS)}"
    return f"{rng.choice(RARE_MODIFIERS)} {rng.choice(RARE_MODIFIERS)} {rng.choice(RARE_HEADS)}"


def maybe_recase(rng, kw):
    """Rule authors do not always write keywords in lower case; the matcher lower-cases them."""
    r = rng.random()
    if r < 0.05:
        return kw.title()
    if r < 0.07:
        return kw.upper()
    return kw


def build_large(rng):
    crisis = [dict(rule) for rule in SEED_RULES["crisis_patterns"]]
    seen = {rule["pattern"] for rule in crisis}
    i = 0
    while len(crisis) < CRISIS_TARGET:
        common = rng.random() < 0.04
        rx = common_regex(rng) if common else rare_regex(rng)
        if rx in seen:
            continue
        seen.add(rx)
        i += 1
        entities = [f"gen_crisis_{i:03d}"]
        if not common and rng.random() < 0.5:
            entities.insert(0, "handler_crisis")
        crisis.append({"pattern": rx, "entities": entities, "is_critical": not common})

    boosts = [dict(rule) for rule in SEED_RULES["keyword_boosts"]]
    entities_so_far = [rule["entity"] for rule in boosts]
    j = 0
    while len(boosts) < KEYWORD_TARGET:
        j += 1
        n = rng.randint(1, 4)
        keywords = []
        while len(keywords) < n:
            kw = rare_keyword(rng)
            if kw not in keywords:
                keywords.append(kw)
        if rng.random() < 0.01:
            keywords[rng.randrange(n)] = rng.choice(COMMON_KEYWORDS)
        keywords = [maybe_recase(rng, kw) for kw in keywords]
        # A few groups boost an entity another group already boosts.
        if rng.random() < 0.05:
            entity = rng.choice(entities_so_far)
        else:
            entity = f"gen_kw_{j:04d}"
            entities_so_far.append(entity)
        boosts.append({"keywords": keywords, "entity": entity})
    return {"crisis_patterns": crisis, "keyword_boosts": boosts}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_rules.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(42)
    large = build_large(rng)
    no_wordb = {
        "crisis_patterns": [
            dict(rule, pattern=rule["pattern"].replace(r"\b", "")) for rule in large["crisis_patterns"]
        ],
        "keyword_boosts": large["keyword_boosts"],
    }
    files = (
        ("seed_rules.json", SEED_RULES),
        ("large_rules.json", large),
        ("large_rules_no_wordb.json", no_wordb),
    )
    for name, rules in files:
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rules, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(
            f"{path}: {len(rules['crisis_patterns'])} crisis regexes, "
            f"{len(rules['keyword_boosts'])} keyword groups",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
