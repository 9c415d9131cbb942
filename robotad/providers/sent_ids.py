"""Tool-call ids as a vendor takes them: a history's ids mapped, per request, to ones it accepts.

A history's tool-call ids are whatever the server that made each reply chose (`ToolCall.id`,
answered by a tool message's ``tool_call_id``); an imported session (its artifact names a
provider of its own), or a named provider whose ``kind`` changed between daemon runs, sends
them to another vendor. One the
vendor refuses fails the request, and — being in the history — every later one: the session
is stuck. What each vendor takes (`CallIdRule`):

- **Anthropic** — ``tool_use.id`` and ``tool_result.tool_use_id`` must match
  ``^[a-zA-Z0-9_-]+$`` (the API's own 400: ``messages.N.content.M.tool_use.id: String should
  match pattern '^[a-zA-Z0-9_-]+$'``); no length bound is known. Ids some OpenAI-compatible
  servers make (Kimi-style ``functions.Bash:0``, anything with a dot, colon or space) are
  refused.
- **OpenAI Chat Completions** — no rule for the characters is documented or reported; the
  length is bounded: ``Invalid 'messages[N].tool_calls[0].id': string too long. Expected a
  string with maximum length 40`` (``string_above_max_length``). Later reports name 64, and
  some requests were taken longer: 40, the strictest seen, is the bound (vLLM's
  ``chatcmpl-tool-…`` ids have 46 characters). Proxies (OpenRouter, LiteLLM) pass it on, so
  it applies to every server of the ``openai`` kind.

A history's ids can also repeat across rounds: an imported artifact (import refuses only a
repeat of a call still without a result), or a session stored before repeats were caught as
replies came (`robotad.agent.call_ids`, architecture decision 25), holds the ids of a server
that numbers each reply's calls from zero (``call_0``; Kimi-style ``functions.Bash:0``) in
every round that called. Anthropic refuses a repeated ``tool_use`` id (``messages.N.content.M:
`tool_use` ids must be unique``), so every request of such a session failed. OpenAI refuses two
tool messages of one ``tool_call_id`` (``Invalid parameter: Duplicate value for
'tool_call_id'``); whether it also refuses an id repeated across rounds is neither documented
nor reported, so repeats are sent apart for both vendors — which changes nothing in a history
without one.

`sent_call_ids` gives, per message of the history, the ids its request sends: an id's first
call is sent as it is when the vendor takes it; a refused id, and every later call made under
an id an earlier call (of an earlier round, or earlier in the same one) already used, is sent
as a replacement. A result goes with the call of its own round — the assistant message its
results follow — the k-th result answering an id there with the k-th call of that round under
it; so a round's results are sent under the very id its call is, never under an earlier
round's. A history whose ids are the vendor's own and each used once is sent byte for byte as
before (its prompt cache is undisturbed). The replacement keeps what it can of the original —
each character outside ``[A-Za-z0-9_-]`` made ``_``, cut to leave room under the bound — and
adds ``_`` and 16 hex digits of a SHA-256 of the original (of which call under it, for a
repeat), so it is deterministic: a call and its results get the same one, each request of the
session sends the same one (a clash aside, below; a round keeps its place among the calls
under its id as the history grows), and the log's requests (`robotad.session.reporting`,
which hold the history's own ids) say what was sent. The ids of one request never collide:
each replacement is checked against the ids going out unchanged and the replacements before
it, and on a clash (a 64-bit hash coincidence, an id crafted to look like a replacement, a
new call the model made under the very id it was sent) the digest is taken again with a
counter until it is free. The history itself is never changed; a reply makes new calls of its
own and refers to no id of the request, so nothing is mapped back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.shapes import Message

__all__ = ["ANTHROPIC_CALL_IDS", "OPENAI_CALL_IDS", "CallIdRule", "sent_call_ids"]

#: A character no vendor's rule refuses.
_REFUSED_CHARACTER = re.compile(r"[^A-Za-z0-9_-]")
#: Hex digits of the original's digest a replacement ends with (64 bits).
_DIGEST_LENGTH = 16


@dataclass(frozen=True, slots=True)
class CallIdRule:
    """What one vendor accepts as a tool-call id: at least one character, at most
    `max_length` (None: no bound), only ``[A-Za-z0-9_-]`` when `word_characters`."""

    word_characters: bool
    max_length: int | None

    def __post_init__(self) -> None:
        if self.max_length is not None and self.max_length <= _DIGEST_LENGTH + 1:
            raise ValueError(f"a bound of {self.max_length} leaves no room for a digest")

    def accepts(self, call_id: str) -> bool:
        if not call_id or (self.max_length is not None and len(call_id) > self.max_length):
            return False
        return not (self.word_characters and _REFUSED_CHARACTER.search(call_id))

    def replacement(self, call_id: str, attempt: int = 0, repeat: int = 0) -> str:
        """The id sent for the call `repeat` places after the first made under `call_id`
        (0: that first one, sent so when the rule refuses `call_id`): its word characters,
        cut to fit, then ``_`` and a digest of `call_id` — of `attempt` or `repeat` with it
        when either is not 0."""
        if repeat:
            keyed = f"{attempt}/{repeat}:{call_id}"
        elif attempt:
            keyed = f"{attempt}:{call_id}"
        else:
            keyed = call_id
        digest = hashlib.sha256(keyed.encode("utf-8", "surrogatepass")).hexdigest()
        kept = _REFUSED_CHARACTER.sub("_", call_id)
        if self.max_length is not None:
            kept = kept[: self.max_length - _DIGEST_LENGTH - 1]
        return f"{kept}_{digest[:_DIGEST_LENGTH]}"


#: Anthropic Messages: ``^[a-zA-Z0-9_-]+$``.
ANTHROPIC_CALL_IDS = CallIdRule(word_characters=True, max_length=None)
#: OpenAI Chat Completions: 1 to 40 characters.
OPENAI_CALL_IDS = CallIdRule(word_characters=False, max_length=40)

#: One call of a history as its request tells it: its id and how many calls before it were
#: made under that id (0: the first).
_Slot = tuple[str, int]


def _result_id(message: Message) -> str:
    """The id a tool message answers, as sent: ``""`` when it names none."""
    return message.tool_call_id if isinstance(message.tool_call_id, str) else ""


def sent_call_ids(history: Sequence[Message], rule: CallIdRule) -> list[tuple[str, ...]]:
    """For each message of `history`, the ids a request sends in it: an assistant message's,
    one for each of its calls in order; a tool message's, the one it answers; none for
    another (see the module doc). Two calls of `history` are never sent under one id, and a
    result is sent under the id its own round's call is."""
    slots = _slots(history)
    sent = _sent(slots, rule)
    return [tuple(sent[slot] for slot in message) for message in slots]


def _sent(slots: Iterable[Iterable[_Slot]], rule: CallIdRule) -> dict[_Slot, str]:
    """The id sent for each of `slots`: its own when `rule` accepts it and no call before
    made it, else a replacement free of every other id sent."""
    ordered = dict.fromkeys(slot for message in slots for slot in message)
    kept = {slot for slot in ordered if slot[1] == 0 and rule.accepts(slot[0])}
    taken = {call_id for call_id, _ in kept}
    sent: dict[_Slot, str] = {}
    for slot in ordered:
        if slot in kept:
            sent[slot] = slot[0]
            continue
        call_id, repeat = slot
        attempt = 0
        candidate = rule.replacement(call_id, repeat=repeat)
        while candidate in taken:
            attempt += 1
            candidate = rule.replacement(call_id, attempt, repeat)
        taken.add(candidate)
        sent[slot] = candidate
    return sent


def _slots(history: Sequence[Message]) -> list[tuple[_Slot, ...]]:
    """For each message of `history`, the calls it makes or answers, as `sent_call_ids` lists
    their ids. A result answers, of its round's calls under its id, the one as many places on
    as the round's results under that id before it (the last when there are more results
    than calls); outside a round that made the id, the last call made under it."""
    made: dict[str, int] = {}
    #: The round in progress (the assistant message the results now coming follow): for each
    #: id, the slots of its calls and how many results answered it so far.
    calls: dict[str, list[_Slot]] = {}
    answered: dict[str, int] = {}
    out: list[tuple[_Slot, ...]] = []
    for message in history:
        if message.role == "tool":
            call_id = _result_id(message)
            own = calls.get(call_id)
            if own:
                taken = answered.get(call_id, 0)
                answered[call_id] = taken + 1
                out.append((own[min(taken, len(own) - 1)],))
            else:
                out.append(((call_id, max(made.get(call_id, 0) - 1, 0)),))
            continue
        calls, answered = {}, {}
        mine: list[_Slot] = []
        if message.role == "assistant":
            for call in message.calls:
                slot = (call.id, made.get(call.id, 0))
                made[call.id] = slot[1] + 1
                calls.setdefault(call.id, []).append(slot)
                mine.append(slot)
        out.append(tuple(mine))
    return out
