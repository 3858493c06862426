"""Benchmark workloads: sessions of turns in token ids, generated from a seed or read from a JSON file.

A session is one shopper: a short product question (one turn) or a support conversation (several turns).
Every system receives exactly these token ids, so all of them do the same work. A later turn's prompt is the
previous turn's prompt + the answer the system under test actually generated + the turn's own tokens (the end
of the assistant message and the shopper's next message), so a prefix cache can serve the whole history.
Turn k+1 is issued when turn k finishes; first turns arrive at ``arrival_s`` (all 0: offline throughput;
Poisson at ``rate``: online latency).

This module uses the standard library only: the peers' scripts import it from their own virtual environments.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["short", "support", "single"]
WORKLOADS = ("ecommerce", "single")


@dataclass
class WorkloadTurn:
    # Turn 0: the whole prompt. Later turns: the tokens appended after the previous turn's answer.
    token_ids: list[int]
    max_tokens: int


@dataclass
class Session:
    session_id: str
    kind: Kind
    arrival_s: float  # when the first turn arrives, seconds after the run starts
    turns: list[WorkloadTurn]

    @property
    def num_output_tokens(self) -> int:
        return sum(t.max_tokens for t in self.turns)


@dataclass
class Workload:
    name: str
    seed: int
    rate: float | None  # requests/s of the Poisson arrivals; None: all at once
    ignore_eos: bool
    sessions: list[Session]
    eos_token_ids: list[int] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # how it was generated (sizes, prompt lengths)

    @property
    def num_requests(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for s in self.sessions:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        return {
            "name": self.name,
            "seed": self.seed,
            "rate": self.rate,
            "arrivals": "poisson" if self.rate else "all at once",
            "ignore_eos": self.ignore_eos,
            "num_sessions": len(self.sessions),
            "num_requests": self.num_requests,
            "sessions_by_kind": kinds,
            "max_output_tokens": sum(s.num_output_tokens for s in self.sessions),
            **self.info,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "rate": self.rate,
            "ignore_eos": self.ignore_eos,
            "eos_token_ids": self.eos_token_ids,
            "info": self.info,
            "sessions": [asdict(s) for s in self.sessions],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json()))


def next_prompt(prompt: list[int], answer: list[int], turn: WorkloadTurn, eos_token_ids: Iterable[int]) -> list[int]:
    """The prompt of the turn after ``answer``: history + answer (without its final EOS) + the turn's tokens.

    The EOS is dropped because the turn's own tokens begin with the end-of-message marker, which for this chat
    template is the EOS token itself; keeping both would put it twice in the history.
    """
    eos = set(eos_token_ids)
    answer = list(answer)
    if answer and answer[-1] in eos:
        answer.pop()
    return list(prompt) + answer + list(turn.token_ids)


def load(path: str | Path, tokenize: Callable[[str], list[int]] | None = None) -> Workload:
    """Read a workload file (the format ``Workload.save`` writes).

    A turn may give ``text`` instead of ``token_ids`` (written by hand); ``tokenize`` turns it into ids then.
    ``arrival_s`` defaults to 0 and ``kind`` to "short" for a one-turn session, "support" otherwise.
    """
    data = json.loads(Path(path).read_text())
    sessions = []
    for i, s in enumerate(data["sessions"]):
        turns = []
        for t in s["turns"]:
            ids = t.get("token_ids")
            if ids is None:
                if tokenize is None:
                    raise ValueError(f"session {i}: a turn has text but no tokenizer was given")
                ids = tokenize(t["text"])
            turns.append(WorkloadTurn([int(x) for x in ids], int(t["max_tokens"])))
        if not turns:
            raise ValueError(f"session {i} has no turns")
        kind = s.get("kind") or ("short" if len(turns) == 1 else "support")
        sessions.append(Session(str(s.get("session_id", f"s{i}")), kind, float(s.get("arrival_s", 0.0)), turns))
    return Workload(
        name=data.get("name", Path(path).stem),
        seed=int(data.get("seed", 0)),
        rate=data.get("rate"),
        ignore_eos=bool(data.get("ignore_eos", False)),
        sessions=sessions,
        eos_token_ids=[int(x) for x in data.get("eos_token_ids", [])],
        info=dict(data.get("info", {})),
    )


# ---------------------------------------------------------------- generation


@dataclass(frozen=True)
class Shape:
    """Sizes of the generated ``ecommerce`` workload (the defaults follow the issue; ``--quick`` shrinks them)."""

    short_share: float = 0.7
    short_output: tuple[int, int] = (50, 100)  # per question
    support_output: tuple[int, int] = (500, 1000)  # over the whole conversation
    support_turns: tuple[int, int] = (3, 5)


FULL_SHAPE = Shape()
# Same mix with outputs about a quarter as long: the whole comparison in a few minutes on 2 CPU cores.
QUICK_SHAPE = Shape(short_output=(16, 32), support_output=(120, 200), support_turns=(2, 3))

STORE = "Northwind Outfitters"
PRODUCTS = [
    ("Trailblazer 2 hiking boots", "$129", "waterproof leather, sizes 6-13, brown or black"),
    ("Summit 28L daypack", "$74", "recycled nylon, laptop sleeve, rain cover included"),
    ("Ridge merino base layer", "$58", "150 g/m2 merino wool, sizes XS-XXL, navy or charcoal"),
    ("Cascade rain jacket", "$149", "3-layer shell, pit zips, sizes S-XXL, red, green or black"),
    ("Alpine down vest", "$99", "650-fill responsibly sourced down, packs into its pocket"),
    ("Trail running socks (3 pack)", "$24", "cushioned, moisture wicking, sizes S/M/L"),
    ("Basecamp 2 tent", "$249", "two-person, 2.1 kg, freestanding, aluminium poles"),
    ("Glacier sleeping bag", "$189", "comfort rating -5 C, synthetic fill, left or right zip"),
    ("Canyon water bottle 1L", "$19", "stainless steel, insulated, keeps drinks cold 24 h"),
    ("Pathfinder trekking poles", "$89", "carbon, cork grips, folding, 110-130 cm"),
    ("Coastline fleece jacket", "$65", "recycled polyester fleece, full zip, sizes XS-XL"),
    ("Headlamp 400", "$39", "400 lumens, USB-C rechargeable, red night mode"),
]
CATALOG_SIZE = 7  # products listed in the system prompt; questions may name the others (not in the catalog)
SHORT_QUESTIONS = [
    "Do you have the {p} in my size?",
    "How much is the {p}, and is it in stock?",
    "Is the {p} good for winter hiking?",
    "What colours does the {p} come in?",
    "Can I return the {p} if it does not fit?",
    "What is the difference between the {p} and the {q}?",
    "Would the {p} go well with the {q}?",
    "How long does shipping take for the {p}?",
    "Is the {p} waterproof?",
    "Which would you recommend for a weekend trip, the {p} or the {q}?",
]
SUPPORT_OPENERS = [
    "Hi, I ordered the {p} last week (order #{n}) and it still has not arrived. Can you check what happened?",
    "Hello. The {p} I received (order #{n}) has a broken zip. I would like a replacement or a refund.",
    "I was charged twice for my order #{n} with the {p}. Can you help me sort this out?",
    "Hi! I want to exchange the {p} from order #{n} for a bigger size. How does that work?",
]
SUPPORT_FOLLOW_UPS = [
    "Thanks. It was shipped to my home address, and the tracking page has not changed for four days.",
    "Okay. Do I need to print a label myself, or will you send one by email?",
    "I would prefer a refund to my card. How long will that take to show up?",
    "Could you also tell me if the {p} is back in stock in black?",
    "That is fine. Can a human agent call me tomorrow morning to confirm?",
    "One more thing: can I add the {p} to the same order, or is it too late?",
    "I still have the original box. Does the item need to be unused for the return?",
    "Great, and will I get an email when the replacement ships?",
]
SINGLE_PROMPT = (
    "Write a product description for the {p} for our store page. Mention who it is for, the materials, how it "
    "compares with similar products, and what a shopper should check before buying. Here is what we know about "
    "it: {d}. Our customers are mostly weekend hikers and families who camp in spring and autumn, and they often "
    "ask about weight, warmth, durability and how easy it is to clean. Keep a warm, practical tone, avoid "
    "exaggerated claims, and finish with one sentence about our 30-day return policy and free shipping on "
    "orders over $50. For comparisons, these are the similar products we sell:\n{similar}"
)


def store_system_prompt() -> str:
    """The one system prompt every session shares (about 440 tokens with this model's tokenizer)."""
    catalog = "\n".join(f"- {name}: {price}; {desc}." for name, price, desc in PRODUCTS[:CATALOG_SIZE])
    return (
        f"You are the shopping assistant of {STORE}, an online outdoor store. You help shoppers find products "
        "from the store's catalog, answer questions about sizes, materials, prices, stock, shipping and returns, "
        "and hand over to a human agent when asked.\n\n"
        "Rules:\n"
        "- Only recommend products from the catalog below. Never invent products, prices, discounts or stock "
        "levels; quote them exactly as given.\n"
        "- If the catalog does not contain what the shopper wants, say so and suggest a different search or a "
        "human agent.\n"
        "- Keep answers friendly and plain; no more than three products at a time.\n"
        "- For orders, refunds or account questions you cannot see, offer to connect the shopper with a human "
        "agent.\n"
        "- Never ask for payment details, passwords or full card numbers.\n\n"
        "Policies:\n"
        "Returns: unused items can be returned within 30 days of delivery for a full refund.\n"
        "Shipping: standard shipping takes 3-5 business days; orders over $50 ship free.\n"
        "Support hours: human agents are available Monday to Friday, 9:00-17:00.\n\n"
        f"Catalog:\n{catalog}"
    )


class ChatTokens:
    """Token ids of chat-template pieces (ChatML here), built from the tokenizer so any template works."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def first_turn(self, system: str, user: str) -> list[int]:
        conv = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text = self.tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        return self.encode(text)

    def next_turn(self, user: str) -> list[int]:
        """What follows an assistant answer: the end of the answer's message, the user's, the assistant header.

        Taken as the difference between two rendered conversations, so it is exactly what the chat template
        would write for the whole history."""
        a = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
        ]
        before = self.tokenizer.apply_chat_template(a, tokenize=False, add_generation_prompt=False)
        after = self.tokenizer.apply_chat_template(
            a + [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
        # The rendered assistant message ends with its end marker; the answer tokens never contain it (an EOS
        # the model sampled is dropped by next_prompt), so the marker belongs to the next turn's tokens.
        end = before.rstrip("\n")
        end_marker = end[end.rindex("a") + 1 :]
        return self.encode(end_marker + before[len(end) :] + after[len(before) :])


def _split(total: int, parts: int, rng: random.Random, minimum: int) -> list[int]:
    """``total`` split into ``parts`` random positive shares of at least ``minimum`` each."""
    weights = [rng.random() + 0.5 for _ in range(parts)]
    spare = total - minimum * parts
    shares = [minimum + int(spare * w / sum(weights)) for w in weights]
    shares[-1] += total - sum(shares)
    return shares


def _arrivals(n: int, rate: float | None, rng: random.Random) -> list[float]:
    if not rate or math.isinf(rate):
        return [0.0] * n
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(round(t, 6))
    return out


def generate(
    name: str,
    tokenizer: Any,
    num_sessions: int,
    seed: int = 0,
    rate: float | None = None,
    ignore_eos: bool = False,
    shape: Shape = FULL_SHAPE,
    eos_token_ids: Iterable[int] = (),
) -> Workload:
    """A deterministic workload: same name, sizes and seed give the same token ids."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}")
    rng = random.Random(seed)
    chat = ChatTokens(tokenizer)
    eos = list(eos_token_ids)
    if name == "single":
        p, _, d = PRODUCTS[0]
        similar = "\n".join(f"- {name}: {price}; {desc}." for name, price, desc in PRODUCTS[1:6])
        prompt = chat.first_turn("You are a helpful copywriter.", SINGLE_PROMPT.format(p=p, d=d, similar=similar))
        session = Session("single-0", "single", 0.0, [WorkloadTurn(prompt, 128)])
        return Workload(name, seed, None, ignore_eos, [session], eos, {"prompt_tokens": len(prompt)})

    system = store_system_prompt()
    system_tokens = len(chat.first_turn(system, ""))
    num_short = round(num_sessions * shape.short_share)
    kinds: list[Kind] = ["short"] * num_short + ["support"] * (num_sessions - num_short)
    rng.shuffle(kinds)
    arrivals = _arrivals(num_sessions, rate, rng)
    sessions = []
    for i, (kind, arrival) in enumerate(zip(kinds, arrivals)):
        p, q = rng.sample([name for name, _, _ in PRODUCTS], 2)
        if kind == "short":
            question = rng.choice(SHORT_QUESTIONS).format(p=p, q=q)
            turns = [WorkloadTurn(chat.first_turn(system, question), rng.randint(*shape.short_output))]
        else:
            num_turns = rng.randint(*shape.support_turns)
            outputs = _split(rng.randint(*shape.support_output), num_turns, rng, shape.short_output[0])
            opener = rng.choice(SUPPORT_OPENERS).format(p=p, n=rng.randint(10000, 99999))
            turns = [WorkloadTurn(chat.first_turn(system, opener), outputs[0])]
            for follow_up, out in zip(rng.sample(SUPPORT_FOLLOW_UPS, num_turns - 1), outputs[1:]):
                turns.append(WorkloadTurn(chat.next_turn(follow_up.format(p=q)), out))
        sessions.append(Session(f"{kind}-{i}", kind, arrival, turns))
    # JSON-shaped (lists, not tuples) so a saved and reloaded workload compares equal.
    info = {"system_prompt_tokens": system_tokens, "shape": json.loads(json.dumps(asdict(shape)))}
    return Workload(name, seed, rate, ignore_eos, sessions, eos, info)
