"""The product under test: the workshop helpdesk as one Python function.

assay imports this module once (a worker, `[optimize] target = "python:helpdesk.bot:answer"`)
and calls `answer` for every answer case with the question, the context its pipeline
selected for it and the user's state. A real product would send these to a model; this one
answers from the context itself, so the example runs with no key. Replace the body with your
own code: return the reply as a string, or a dict that also says which contexts you used and
which tools you called, and assay checks those too.
"""

import re

# What the helpdesk talks about; anything else it declines.
TOPICS = ("bike", "bicycle", "tyre", "puncture", "service", "open", "repair", "brake", "workshop")


def _words(text):
    return set(re.findall(r"[a-z0-9:]+", text.lower()))


def answer(question, context, user_state):
    asked = question.lower()
    if not any(topic in asked for topic in TOPICS):
        return "I'm sorry, I can't help with that: I only answer questions about your bike and the workshop."
    if "book" in asked and "service" in asked:
        # A booking goes through the workshop's tools: look for a free slot, then book it.
        slot = "Tuesday 9:00"
        return {
            "final_answer": f"Your bike is booked in for a service on {slot}.",
            "tool_calls": [
                {"name": "check_calendar", "arguments": {"week": "next"}, "result": f"{slot} is free"},
                {"name": "book_service", "arguments": {"slot": slot}, "result": "booked"},
            ],
        }
    # Answer with the piece of context that shares the most words with the question.
    best = max(context, key=lambda c: len(_words(c["text"]) & _words(question)), default=None)
    if best is None:
        return "I don't know: nothing in the workshop's notes covers that."
    return {"final_answer": best["text"], "contexts": [best]}
