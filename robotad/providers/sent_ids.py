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

`sent_call_ids` gives the ids of one request that its vendor would refuse, each with the id
sent in its place; every other id goes as it is, so a history of ids the vendor made is sent
byte for byte as before (its prompt cache is undisturbed). The replacement keeps what it
can of the original — each character outside ``[A-Za-z0-9_-]`` made ``_``, cut to leave room
under the bound — and adds ``_`` and 16 hex digits of the original's SHA-256, so it is
deterministic: a call and its results get the same one, each request of the session sends
the same one (a clash aside, below), and the log's requests (`robotad.session.reporting`,
which hold the history's own ids) say what was sent. The ids of one request never collide:
each replacement is checked against the ids going out unchanged and the replacements before
it, and on a clash (a 64-bit hash coincidence, an id crafted to look like a replacement, a
new call the model made under the very id it was sent) the digest is taken again with a
counter until it is free (Anthropic refuses a repeated ``tool_use`` id
as well: ``messages.N.content.M: `tool_use` ids must be unique``). The history itself is
never changed; a reply makes new calls of its own and refers to no id of the request, so
nothing is mapped back. An id the history itself repeats across rounds (an import may hold
one) is sent repeated, as it is held.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.shapes import Message

__all__ = ["ANTHROPIC_CALL_IDS", "OPENAI_CALL_IDS", "CallIdRule", "result_id", "sent_call_ids"]

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

    def replacement(self, call_id: str, attempt: int = 0) -> str:
        """The id sent for a refused `call_id`: its word characters, cut to fit, then ``_``
        and a digest of `call_id` (of `attempt` and `call_id` after the first attempt)."""
        keyed = call_id if attempt == 0 else f"{attempt}:{call_id}"
        digest = hashlib.sha256(keyed.encode("utf-8", "surrogatepass")).hexdigest()
        kept = _REFUSED_CHARACTER.sub("_", call_id)
        if self.max_length is not None:
            kept = kept[: self.max_length - _DIGEST_LENGTH - 1]
        return f"{kept}_{digest[:_DIGEST_LENGTH]}"


#: Anthropic Messages: ``^[a-zA-Z0-9_-]+$``.
ANTHROPIC_CALL_IDS = CallIdRule(word_characters=True, max_length=None)
#: OpenAI Chat Completions: 1 to 40 characters.
OPENAI_CALL_IDS = CallIdRule(word_characters=False, max_length=40)


def result_id(message: Message) -> str:
    """The id a tool message answers, as sent: ``""`` when it names none."""
    return message.tool_call_id if isinstance(message.tool_call_id, str) else ""


def sent_call_ids(history: Sequence[Message], rule: CallIdRule) -> dict[str, str]:
    """Each id of `history`'s assistant calls and tool results that `rule` refuses, with the
    id to send instead (see the module doc); empty when it refuses none. Two distinct ids of
    `history` are never sent as one."""
    ids = dict.fromkeys(_sent_ids(history))
    refused = [call_id for call_id in ids if not rule.accepts(call_id)]
    if not refused:
        return {}
    taken = {call_id for call_id in ids if rule.accepts(call_id)}
    replacements: dict[str, str] = {}
    for call_id in refused:
        attempt = 0
        sent = rule.replacement(call_id)
        while sent in taken:
            attempt += 1
            sent = rule.replacement(call_id, attempt)
        taken.add(sent)
        replacements[call_id] = sent
    return replacements


def _sent_ids(history: Sequence[Message]) -> Iterable[str]:
    """Every tool-call id a request of `history` carries, in order, repeats included."""
    for message in history:
        if message.role == "assistant":
            yield from (call.id for call in message.calls)
        elif message.role == "tool":
            yield result_id(message)
