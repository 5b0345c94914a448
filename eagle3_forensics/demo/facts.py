"""The demo world's facts: fixed sentences, each with a successor (one cycle through all of them).

A document starts at a random fact and follows the successor with probability :data:`P_FOLLOW`,
else jumps to a random fact: low entropy, so the trained target's greedy continuation is
predictable, yet it depends on context (which fact came before).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

N_FACTS = 48
P_FOLLOW = 0.9

_SUBJECTS = (
    "the cat",
    "a dog",
    "my friend",
    "the teacher",
    "our model",
    "the drafter",
    "a small bird",
    "the server",
    "this engine",
    "the old man",
    "a student",
    "the robot",
    "her sister",
    "the team",
    "the pilot",
    "a farmer",
)
VERBS = (
    "sees",
    "likes",
    "finds",
    "builds",
    "reads",
    "writes",
    "checks",
    "loads",
    "drafts",
    "accepts",
    "rejects",
    "moves",
    "counts",
    "sorts",
    "maps",
    "trains",
)
_OBJECTS = (
    "the red ball",
    "a long book",
    "every token",
    "the weights",
    "a quiet river",
    "the big tree",
    "some numbers",
    "the offsets",
    "a new table",
    "the green door",
    "two apples",
    "the last layer",
    "a warm bowl of soup",
    "the vocabulary",
    "three small boxes",
    "the blue kite",
)
_TAILS = (
    "today.",
    "again.",
    "in the morning.",
    "very slowly.",
    "with care.",
    "before lunch.",
    "at night.",
    "for the test.",
    "without errors.",
    "on the server.",
    "every day.",
    "quickly!",
    "twice.",
    "at noon.",
)


@dataclass(frozen=True)
class World:
    facts: tuple[str, ...]
    successor: tuple[int, ...]

    def document(self, rng: random.Random, sentences: int) -> str:
        f = rng.randrange(len(self.facts))
        out = []
        for _ in range(sentences):
            out.append(self.facts[f])
            f = self.successor[f] if rng.random() < P_FOLLOW else rng.randrange(len(self.facts))
        return " ".join(out)


def make_world(seed: int) -> World:
    """:data:`N_FACTS` sentences with distinct (subject, verb) and a successor cycle through all of them."""
    rng = random.Random(seed * 7919 + 1)  # noqa: S311 - demo data, not cryptography
    seen: set[tuple[int, int]] = set()
    facts: list[str] = []
    while len(facts) < N_FACTS:
        s, v = rng.randrange(len(_SUBJECTS)), rng.randrange(len(VERBS))
        if (s, v) in seen:
            continue
        seen.add((s, v))
        facts.append(f"{_SUBJECTS[s]} {VERBS[v]} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}")
    order = list(range(N_FACTS))
    rng.shuffle(order)
    successor = [0] * N_FACTS
    for i, f in enumerate(order):
        successor[f] = order[(i + 1) % N_FACTS]
    return World(tuple(facts), tuple(successor))
