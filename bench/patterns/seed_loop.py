#!/usr/bin/env python3
"""Reference for the pattern-matcher benchmark: the seed's Python matching loop (000 §6.3).

Usage: seed_loop.py RULES.json CORPUS.txt

Compiles the rules as the seed does (each crisis regex with ``re.IGNORECASE``, keywords
lower-cased), then times one pass of the seed's ``match`` over every message of the corpus
(one message per line). Prints one JSON line of the same shape as the Rust example
``pattern_bench``, with ``"engine": "python-seed-loop"``; its ``checksum`` is computed the same
way (FNV-1a 64 over each message's matched entity ids, sorted, joined by ``,``, plus ``\\n``),
so the two engines' answers can be compared for equality.
"""

import json
import re
import sys
import time

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = 0xFFFFFFFFFFFFFFFF


class SeedMatcher:
    """The seed's PatternMatcher: crisis regexes, then lower-cased substring keywords."""

    def __init__(self, rules):
        self.crisis = [
            (re.compile(rule["pattern"], re.IGNORECASE), rule["entities"])
            for rule in rules.get("crisis_patterns", [])
        ]
        self.boosts = [
            ([kw.lower() for kw in rule["keywords"]], rule["entity"])
            for rule in rules.get("keyword_boosts", [])
        ]

    def match(self, message):
        found = set()
        for regex, entities in self.crisis:
            if regex.search(message):
                found.update(entities)
        lowered = message.lower()
        for keywords, entity in self.boosts:
            if any(kw in lowered for kw in keywords):
                found.add(entity)
        return list(found)


def fnv1a(h, data):
    for b in data:
        h ^= b
        h = (h * FNV_PRIME) & MASK
    return h


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: seed_loop.py RULES.json CORPUS.txt")
    rules_path, corpus_path = sys.argv[1], sys.argv[2]
    with open(rules_path, encoding="utf-8") as f:
        rules = json.load(f)
    with open(corpus_path, encoding="utf-8", newline="") as f:
        messages = f.read().split("\n")
    if messages and messages[-1] == "":
        messages.pop()

    start = time.perf_counter()
    matcher = SeedMatcher(rules)
    build_seconds = time.perf_counter() - start

    match = matcher.match
    results = []
    append = results.append
    start = time.perf_counter()
    for message in messages:
        append(match(message))
    seconds = time.perf_counter() - start

    checksum = FNV_OFFSET
    total = 0
    for ids in results:
        total += len(ids)
        checksum = fnv1a(checksum, (",".join(sorted(ids)) + "\n").encode("utf-8"))

    print(json.dumps({
        "engine": "python-seed-loop",
        "rules": rules_path,
        "crisis_rules": len(matcher.crisis),
        "keyword_groups": len(matcher.boosts),
        "messages": len(messages),
        "seconds": seconds,
        "messages_per_second": len(messages) / seconds,
        "matched_entity_total": total,
        "checksum": f"{checksum:016x}",
        "build_seconds": build_seconds,
        "repeat": 1,
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
