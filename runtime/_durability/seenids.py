"""The message ids an actor's log holds, as a Bloom filter: a fresh id is told apart from a
retried one without asking the store.

Every ``ask``/``send`` that carries a ``message_id`` (and every ``ctx.send``, whose ids are
derived from the step) must check that the id is not in the log already. Asking the store
costs a read per message (a thread hop on SQLite, a round trip on PostgreSQL) although
almost every id is new. The cell loads its log's ids once (:class:`~actorlog.store.
MessageIdIndex`), and the journal adds every id it writes; from then on an id the filter has
never seen is certainly new (a Bloom filter has no false negatives), and only the rare
"maybe seen" (a retry, or a false positive: about 1 in 100) goes to the store, which stays
the authority.

The filter scales: when one layer is full, a layer for four times as many ids, with 3 more
bits per id, is added, so the false positive rates of the layers sum to about 1.1% however
many ids come. Probes use Python's ``hash`` of the id (SipHash, salted per process: fine
for a structure that never leaves memory).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["SEEN_IDS_LIMIT", "SeenIds", "load_seen_ids"]

#: A log with more message ids than this is not loaded (the store is asked for every id):
#: the filter would cost about 1.25 bytes per id, the read more than it saves. Tests set it
#: to 0 to exercise the store path.
SEEN_IDS_LIMIT = 100_000

_BITS_PER_ID = 10  # in the first layer: ~0.8% false positives with 7 probes
_TIGHTEN = 3  # bits per id added in each next layer, so the layers' rates sum to ~1.1%
_GROWTH = 4  # each next layer holds 4x the ids of the one before
_FIRST_CAPACITY = 512
_MASK64 = (1 << 64) - 1


class _Layer:
    __slots__ = ("bits", "capacity", "count", "probes", "size")

    def __init__(self, capacity: int, bits_per_id: int) -> None:
        self.capacity = capacity
        self.size = capacity * bits_per_id  # in bits
        self.probes = round(bits_per_id * 0.693)  # the optimal k = ln 2 * bits per id
        self.bits = bytearray((self.size + 7) // 8)
        self.count = 0

    def add(self, h: int) -> None:
        # double hashing (Kirsch-Mitzenmacher): probe i is h1 + i * h2
        bits, size, h1, h2 = self.bits, self.size, h & 0xFFFFFFFF, (h >> 32) | 1
        for i in range(self.probes):
            p = (h1 + i * h2) % size
            bits[p >> 3] |= 1 << (p & 7)
        self.count += 1

    def __contains__(self, h: int) -> bool:
        return _probe(self, h)


def _probe(layer: _Layer, h: int) -> bool:
    bits, size, h1, h2 = layer.bits, layer.size, h & 0xFFFFFFFF, (h >> 32) | 1
    for i in range(layer.probes):
        p = (h1 + i * h2) % size
        if not bits[p >> 3] & (1 << (p & 7)):
            return False  # a fresh id usually misses at the first or second probe
    return True


class SeenIds:
    """A scalable Bloom filter of message ids, with where it stands in ``state``:

    * ``"unloaded"``: the store's ids are not in it yet; :meth:`surely_new` answers False
      (ask the store). :func:`load_seen_ids` loads them at the first message with an id.
    * ``"loading"``: that load is on its way (ids written meanwhile are added too).
    * ``"complete"``: every id of the log is in it; :meth:`surely_new` can answer True.
    * ``"given_up"``: the store cannot list its ids, or the log has more than
      :data:`SEEN_IDS_LIMIT`: the layers are freed, adding is a no-op and the store is asked
      for every id from now on.
    """

    __slots__ = ("_count", "_layers", "state")

    def __init__(self) -> None:
        self._layers = [_Layer(_FIRST_CAPACITY, _BITS_PER_ID)]
        self._count = 0
        self.state = "unloaded"

    def add(self, message_id: str) -> None:
        if self.state == "given_up":
            return
        self._count += 1
        if self._count > SEEN_IDS_LIMIT:
            self.give_up()  # a bounded filter: past the limit the store answers
            return
        layer = self._layers[-1]
        if layer.count >= layer.capacity:
            bits_per_id = _BITS_PER_ID + _TIGHTEN * len(self._layers)
            layer = _Layer(layer.capacity * _GROWTH, bits_per_id)
            self._layers.append(layer)
        # _Layer.add, inlined (an id per message): double hashing, probe i is h1 + i * h2
        h = hash(message_id) & _MASK64
        bits, size, h1, h2 = layer.bits, layer.size, h & 0xFFFFFFFF, (h >> 32) | 1
        for i in range(layer.probes):
            p = (h1 + i * h2) % size
            bits[p >> 3] |= 1 << (p & 7)
        layer.count += 1

    def load(self, message_ids: Iterable[str]) -> None:
        """Add the ids the store held when read; the filter is complete from now on (the
        journal added every id written since, before and during the read)."""
        for message_id in message_ids:
            self.add(message_id)
        if self.state != "given_up":
            self.state = "complete"

    def start_empty(self) -> None:
        """A new actor's empty log: complete at once, without a read (the journal adds every
        id written from now on). Off, as for a load, when ``SEEN_IDS_LIMIT`` is 0 or less."""
        if self.state != "unloaded":
            return
        if SEEN_IDS_LIMIT > 0:
            self.load(())
        else:
            self.give_up()

    def give_up(self) -> None:
        self.state = "given_up"
        self._layers = []

    def maybe_seen(self, message_id: str) -> bool:
        h = hash(message_id) & _MASK64
        h1, h2 = h & 0xFFFFFFFF, (h >> 32) | 1
        for layer in self._layers:
            # ``_probe(layer, h)``, inlined (an id an ask): a fresh id usually misses at the
            # first or second probe
            bits, size = layer.bits, layer.size
            for i in range(layer.probes):
                p = (h1 + i * h2) % size
                if not bits[p >> 3] & (1 << (p & 7)):
                    break
            else:
                return True
        return False

    def surely_new(self, message_id: str) -> bool:
        """True only if the filter is complete and has never seen ``message_id``."""
        return self.state == "complete" and not self.maybe_seen(message_id)

    def __len__(self) -> int:
        return self._count if self.state != "given_up" else 0


async def load_seen_ids(seen: SeenIds, store: Any, actor_id: str) -> None:
    """Load the ids of ``actor_id``'s log into an ``"unloaded"`` ``seen``, if the store lists
    them (:class:`~actorlog.store.MessageIdIndex`) and there are at most
    :data:`SEEN_IDS_LIMIT`; otherwise give up.

    Never raises a store failure: the caller asks the store for the id meanwhile (and meets
    the failure there) and ``seen`` stays ``"unloaded"``, so the next message tries again.
    Cancellation propagates (also leaving it ``"unloaded"``).
    """
    if seen.state != "unloaded":
        return
    # getattr, not isinstance(MessageIdIndex): a wrapper forwarding by __getattr__ counts
    list_ids: Callable[..., Awaitable[list[str] | None]] | None
    list_ids = getattr(store, "message_ids", None)
    if list_ids is None or SEEN_IDS_LIMIT <= 0:
        seen.give_up()
        return
    seen.state = "loading"
    try:
        ids = await list_ids(actor_id, limit=SEEN_IDS_LIMIT)
    except BaseException as exc:
        if seen.state == "loading":
            seen.state = "unloaded"  # try again at the next message
        if isinstance(exc, Exception):
            return  # the store's failure: the caller's find_message meets it
        raise  # cancellation
    if seen.state != "loading":
        return  # given up meanwhile (the log passed the limit while its ids were read)
    if ids is None:
        seen.give_up()
    else:
        seen.load(ids)
