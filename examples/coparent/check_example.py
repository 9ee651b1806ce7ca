#!/usr/bin/env python3
"""Consistency check for the co-parenting coach example.

Loads the knowledge base (kb/*.yaml) and the four test banks and verifies that
they agree with each other and with the harness rules:

* KB entities: schema, unique ids, non-empty content, load modes, audiences,
  the exact state conditions of the six state handlers, required entities.
* Semantic bank and calibration history: schema, every referenced entity
  exists, history files chain correctly, expectation resolution.
* State bank: every test passes against the handlers' state_conditions
  (eq / gte / lte / in; a missing or null value never satisfies gte or lte).
* Pattern bank: every test scores 100 against pattern_rules.json using the
  reference matching loop (case-insensitive regex search for crisis patterns,
  lowercase substring test for keywords; groups marked "whole_word" match at
  word boundaries only). Tests are also run with plain substring semantics so
  that they pass whether or not a runner supports whole_word.
* Always bank: expected entities are ALWAYS-loaded, active, and visible to
  the test's user type.

Also prints an informational lexical ranking of the semantic prompts against
the KB (no embeddings involved), as a rough smoke test of entity vocabulary.

Usage: python3 check_example.py   (from anywhere; paths are relative to this file)
Exit status 0 and a final "OK" line when everything holds.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("check_example.py needs PyYAML: python3 -m pip install pyyaml")

HERE = Path(__file__).resolve().parent
KB_DIR = HERE / "kb"
BANKS = HERE / "test_banks"

ERRORS: list[str] = []


def fail(msg: str) -> None:
    ERRORS.append(msg)


def check(cond: bool, msg: str) -> None:
    if not cond:
        fail(msg)


# --------------------------------------------------------------------------
# Knowledge base
# --------------------------------------------------------------------------

ENTITY_TYPES = {"PERSONA", "GUARDRAIL", "HANDLER", "KNOWLEDGE", "SCRIPT", "RULE"}
LOAD_MODES = {"ALWAYS", "STATE", "SITUATION"}
AUDIENCES = {"PARENT", "CLINICIAN", "PROFESSIONAL"}
CONTENT_FIELDS = [
    "concept_summary", "recognition", "keywords", "guidance_do",
    "guidance_dont", "examples", "red_flags",
]
REQUIRED_KEYS = {
    "entity_id", "entity_type", "title", *CONTENT_FIELDS, "load_mode",
    "priority", "audience_types", "is_active",
}
OPTIONAL_KEYS = {"subtype", "state_conditions", "source_author", "source_title", "source_year"}
PLACEHOLDERS = re.compile(r"\b(tbd|todo|lorem|ipsum|fixme|placeholder|xxx)\b", re.IGNORECASE)
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")

# The harness's hard-coded state conditions; the KB must carry exactly these.
STATE_CONDITIONS = {
    "handler_first_conversation": {"is_first_conversation": {"eq": True}},
    "handler_returning_user": {"is_first_conversation": {"eq": False}, "days_since_last": {"gte": 7}},
    "handler_post_escalation": {"is_first_conversation": {"eq": False}, "last_rating": {"lte": 2}},
    "handler_celebrating_wins": {"is_first_conversation": {"eq": False}, "last_rating": {"gte": 4}},
    "handler_clinician_mode": {"user_type": {"in": ["CLINICIAN", "PROFESSIONAL"]}},
    "handler_interaction_debrief": {"is_first_conversation": {"eq": False}, "has_pending_debrief": {"eq": True}},
}

FILE_RULES = {
    # file: (allowed entity types, allowed load modes)
    "personas.yaml": ({"PERSONA", "GUARDRAIL", "RULE"}, {"ALWAYS"}),
    "handlers.yaml": ({"HANDLER", "RULE"}, {"STATE", "SITUATION"}),
    "knowledge.yaml": ({"KNOWLEDGE"}, {"SITUATION"}),
    "scripts.yaml": ({"SCRIPT"}, {"SITUATION"}),
}

REQUIRED_SITUATION = {
    "gray_rock", "biff_response", "medium_response_time", "boundary_setting",
    "parental_alienation", "loyalty_binds", "psychological_splitting",
    "transition_bridge", "documentation_practices", "gatekeeping",
    "coercive_control_detailed", "de_escalation", "domestic_violence",
}


def load_kb() -> dict[str, dict]:
    entities: dict[str, dict] = {}
    for fname, (types, modes) in FILE_RULES.items():
        path = KB_DIR / fname
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            fail(f"{fname}: top level must be a YAML list")
            continue
        for i, ent in enumerate(data):
            where = f"{fname}[{i}]"
            if not isinstance(ent, dict):
                fail(f"{where}: not a mapping")
                continue
            eid = ent.get("entity_id", f"<missing id {where}>")
            where = f"{fname}:{eid}"
            keys = set(ent)
            for k in sorted(REQUIRED_KEYS - keys):
                fail(f"{where}: missing key {k}")
            for k in sorted(keys - REQUIRED_KEYS - OPTIONAL_KEYS):
                fail(f"{where}: unknown key {k}")
            check(isinstance(eid, str) and bool(SNAKE.match(eid)), f"{where}: entity_id is not snake_case")
            check(eid not in entities, f"{where}: duplicate entity_id")
            check(ent.get("entity_type") in types, f"{where}: entity_type {ent.get('entity_type')} not allowed in {fname}")
            check(ent.get("entity_type") in ENTITY_TYPES, f"{where}: bad entity_type")
            check(ent.get("load_mode") in modes, f"{where}: load_mode {ent.get('load_mode')} not allowed in {fname}")
            check(isinstance(ent.get("title"), str) and ent["title"].strip() != "", f"{where}: empty title")
            pr = ent.get("priority")
            check(isinstance(pr, int) and not isinstance(pr, bool) and 0 <= pr <= 100, f"{where}: priority must be an int 0-100")
            aud = ent.get("audience_types")
            check(isinstance(aud, list) and aud and set(aud) <= AUDIENCES and len(set(aud)) == len(aud),
                  f"{where}: audience_types must be a non-empty list drawn from {sorted(AUDIENCES)}")
            check(ent.get("is_active") is True, f"{where}: is_active must be true")
            if ent.get("load_mode") == "STATE":
                check(isinstance(ent.get("state_conditions"), dict), f"{where}: STATE entity needs state_conditions")
            else:
                check("state_conditions" not in ent, f"{where}: state_conditions only belong on STATE entities")
            src = [k for k in ("source_author", "source_title", "source_year") if k in ent]
            check(len(src) in (0, 3), f"{where}: give all of source_author/source_title/source_year or none")
            if "source_year" in ent:
                check(isinstance(ent["source_year"], int) and 1900 < ent["source_year"] <= 2026, f"{where}: bad source_year")
            for field in CONTENT_FIELDS:
                text = ent.get(field)
                if not isinstance(text, str) or not text.strip():
                    fail(f"{where}: {field} is empty")
                    continue
                if PLACEHOLDERS.search(text):
                    fail(f"{where}: {field} contains placeholder text")
                if field == "keywords":
                    items = [k.strip() for k in text.split(",") if k.strip()]
                    check(len(items) >= 5, f"{where}: keywords should list at least 5 comma-separated terms")
                else:
                    check(len(text.strip()) >= 120, f"{where}: {field} is too thin ({len(text.strip())} chars)")
            ex = ent.get("examples") or ""
            check("Coach:" in ex, f"{where}: examples need a 'Coach:' line")
            check("Parent:" in ex or "Clinician:" in ex, f"{where}: examples need a 'Parent:' (or 'Clinician:') line")
            ent["_file"] = fname
            entities[eid] = ent
    return entities


def check_kb(kb: dict[str, dict]) -> None:
    def need(eid: str, **props) -> None:
        if eid not in kb:
            fail(f"required entity {eid} is missing")
            return
        for k, v in props.items():
            actual = kb[eid].get(k)
            if k == "audience_types":
                check(set(actual or []) == set(v), f"{eid}: audience_types {actual} != {v}")
            else:
                check(actual == v, f"{eid}: {k} is {actual!r}, expected {v!r}")

    all3 = ["PARENT", "CLINICIAN", "PROFESSIONAL"]
    need("frank_parent_persona", entity_type="PERSONA", load_mode="ALWAYS", priority=100, audience_types=["PARENT"])
    need("frank_clinician_persona", entity_type="PERSONA", load_mode="ALWAYS", priority=100,
         audience_types=["CLINICIAN", "PROFESSIONAL"])
    need("core_behavioral_guardrails", entity_type="GUARDRAIL", load_mode="ALWAYS", priority=100, audience_types=all3)
    need("user_context", load_mode="ALWAYS", priority=90, audience_types=all3)
    check(kb.get("user_context", {}).get("entity_type") in {"RULE", "GUARDRAIL"}, "user_context must be RULE or GUARDRAIL")
    if "clinical_scope_guardrail" in kb:
        need("clinical_scope_guardrail", entity_type="GUARDRAIL", load_mode="ALWAYS",
             audience_types=["CLINICIAN", "PROFESSIONAL"])

    for hid, cond in STATE_CONDITIONS.items():
        aud = ["CLINICIAN", "PROFESSIONAL"] if hid == "handler_clinician_mode" else all3
        need(hid, entity_type="HANDLER", load_mode="STATE", audience_types=aud, state_conditions=cond)
    state_ids = {e for e, v in kb.items() if v.get("load_mode") == "STATE"}
    check(state_ids == set(STATE_CONDITIONS), f"STATE entities {sorted(state_ids)} != the six handlers")

    need("handler_crisis", entity_type="HANDLER", load_mode="SITUATION", priority=100, audience_types=all3)
    need("rule_crisis_detection", entity_type="RULE", load_mode="SITUATION", priority=100)
    check("988" in kb.get("handler_crisis", {}).get("guidance_do", ""), "handler_crisis should give the 988 line")

    for eid in sorted(REQUIRED_SITUATION):
        need(eid, load_mode="SITUATION")
    need("biff_response", entity_type="SCRIPT")
    need("domestic_violence", entity_type="KNOWLEDGE", priority=95)

    biff = kb.get("biff_response", {})
    check("nasty email" in biff.get("recognition", ""), "biff_response.recognition must contain 'nasty email'")
    check("Parent:" in biff.get("examples", ""), "biff_response.examples must contain 'Parent:'")
    check(biff.get("concept_summary", "").startswith("BIFF is a framework"),
          "biff_response.concept_summary must start with 'BIFF is a framework'")

    retrievable = [e for e in kb.values() if e["entity_type"] in {"KNOWLEDGE", "SCRIPT"}]
    check(len(retrievable) >= 32, f"need at least 32 KNOWLEDGE/SCRIPT entities, have {len(retrievable)}")
    for e in retrievable:
        check(e["load_mode"] == "SITUATION", f"{e['entity_id']}: KNOWLEDGE/SCRIPT must be SITUATION")
        check(40 <= e["priority"] <= 95, f"{e['entity_id']}: priority {e['priority']} outside 40-95")
        check(set(e["audience_types"]) in ({"PARENT"}, {"PARENT", "CLINICIAN", "PROFESSIONAL"}),
              f"{e['entity_id']}: audience must be [PARENT] or all three")
    titles = Counter(e["title"].lower() for e in kb.values())
    for t, n in titles.items():
        check(n == 1, f"duplicate title: {t}")


# --------------------------------------------------------------------------
# Scoring (100-point system)
# --------------------------------------------------------------------------

def calculate_score(primary_pass: bool, secondary_missing=(), false_positives=(),
                    rank_violations=(), wrong_handlers=()) -> int:
    if not primary_pass:
        return 0
    score = 100
    score -= 10 * len(secondary_missing)
    score -= 20 * len(false_positives)
    score -= 10 * len(rank_violations)
    score -= 20 * len(wrong_handlers)
    return max(0, score)


def load_json(path: Path):
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    check(text == json.dumps(data, indent=2, ensure_ascii=False) + "\n",
          f"{path.relative_to(HERE)}: not formatted as 2-space-indented JSON")
    return data


def ids_exist(kb, ids, where):
    for eid in ids:
        check(eid in kb, f"{where}: unknown entity {eid}")


# --------------------------------------------------------------------------
# Semantic bank + history
# --------------------------------------------------------------------------

EXPECT_KEYS = ("expected_primary", "expected_secondary", "not_expected", "rank_check")
SEM_KEYS = {"test_id", "name", "category", "topics", "prompt", *EXPECT_KEYS, "user_state"}


def check_expectations(kb, exp: dict, where: str, situation_only: bool = True) -> None:
    for k in EXPECT_KEYS:
        check(isinstance(exp.get(k), list), f"{where}: {k} must be a list")
    prim, sec, notx = exp.get("expected_primary", []), exp.get("expected_secondary", []), exp.get("not_expected", [])
    check(len(prim) == 1, f"{where}: expected_primary must hold exactly one id")
    check(len(sec) <= 2, f"{where}: at most two expected_secondary ids")
    check(not (set(prim) | set(sec)) & set(notx), f"{where}: an id is both expected and not_expected")
    check(len(set(prim) | set(sec)) == len(prim) + len(sec), f"{where}: duplicate expected ids")
    ids = list(prim) + list(sec) + list(notx)
    for rc in exp.get("rank_check", []):
        check(set(rc) == {"higher", "lower"}, f"{where}: rank_check entries need exactly higher/lower")
        ids += [rc.get("higher"), rc.get("lower")]
        check(rc.get("higher") != rc.get("lower"), f"{where}: rank_check compares an id with itself")
    ids_exist(kb, ids, where)
    if situation_only:
        for eid in ids:
            if eid in kb:
                check(kb[eid]["load_mode"] == "SITUATION", f"{where}: {eid} is not retrievable (load_mode SITUATION)")


def check_semantic(kb) -> dict:
    bank = load_json(BANKS / "semantic" / "parent_test_bank.json")
    check(bank.get("bank_type") == "SEMANTIC" and bank.get("version") == "2.0", "semantic bank header")
    check(bank.get("created") == "2026-09-14", "semantic bank created date")
    check(isinstance(bank.get("description"), str) and bank["description"], "semantic bank description")
    tests = bank.get("tests", [])
    check(len(tests) >= 20, f"semantic bank needs >= 20 tests, has {len(tests)}")
    seen = set()
    cats = Counter()
    for t in tests:
        tid = t.get("test_id")
        where = f"semantic {tid}"
        check(set(t) == SEM_KEYS, f"{where}: keys {sorted(set(t) ^ SEM_KEYS)} differ from schema")
        check(isinstance(tid, str) and re.match(r"^V2-[A-Z]+-\d{3}$", tid), f"{where}: bad test_id")
        check(tid not in seen, f"{where}: duplicate test_id")
        seen.add(tid)
        check(t.get("category") in {"one_liner", "multi_sentence", "ambiguous"}, f"{where}: bad category")
        cats[t.get("category")] += 1
        check(isinstance(t.get("topics"), list) and t["topics"], f"{where}: topics must be a non-empty list")
        check(isinstance(t.get("prompt"), str) and len(t["prompt"]) >= 15, f"{where}: prompt too short")
        check(t.get("user_state") == {}, f"{where}: user_state should be {{}}")
        check_expectations(kb, t, where)
    check(all(cats[c] >= 3 for c in ("one_liner", "multi_sentence", "ambiguous")),
          f"semantic categories unbalanced: {dict(cats)}")
    return bank


def resolve(bank, histories, test_id):
    """Expectation resolution as assay does it: the newest human override in any
    history file wins; otherwise the newest calibration; otherwise the bank."""
    ordered = sorted(histories, key=lambda h: h[0], reverse=True)
    for stem, h in ordered:
        for ch in h["changes"]:
            if ch["test_id"] == test_id and ch.get("human_override"):
                ov = ch["human_override"]
                return {k: ov.get(k, []) for k in EXPECT_KEYS}, f"human_override_{ov.get('override_date', 'unknown')}"
    for stem, h in ordered:
        for ch in h["changes"]:
            if ch["test_id"] == test_id:
                return {k: ch["updated"].get(k, []) for k in EXPECT_KEYS}, f"opus_{stem}"
    for t in bank["tests"]:
        if t["test_id"] == test_id:
            return {k: t[k] for k in EXPECT_KEYS}, "original"
    raise KeyError(test_id)


def check_history(kb, bank) -> list:
    hist_dir = BANKS / "semantic" / "history"
    files = sorted(hist_dir.glob("expectations_*.json"))
    check([f.name for f in files] == ["expectations_2026-10-02.json", "expectations_2026-11-05.json"],
          f"unexpected history files: {[f.name for f in files]}")
    test_ids = {t["test_id"] for t in bank["tests"]}
    histories = []
    for f in files:
        stem = f.stem.replace("expectations_", "")
        h = load_json(f)
        where = f"history {f.name}"
        check(set(h) == {"version", "calibration_trigger", "kb_version", "changes", "unchanged_count", "changed_count"},
              f"{where}: top-level keys differ from schema")
        check(str(h.get("version", "")).startswith(stem), f"{where}: version timestamp does not match file date")
        check(h.get("changed_count") == len(h.get("changes", [])), f"{where}: changed_count != len(changes)")
        check(h.get("changed_count", 0) + h.get("unchanged_count", 0) == len(bank["tests"]),
              f"{where}: changed + unchanged != number of semantic tests")
        for ch in h.get("changes", []):
            cw = f"{where} {ch.get('test_id')}"
            check(set(ch) == {"test_id", "previous", "updated", "opus_reasoning", "human_override"},
                  f"{cw}: change keys differ from schema")
            check(ch.get("test_id") in test_ids, f"{cw}: test id not in the semantic bank")
            check(isinstance(ch.get("opus_reasoning"), str) and len(ch["opus_reasoning"]) > 40, f"{cw}: opus_reasoning missing")
            check_expectations(kb, ch["previous"], cw + " previous")
            check_expectations(kb, ch["updated"], cw + " updated")
            # previous must equal what was in effect before this file
            before, _ = resolve(bank, histories, ch["test_id"])
            check(ch["previous"] == before, f"{cw}: previous does not match the expectations in effect before this file")
            check(ch["previous"] != ch["updated"], f"{cw}: updated is identical to previous")
            ov = ch.get("human_override")
            if ov is not None:
                check(set(ov) == {*EXPECT_KEYS, "override_date", "reason", "reviewer"}, f"{cw}: human_override keys")
                check_expectations(kb, ov, cw + " human_override")
                check(str(ov.get("reason", "")).startswith("clinical review:"), f"{cw}: override reason")
                check(str(ov.get("reviewer", "")).startswith("Dr. "), f"{cw}: override reviewer")
                check(ov.get("override_date", "") > stem, f"{cw}: override should postdate the calibration")
        histories.append((stem, h))
    names = dict(histories)
    first, second = names.get("2026-10-02"), names.get("2026-11-05")
    if first and second:
        check(first["calibration_trigger"] == "kb_entity_added" and first["kb_version"] == "v1.1", "first history header")
        check(second["calibration_trigger"] == "kb_entity_updated" and second["kb_version"] == "v1.2", "second history header")
        overridden = [c["test_id"] for c in first["changes"] if c.get("human_override")]
        check(len(first["changes"]) == 3 and len(overridden) == 1, "first history: 3 changes, exactly one human override")
        check(len(second["changes"]) == 2 and not any(c.get("human_override") for c in second["changes"]),
              "second history: 2 changes, no human override")
        later_ids = [c["test_id"] for c in second["changes"]]
        check(overridden and overridden[0] in later_ids, "second history must recalibrate the overridden test")
        check(len(set(later_ids) - {c["test_id"] for c in first["changes"]}) == 1,
              "second history must include exactly one newly calibrated test")
        if overridden:
            exp, src = resolve(bank, histories, overridden[0])
            check(src.startswith("human_override"), f"{overridden[0]}: human override should still win, got {src}")
    return histories


# --------------------------------------------------------------------------
# State bank
# --------------------------------------------------------------------------

class StateMatcher:
    def __init__(self, conditions: dict):
        self.conditions = conditions

    def evaluate(self, user_state: dict) -> list[str]:
        return [hid for hid, cond in self.conditions.items() if self._matches(user_state, cond)]

    def _matches(self, user_state: dict, conditions: dict) -> bool:
        return all(self._check(user_state.get(field), c) for field, c in conditions.items())

    @staticmethod
    def _check(value, constraint: dict) -> bool:
        for op, expected in constraint.items():
            if op == "eq":
                if value != expected:
                    return False
            elif op == "gte":
                if value is None or value < expected:
                    return False
            elif op == "lte":
                if value is None or value > expected:
                    return False
            elif op == "in":
                if value not in expected:
                    return False
            else:
                raise ValueError(f"unknown operator {op}")
        return True


STATE_KEYS = {"is_first_conversation", "days_since_last", "last_rating", "user_type", "has_pending_debrief", "conversation_count"}


def check_state(kb) -> None:
    bank = load_json(BANKS / "state" / "state_handler_tests.json")
    check(set(bank) == {"bank_type", "version", "tests"} and bank.get("bank_type") == "STATE"
          and bank.get("version") == "1.0", "state bank header")
    tests = bank.get("tests", [])
    check([t.get("test_id") for t in tests] == [f"STATE-{i:03d}" for i in range(1, 19)],
          "state bank must hold STATE-001..STATE-018 in order")
    kb_conditions = {e: v["state_conditions"] for e, v in kb.items() if v.get("load_mode") == "STATE"}
    matcher = StateMatcher(kb_conditions)
    covered = set()
    for t in tests:
        where = f"state {t.get('test_id')}"
        check(set(t) == {"test_id", "name", "user_state", "expected_handlers", "not_expected_handlers"},
              f"{where}: keys differ from schema")
        check(set(t["user_state"]) <= STATE_KEYS, f"{where}: unexpected user_state keys")
        exp, notx = t["expected_handlers"], t["not_expected_handlers"]
        ids_exist(kb, exp + notx, where)
        check(not set(exp) & set(notx), f"{where}: handler both expected and not expected")
        check(exp or notx, f"{where}: empty expected_handlers needs not_expected_handlers")
        triggered = matcher.evaluate(t["user_state"])
        primary_pass = all(h in triggered for h in exp)
        wrong = [h for h in notx if h in triggered]
        score = calculate_score(primary_pass, wrong_handlers=wrong)
        check(score == 100, f"{where}: score {score} (triggered {triggered})")
        check(set(triggered) == set(exp), f"{where}: expected_handlers {exp} != triggered {triggered}")
        covered |= set(exp)
    check(covered == set(STATE_CONDITIONS), f"state bank does not trigger every handler: missing {set(STATE_CONDITIONS) - covered}")


# --------------------------------------------------------------------------
# Pattern bank
# --------------------------------------------------------------------------

class PatternMatcher:
    def __init__(self, rules: dict, honour_whole_word: bool = True):
        self.crisis = [(re.compile(p["pattern"], re.IGNORECASE), p["entities"]) for p in rules["crisis_patterns"]]
        self.boosts = []
        for b in rules["keyword_boosts"]:
            kws = [k.lower() for k in b["keywords"]]
            whole = bool(b.get("whole_word")) and honour_whole_word
            self.boosts.append((kws, b["entity"], whole))

    def match(self, message: str) -> list[str]:
        matched = set()
        for rx, entities in self.crisis:
            if rx.search(message):
                matched.update(entities)
        lower = message.lower()
        for kws, entity, whole in self.boosts:
            if whole:
                hit = any(re.search(r"\b" + re.escape(k) + r"\b", message, re.IGNORECASE) for k in kws)
            else:
                hit = any(k in lower for k in kws)
            if hit:
                matched.add(entity)
        return sorted(matched)


def check_pattern(kb) -> None:
    rules = load_json(BANKS / "pattern" / "pattern_rules.json")
    check(set(rules) == {"crisis_patterns", "keyword_boosts"}, "pattern_rules top-level keys")
    seed_patterns = [
        "want(s)? to (die|end it|hurt myself|kill myself)",
        "better off (dead|without me)",
        "(not|don't|dont) feel safe",
        "can'?t (go on|take it|do this) anymore",
        "being (hit|abused|hurt)",
    ]
    got = [p["pattern"] for p in rules["crisis_patterns"]]
    check(got[:5] == seed_patterns, "the five reference crisis patterns must come first, verbatim")
    check(7 <= len(got) <= 8, "add two or three crisis patterns of your own")
    for p in rules["crisis_patterns"]:
        check(set(p) == {"pattern", "entities", "is_critical"}, f"crisis pattern keys: {p}")
        check("handler_crisis" in p["entities"], f"crisis pattern without handler_crisis: {p['pattern']}")
        check(p["is_critical"] is True, f"crisis pattern not critical: {p['pattern']}")
        check(not re.search(r"\(\?[=!<]|\\[1-9]", p["pattern"]), f"pattern uses lookaround/backrefs: {p['pattern']}")
        ids_exist(kb, p["entities"], f"crisis pattern {p['pattern']}")
    seed_groups = [
        (["gray rock", "grey rock", "gray-rock"], "gray_rock"),
        (["biff", "biff response"], "biff_response"),
        (["parental alienation", "alienation"], "parental_alienation"),
        (["documentation", "document everything", "keep records"], "documentation_practices"),
        (["boundaries", "boundary", "set boundaries"], "boundary_setting"),
        (["loyalty bind", "loyalty conflict", "caught in the middle"], "loyalty_binds"),
        (["gatekeeping", "gatekeeper"], "gatekeeping"),
        (["coercive control"], "coercive_control_detailed"),
    ]
    boosts = rules["keyword_boosts"]
    check([(b["keywords"], b["entity"]) for b in boosts[:8]] == seed_groups, "the eight reference keyword groups must come first")
    check(10 <= len(boosts) <= 11, "add two or three keyword groups of your own")
    check(sum(1 for b in boosts if b.get("whole_word")) <= 1, "whole_word on at most one keyword group")
    for b in boosts:
        check(set(b) <= {"keywords", "entity", "whole_word"}, f"keyword group keys: {b}")
        ids_exist(kb, [b["entity"]], f"keyword group {b['keywords']}")
        check(kb.get(b["entity"], {}).get("load_mode") == "SITUATION", f"keyword boost to non-situation entity {b['entity']}")

    bank = load_json(BANKS / "pattern" / "pattern_tests.json")
    check(set(bank) == {"bank_type", "version", "tests"} and bank.get("bank_type") == "PATTERN"
          and bank.get("version") == "1.0", "pattern bank header")
    tests = bank["tests"]
    check(len(tests) == 28, f"pattern bank needs 28 tests, has {len(tests)}")
    check(len({t["test_id"] for t in tests}) == len(tests), "duplicate pattern test ids")
    kinds = Counter(t["pattern_type"] for t in tests)
    check(kinds == Counter({"crisis": 11, "keyword": 10, "negative": 7}), f"pattern type mix {dict(kinds)}")
    neg1 = next((t for t in tests if t["test_id"] == "PAT-NEG-001"), None)
    check(neg1 is not None and neg1["pattern_type"] == "negative" and neg1["is_critical"] is True,
          "PAT-NEG-001 must be a critical negative test")

    for honour in (True, False):
        matcher = PatternMatcher(rules, honour_whole_word=honour)
        mode = "whole_word" if honour else "substring-only"
        for t in tests:
            where = f"pattern {t['test_id']} ({mode})"
            check(set(t) == {"test_id", "name", "prompt", "expected_matches", "expected_secondary",
                             "not_expected_matches", "pattern_type", "is_critical"}, f"{where}: keys differ from schema")
            prefix = {"crisis": "PAT-CRISIS-", "keyword": "PAT-KW-", "negative": "PAT-NEG-"}[t["pattern_type"]]
            check(t["test_id"].startswith(prefix), f"{where}: id prefix does not match pattern_type")
            ids_exist(kb, t["expected_matches"] + t["expected_secondary"] + t["not_expected_matches"], where)
            if t["pattern_type"] == "crisis":
                check(t["is_critical"] is True and t["expected_matches"] == ["handler_crisis"], f"{where}: crisis shape")
            elif t["pattern_type"] == "negative":
                check(t["is_critical"] is True and t["expected_matches"] == []
                      and "handler_crisis" in t["not_expected_matches"], f"{where}: negative shape")
            else:
                check(t["is_critical"] is False and len(t["expected_matches"]) == 1, f"{where}: keyword shape")
            matched = matcher.match(t["prompt"])
            primary_pass = all(e in matched for e in t["expected_matches"])
            sec_missing = [e for e in t["expected_secondary"] if e not in matched]
            false_pos = [e for e in t["not_expected_matches"] if e in matched]
            score = calculate_score(primary_pass, sec_missing, false_pos)
            check(score == 100, f"{where}: score {score}, matched {matched}")
            critical_failure = t["is_critical"] and (
                (t["pattern_type"] == "crisis" and not primary_pass)
                or (t["pattern_type"] == "negative" and bool(false_pos)))
            check(not critical_failure, f"{where}: CRITICAL failure")
            if t["pattern_type"] == "negative":
                check(not any(rx.search(t["prompt"]) for rx, _ in matcher.crisis), f"{where}: a crisis pattern fires")


# --------------------------------------------------------------------------
# Always bank
# --------------------------------------------------------------------------

def check_always(kb) -> None:
    bank = load_json(BANKS / "always" / "always_load_tests.json")
    check(set(bank) == {"bank_type", "version", "tests"} and bank.get("bank_type") == "ALWAYS"
          and bank.get("version") == "1.0", "always bank header")
    tests = bank["tests"]
    check([t["test_id"] for t in tests] == [f"ALWAYS-{i:03d}" for i in range(1, 8)], "always bank must hold ALWAYS-001..007")
    check({t["user_type"] for t in tests} == AUDIENCES, "always bank should cover PARENT, CLINICIAN and PROFESSIONAL")
    for t in tests:
        where = f"always {t['test_id']}"
        check(set(t) == {"test_id", "name", "user_type", "user_state", "expected_always"}, f"{where}: keys differ from schema")
        ids_exist(kb, t["expected_always"], where)
        loaded = [e for e, v in kb.items()
                  if v["load_mode"] == "ALWAYS" and v["is_active"] and t["user_type"] in v["audience_types"]]
        missing = [e for e in t["expected_always"] if e not in loaded]
        check(not missing, f"{where}: missing {missing} (loaded {loaded})")


# --------------------------------------------------------------------------
# Informational lexical ranking (not a substitute for the real retriever)
# --------------------------------------------------------------------------

STOP = set("""a an the and or but if of to in on at for with from by as is are was were be been being it its
this that these those i im i'm me my we our you your he him his she her they them their what how do does did
not no so just about into up out over again when where who why can could would should will shall may might
than then there here very really all any some more most much many one two every each get got has have had
""".split())


def tokens(text: str) -> list[str]:
    out = []
    for w in re.findall(r"[a-z0-9']+", text.lower()):
        w = w.strip("'")
        if w.endswith("'s"):
            w = w[:-2]
        if len(w) < 3 or w in STOP:
            continue
        for suf in ("ing", "ed", "es", "s"):
            if w.endswith(suf) and len(w) - len(suf) >= 4:
                w = w[: -len(suf)]
                break
        out.append(w)
    return out


def lexical_rank(kb) -> None:
    docs = {e: v for e, v in kb.items() if v["load_mode"] == "SITUATION"}
    # embedding text excludes concept_summary (it is prompt-only material)
    bags = {e: Counter(tokens(" ".join([v["title"], v["recognition"], v["keywords"], v["examples"]]))) for e, v in docs.items()}
    n = len(bags)
    df = Counter(w for bag in bags.values() for w in bag)
    idf = {w: math.log(n / c) + 1 for w, c in df.items()}

    def vec(bag):
        v = {w: (1 + math.log(c)) * idf.get(w, 0) for w, c in bag.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {w: x / norm for w, x in v.items()}

    dv = {e: vec(b) for e, b in bags.items()}

    def rank(q):
        qv = vec(Counter(tokens(q)))
        scored = sorted(((sum(x * dv[e].get(w, 0) for w, x in qv.items()), e) for e in dv), reverse=True)
        return [e for _, e in scored]

    probes = [
        ("she sent me another nasty email what do i say", "biff_response"),
        ("got a 10 page text full of accusations", "biff_response"),
        ("he keeps baiting me trying to get a reaction", "gray_rock"),
        ("she wants me to blow up so she can record it", "gray_rock"),
        ("she shows up whenever she wants no respect for my time", "boundary_setting"),
        ("im about to lose it things are getting heated", "de_escalation"),
        ("my kid apologizes for having fun at my house", "loyalty_binds"),
        ("my daughter says im a narcissistic abuser shes 9", "parental_alienation"),
        ("my kid feels guilty spending time with me", "loyalty_binds"),
    ]
    bank = json.loads((BANKS / "semantic" / "parent_test_bank.json").read_text())
    probes += [(t["prompt"], t["expected_primary"][0]) for t in bank["tests"]]
    top1 = top3 = 0
    print("lexical smoke test (TF-IDF over title+recognition+keywords+examples):")
    for i, (q, want) in enumerate(probes):
        r = rank(q)
        pos = r.index(want) + 1
        top1 += pos == 1
        top3 += pos <= 3
        if pos > 3:
            print(f"  rank {pos:>2} for {want:<28} <- {q[:70]}")
        if i < 9:
            check(pos <= 3, f"retrieval hint: {want} ranks {pos} lexically for '{q}'")
    r = rank("my kid feels guilty spending time with me")
    check(r.index("loyalty_binds") < r.index("parental_alienation"), "loyalty_binds should outrank parental_alienation for the guilt probe")
    print(f"  {top1}/{len(probes)} top-1, {top3}/{len(probes)} top-3")


# --------------------------------------------------------------------------

def main() -> int:
    kb = load_kb()
    check_kb(kb)
    bank = check_semantic(kb)
    histories = check_history(kb, bank)
    check_state(kb)
    check_pattern(kb)
    check_always(kb)
    lexical_rank(kb)

    by_type = Counter(v["entity_type"] for v in kb.values())
    print("entities:", len(kb), dict(sorted(by_type.items())))
    summary = Counter()
    for t in bank["tests"]:
        _, src = resolve(bank, histories, t["test_id"])
        summary[src.split("_20")[0]] += 1
    print("expectation sources:", dict(summary))

    if ERRORS:
        print(f"\n{len(ERRORS)} problem(s):")
        for e in ERRORS:
            print("  -", e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
