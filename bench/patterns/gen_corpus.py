#!/usr/bin/env python3
"""Generate a corpus of co-parenting chat messages for the pattern-matcher benchmark.

Usage: gen_corpus.py OUT.txt [--messages N]   (default N = 200000)

One message per line (UTF-8, '\\n'-terminated), 5-40 words each, built from templates and
word lists in this file. Deterministic: ``random.Random(42)``. Roughly:

* ~2% of messages contain a phrase that one of the seed's crisis regexes (000 §5.5) matches;
  a few more contain near misses that it must not match (curly apostrophes, "do feel safe");
* ~15% contain one or more of the seed's keywords ("gray rock", "boundaries",
  "documentation", ...), in varied case;
* ~5% are partly or wholly upper case;
* ~3% contain non-ASCII characters (é, ’, ï, —).

The shares actually obtained (measured with the seed's rules) are printed on stderr.
"""

import argparse
import random
import re
import sys

KIDS = ["Emma", "Liam", "Noah", "Olivia", "Ava", "Mia", "Lucas", "Sophia", "Jack", "Zoe",
        "Ethan", "Lily", "the kids", "both kids", "the baby"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
        "tomorrow", "tonight", "this weekend", "next weekend", "next week"]
TIMES = ["7:30", "8", "8:15", "noon", "3", "3:30", "4:45", "5", "5:30", "6", "6:15", "7"]
PLACES = ["school", "soccer", "swim practice", "piano", "daycare", "your mom's place",
          "the library", "the dentist", "the pediatrician", "Grandma's", "the mall",
          "the park", "art class", "karate", "the bus stop", "the exchange spot"]
ITEMS = ["inhaler", "shin guards", "swimsuit", "reading log", "permission slip", "jacket",
         "lunchbox", "water bottle", "charger", "retainer", "library book", "backpack",
         "rain boots", "homework folder", "soccer cleats", "allergy meds"]
EXPENSES = ["dentist", "summer camp", "field trip", "braces", "daycare", "tutoring",
            "soccer registration", "school photos", "new shoes", "glasses", "therapy copay"]
MEDS = ["Tylenol", "ibuprofen", "the cough syrup", "her allergy pill", "his antibiotic"]
ROADS = ["the highway", "Main Street", "the bridge", "I-5", "the school zone", "Oak Avenue"]
EVENTS = ["birthday party", "sleepover", "school play", "parent-teacher conference",
          "field trip", "recital", "soccer tournament", "science fair", "graduation",
          "spring break", "summer camp", "Thanksgiving", "winter break"]

FILLERS = [
    "Can you pick up {kid} from {place} at {time}?",
    "I'll drop {kid} off at {time} on {day}.",
    "{kid} has {place} on {day}, please don't forget the {item}.",
    "Running about {n} minutes late, traffic on {road}.",
    "Is it ok if {kid} stays an extra night {day}?",
    "Did {kid} finish the homework for {day}?",
    "I sent ${amount} for the {expense}.",
    "Your half of the {expense} bill is ${amount}, due {day}.",
    "{kid} had a fever last night so I gave {med} at {time}.",
    "{kid} left the {item} in my car again.",
    "The {event} is {day} at {time}, are you going?",
    "Please confirm the pickup time for {day}.",
    "Can we swap {day} for next weekend?",
    "The teacher emailed about the report card.",
    "{kid} wants to bring a friend to the {event}.",
    "I'm at the exchange spot, where are you?",
    "Thanks for letting me know.",
    "Ok, see you at {time}.",
    "{kid} says hi and wants to call you {day}.",
    "We need to talk about the schedule for {event}.",
    "Please stop texting me after {time} at night.",
    "I don't agree with that, but fine.",
    "The school nurse called about {kid}.",
    "Can you send me the receipt for the {expense}?",
    "I already paid the {expense}, check the app.",
    "{kid} is asleep, I'll have them call you in the morning.",
    "Who is taking {kid} to {place} {day}?",
    "I think {kid} is nervous about the {event}.",
    "My lawyer will reply about the {expense} costs.",
    "Let's keep this about the kids, please.",
    "I'm not going to argue over text.",
    "We agreed on {time}, not {time2}.",
    "Please pack the {item} and the {item2} for {day}.",
    "Is {kid} allergic to anything new?",
    "The parenting app shows {day} as my day.",
    "I can do {time} but not earlier.",
    "{kid} lost a tooth today and was so proud.",
    "Reminder: {event} photos are due {day}.",
    "Can you stop bringing your new partner to the exchange?",
    "I just need a straight answer about {day}.",
    "Fine, whatever works for {kid}.",
    "You were late again and {kid} was upset.",
    "Who signed {kid} up for {place} without asking me?",
    "I'll be there, just running a little late.",
    "Sorry, my phone died, I'm here now.",
    "Happy to switch weekends if you need to.",
    "We should ask the mediator about summer.",
    "The court order says alternating holidays.",
]
SHORT = ["ok", "thanks", "noted", "fine", "sure", "got it", "see you then", "sounds good"]

KEYWORD_SENTENCES = [
    "My therapist suggested I try {gray} with you from now on.",
    "I'm going {gray}, so expect short answers.",
    "I read about the {biff} method, brief and friendly.",
    "Can you keep replies {biff} style please?",
    "That is {alienation} and you know it.",
    "The counselor said {kid} feels caught in the middle.",
    "Please don't put {kid} in a loyalty bind again.",
    "This is a loyalty conflict for {kid}.",
    "I'm keeping {documentation} of every missed exchange.",
    "My lawyer told me to document everything from now on.",
    "I'll keep records of every late pickup.",
    "I need to set boundaries about late-night calls.",
    "Please respect my {boundaries} around the new house.",
    "That crosses a boundary, I'm not discussing it.",
    "{kid} needs clear boundaries at both houses.",
    "Stop gatekeeping the kids from my family.",
    "Your mom is acting like a gatekeeper again.",
    "The mediator mentioned coercive control in our session.",
    "What you're describing sounds like coercive control.",
    "The school needs documentation of the custody schedule.",
    "Is it alienation if {kid} refuses to come?",
]
KEYWORD_SLOTS = {
    "gray": ["gray rock", "grey rock", "gray-rock", "Gray Rock", "GREY ROCK"],
    "biff": ["BIFF", "biff", "Biff response"],
    "alienation": ["parental alienation", "Parental Alienation", "alienation"],
    "documentation": ["documentation", "Documentation", "a log"],
    "boundaries": ["boundaries", "Boundaries", "BOUNDARIES", "limits"],
}

CRISIS_SENTENCES = [
    "Some days I just want to die.",
    "I honestly want to end it all.",
    "Sometimes I think they'd be better off without me.",
    "Everyone would be better off dead than dealing with me.",
    "I don't feel safe when you show up unannounced.",
    "I do not feel safe at the exchange anymore.",
    "I dont feel safe going back there.",
    "I can't do this anymore.",
    "I cant take it anymore, I'm done.",
    "I can't go on anymore like this.",
    "{kid} told the counselor about being hit at your place.",
    "I'm being abused and nobody believes me.",
    "He wants to hurt myself? No, I mean I want to hurt myself.",
    "She said she wants to kill myself, I mean herself, I'm scared.",
    "I feel like I am being hurt by all of this.",
    "I Want To Die, I am so tired.",
]
# Near misses: must not match the seed's crisis regexes.
NEAR_MISSES = [
    "I do feel safe with the new arrangement.",
    "I can't make it on Thursday anymore.",
    "Better off taking the bus, honestly.",
    "{kid} wants to be a doctor when she grows up.",
    "I can take it from here.",
]
NON_ASCII_EXTRAS = [
    "Meet at the café on Main?",
    "Renée can watch them until {time}.",
    "She’s fine, just tired.",
    "I’ll bring the naïve art project home.",
    "Zoë’s recital is {day} — don’t be late.",
    "The résumé workshop is at {time}.",
    "I can’t take it anymore.",  # curly apostrophe: not matched by can'?t
    "Gray rock — that’s what my therapist said.",
]


def fill(rng, template):
    return template.format(
        kid=rng.choice(KIDS), day=rng.choice(DAYS), time=rng.choice(TIMES),
        time2=rng.choice(TIMES), place=rng.choice(PLACES), item=rng.choice(ITEMS),
        item2=rng.choice(ITEMS), expense=rng.choice(EXPENSES), med=rng.choice(MEDS),
        road=rng.choice(ROADS), event=rng.choice(EVENTS), n=rng.choice([5, 10, 15, 20]),
        amount=rng.choice([25, 40, 60, 85, 120, 150, 300]),
        **{slot: rng.choice(words) for slot, words in KEYWORD_SLOTS.items()},
    )


def words(s):
    return len(s.split())


def curly(s):
    return s.replace("'", "\u2019")


def message(rng):
    special = []
    r = rng.random()
    if r < 0.02:
        special.append(fill(rng, rng.choice(CRISIS_SENTENCES)))
    elif r < 0.025:
        special.append(fill(rng, rng.choice(NEAR_MISSES)))
    if rng.random() < 0.155:
        special.append(fill(rng, rng.choice(KEYWORD_SENTENCES)))
        if rng.random() < 0.1:
            special.append(fill(rng, rng.choice(KEYWORD_SENTENCES)))
    non_ascii = rng.random() < 0.03
    if non_ascii:
        special.append(fill(rng, rng.choice(NON_ASCII_EXTRAS)))

    while sum(words(s) for s in special) > 40:
        special.pop()
    target = rng.randint(5, 40)
    used = sum(words(s) for s in special)
    sentences = []
    for _ in range(12):
        if used >= target:
            break
        s = fill(rng, rng.choice(FILLERS))
        if used + words(s) > 40:
            continue
        sentences.append(s)
        used += words(s)
    for s in special:
        sentences.insert(rng.randint(0, len(sentences)), s)
    text = " ".join(sentences)
    while words(text) < 5:
        text = f"{text} {rng.choice(SHORT)}".strip()

    r = rng.random()
    if r < 0.02:
        text = text.upper()
    elif r < 0.05:
        text = " ".join(w.upper() if rng.random() < 0.3 else w for w in text.split())
    if non_ascii and rng.random() < 0.5:
        text = curly(text)
    return text


SEED_CRISIS = [
    r"want(s)? to (die|end it|hurt myself|kill myself)",
    r"better off (dead|without me)",
    r"(not|don't|dont) feel safe",
    r"can'?t (go on|take it|do this) anymore",
    r"being (hit|abused|hurt)",
]
SEED_KEYWORDS = ["gray rock", "grey rock", "gray-rock", "biff", "alienation", "documentation",
                 "document everything", "keep records", "boundar", "loyalty bind",
                 "loyalty conflict", "caught in the middle", "gatekeep", "coercive control"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()
    rng = random.Random(42)
    crisis = [re.compile(p, re.IGNORECASE) for p in SEED_CRISIS]
    n_crisis = n_kw = n_non_ascii = n_words = 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for _ in range(args.messages):
            m = message(rng)
            assert "\n" not in m and "\r" not in m
            f.write(m)
            f.write("\n")
            n_words += words(m)
            n_crisis += any(rx.search(m) for rx in crisis)
            low = m.lower()
            n_kw += any(k in low for k in SEED_KEYWORDS)
            n_non_ascii += not m.isascii()
    n = args.messages
    print(
        f"{args.out}: {n} messages, {n_words / n:.1f} words/message on average; "
        f"crisis regex hit {100 * n_crisis / n:.2f}%, seed keyword hit {100 * n_kw / n:.2f}%, "
        f"non-ASCII {100 * n_non_ascii / n:.2f}%",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
