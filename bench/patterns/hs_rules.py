"""The benchmark's pattern rules as Hyperscan expressions (shared by hs_bench.py and hs_bench.c).

Each crisis regex is compiled as written, with ``HS_FLAG_CASELESS | HS_FLAG_UTF8 |
HS_FLAG_UCP`` (Python's ``re`` on ``str`` is Unicode-aware: ``\\s``, ``\\b`` and case folding
are Unicode's), without ``HS_FLAG_SINGLEMATCH`` (the callback keeps each entity once;
single-match was no faster on the large set, 150-180 k against 180-190 k msgs/s), except that Hyperscan rejects ``\\b`` under ``HS_FLAG_UCP``: a regex with a word boundary (42
of the large set's 500) is compiled without it, so its ``\\b``, ``\\s`` and ``\\w`` are ASCII's.
That differs from Python only where such a rule's boundary touches a non-ASCII letter or its
``\\s`` meets a non-ASCII space (none does in the generated corpus: the checksums agree). Each
distinct keyword (lower-cased, as the seed does) becomes one expression, its bytes escaped as
``\\xHH``, with the same flags: "the lower-cased message contains the keyword" is "the message
contains it, ignoring case" for ASCII keywords in text without ``İ`` or the Kelvin sign (the
only characters that lower-case to ASCII letters; the generated corpus has neither). A rule
Hyperscan rejects is reported by the compiler with its index. No start of match is asked for
(``HS_FLAG_SOM_LEFTMOST`` is not needed: whether a rule fires is decided by its first end).
"""

import json

CASELESS = 1
SINGLEMATCH = 8
UTF8 = 32
UCP = 64
FLAGS = CASELESS | UTF8 | UCP


def flags_for(expression, unicode=True):
    """Hyperscan's flags for ``expression``: no UCP if it has a word boundary (see above);
    neither UTF8 nor UCP unless ``unicode``."""
    if not unicode:
        return FLAGS & ~(UCP | UTF8)
    return FLAGS & ~UCP if "\\b" in expression or "\\B" in expression else FLAGS


def escape(literal):
    """A Hyperscan regex matching exactly ``literal`` (each byte as ``\\xHH``)."""
    return "".join(f"\\x{b:02x}" for b in literal.encode("utf-8"))


def load(path):
    """(expressions, entities) for the rules file at ``path``.

    ``expressions[i]`` is expression ``i`` (str); ``entities[i]`` the entity ids it brings in.
    Crisis regexes come first, in rule order, then the distinct keywords.
    """
    with open(path, encoding="utf-8") as f:
        rules = json.load(f)
    expressions, entities = [], []
    for rule in rules.get("crisis_patterns", []):
        expressions.append(rule["pattern"])
        entities.append(list(rule["entities"]))
    by_keyword = {}
    for rule in rules.get("keyword_boosts", []):
        if rule.get("whole_word"):
            raise SystemExit("hs_rules: whole_word keyword groups are not supported")
        for kw in rule["keywords"]:
            lower = kw.lower()
            if lower not in by_keyword:
                by_keyword[lower] = len(expressions)
                expressions.append(escape(lower))
                entities.append([])
            ids = entities[by_keyword[lower]]
            if rule["entity"] not in ids:
                ids.append(rule["entity"])
    counts = (len(rules.get("crisis_patterns", [])), len(rules.get("keyword_boosts", [])))
    return expressions, entities, counts


def write_tsv(path, expressions, entities):
    """One line per expression: ``flags<TAB>entity,entity<TAB>expression`` (for hs_bench.c)."""
    with open(path, "w", encoding="utf-8") as f:
        for expr, ids in zip(expressions, entities):
            assert "\t" not in expr and "\n" not in expr
            f.write(f"{flags_for(expr)}\t{','.join(ids)}\t{expr}\n")
