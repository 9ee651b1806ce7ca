"""Writes the embedding benchmark's sentences: 1,000 varied English chat messages, 8-40 words.

Usage: python sentences.py OUT.txt [--count 1000] [--seed 2026]

One sentence per line. Deterministic (a seeded random.Random), standard library only. The
sentences are built from templates of a co-parenting / support chat (the kind of text assay
embeds), with slots filled from word lists, so they vary in wording, length and punctuation
(questions, lists, numbers, times, names, contractions) rather than repeating one pattern.
Lengths are spread over 8-40 words (the mean is printed on stderr).
"""

import argparse
import random
import sys

NAMES = ["Maya", "Leo", "Sam", "Ava", "Noah", "Zoe", "Eli", "Ruby", "Jonah", "Iris", "Theo", "Lena"]
PARENTS = ["your dad", "your mum", "my ex", "their father", "their mother", "the other parent", "her dad", "his mum"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "the weekend"]
TIMES = ["8am", "9:30", "noon", "3pm", "half past four", "6pm", "7:15", "after dinner", "before school"]
PLACES = [
    "the school gate", "the library", "the petrol station on Hill Road", "grandma's house",
    "the swimming pool", "the train station", "the doctor's surgery", "the park by the river",
]
EVENTS = [
    "the parents' evening", "the football match", "the dentist appointment", "the school play",
    "the birthday party", "the piano lesson", "the half-term trip", "the court hearing",
    "the mediation session", "the holiday handover",
]
FEELINGS = ["frustrated", "worried", "exhausted", "relieved", "anxious", "hopeful", "upset", "calm", "confused", "hurt"]
THINGS = [
    "the school uniform", "her inhaler", "his homework folder", "the passport", "the swimming kit",
    "the tablet charger", "the medicine", "the permission slip", "the winter coat", "the lunch money",
]
AMOUNTS = ["£20", "£45", "£120", "£300", "half the fees", "the deposit", "the usual amount"]
OPENERS = ["", "", "", "Hi, ", "Hey, ", "Just so you know, ", "Quick question: ", "Sorry to bother you, ", "Honestly, ", "Okay, "]
CLOSERS = ["", "", "", " Thanks.", " Let me know.", " Please reply when you can.", " Thanks for understanding.", " Cheers."]

TEMPLATES = [
    "can you pick {child} up from {place} at {time} on {day}?",
    "I won't be able to make {event} on {day} because of work, could we swap weekends?",
    "{child} left {thing} at your place again, can you drop it off before {time}?",
    "I'm feeling really {feeling} about how the last handover went and I think we need to talk.",
    "{parent} keeps changing the plan at the last minute and the kids are getting {feeling}.",
    "the school emailed about {event}, did you get it too?",
    "I paid {amount} for {event} last month, can you send your share by {day}?",
    "{child} said they don't want to go to {place} anymore and I don't know what to do.",
    "please stop messaging me late at night, it's not helping anyone.",
    "we agreed {time} on {day} and you were forty minutes late, again.",
    "{child} has a temperature so I'm keeping them home, I'll update you at {time}.",
    "is it okay if {child} stays an extra night, we have {event} early on {day}?",
    "I feel {feeling} every time we argue in front of the kids, can we keep it to email?",
    "the lawyer says we need to agree the holiday plan before {event}.",
    "could you remind {child} to bring {thing} on {day}, they forgot it last week too?",
    "I know things have been hard, but {child} really missed you at {event}.",
    "what time works for you on {day}, I can do {time} or after six.",
    "{parent} told the kids about the new partner without asking me and I'm {feeling}.",
    "I've attached the receipts for {thing} and {event}, it comes to {amount} in total.",
    "can we meet at {place} instead, it's easier for me with the traffic on {day}.",
    "{child} and {child2} have been fighting all week, is something going on at your house?",
    "the mediator suggested we use a shared calendar, would you be open to that?",
    "I'm not trying to start an argument, I just need to know who is collecting {child} on {day}.",
    "thanks for being flexible about {event}, it meant a lot to {child}.",
    "you didn't send {amount} this month and I can't cover {thing} on my own.",
    "if you're going to be late on {day}, text me before {time}, not after.",
    "{child} wants to invite you to {event}, it starts at {time} at {place}.",
    "I'm {feeling} and honestly I don't know how much longer I can keep doing this.",
    "do you still have {thing}, I've looked everywhere and {child} needs it by {day}.",
    "can we swap {day} for the following week, my shift pattern changed again?",
    "can you call me after {time} tonight, please?",
    "{child} forgot {thing} again, can you check your car?",
    "running late, I'll be at {place} by {time}.",
    "please confirm you're collecting {child} on {day} at {time}.",
    "I'm {feeling}, can we talk later this week?",
    "did {child} take the medicine before bed last night?",
]

EXTRAS = [
    " I've already told {child} about it.",
    " It would really help with the school run.",
    " I'd rather not go through the lawyers for something this small.",
    " Last time it took three days to sort out and {child} was {feeling} the whole time.",
    " If not, I can ask my sister to help, but she's away until {day}.",
    " We can talk about the rest at {event}.",
    " I'll be at {place} from {time} if that's easier.",
    " Let's try to keep this calm for the kids' sake.",
    " I know you're busy, but this matters.",
    " The teacher said it's the second time this term.",
]


def sentence(rng: random.Random) -> str:
    child, child2 = rng.sample(NAMES, 2)
    slots = {
        "child": child,
        "child2": child2,
        "parent": rng.choice(PARENTS),
        "day": rng.choice(DAYS),
        "time": rng.choice(TIMES),
        "place": rng.choice(PLACES),
        "event": rng.choice(EVENTS),
        "feeling": rng.choice(FEELINGS),
        "thing": rng.choice(THINGS),
        "amount": rng.choice(AMOUNTS),
    }
    body = rng.choice(TEMPLATES).format(**slots)
    for extra in rng.sample(EXTRAS, rng.choice([0, 0, 1, 1, 2, 3])):
        body += extra.format(**slots)
    text = rng.choice(OPENERS) + body + rng.choice(CLOSERS)
    return text[0].upper() + text[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out, seen = [], set()
    while len(out) < args.count:
        s = sentence(rng)
        if 8 <= len(s.split()) <= 40 and s not in seen:
            seen.add(s)
            out.append(s)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    words = [len(s.split()) for s in out]
    print(
        f"sentences: wrote {len(out)} to {args.out}, {min(words)}-{max(words)} words, mean {sum(words) / len(words):.1f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
