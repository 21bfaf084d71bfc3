"""Format 4's unpacking in SQL (docs/FORMAT.md [F21]): the ``payload`` column of the view
``entries``, so that every reader of a format-4 file through the view (the store, an
operator's SQL typed by hand, a checker reading rows beside the store's code) gets the
payload the checksum covers, as ``_sqlite_pack.unpack`` makes it.

SQLite's JSON functions keep the text of every token they do not replace (a number's
spelling, a string's escapes), so replacing an item of a compact array gives the array's
bytes with that item's text changed, as Python's encoder writes it (a packed entry is
packed only if that holds: ``_sqlite_pack``). Every check of ``unpack`` is made here too (a
flag's item is the integer ``0``, an anchor is stored unpacked and holds what it must);
when one fails the expression is NULL and the view shows the stored bytes, which no
checksum matches. An unpacked row's payload is shown as it is, without any JSON function.
"""

from __future__ import annotations

__all__ = ["PAYLOAD4"]

#: the stored payload's JSON after its flag byte, as text
_BODY = "CAST(substr(l.payload, 2) AS TEXT)"
#: the flag byte
_FLAGS = "unicode(CAST(substr(l.payload, 1, 1) AS TEXT))"
#: the position of ``at`` by kind code (message 1, intent 2, result 3, step 4, effect 5)
_AT_OF_CODE = (
    "CASE {code} WHEN 1 THEN 1 WHEN 2 THEN 5 WHEN 3 THEN 2 WHEN 4 THEN 2 WHEN 5 THEN 2 END"
)


def _stored_json(alias: str) -> str:
    """SQL: the payload of log row ``alias`` as JSON text if it is an unpacked JSON array
    (else NULL)."""
    return (
        f"CASE WHEN typeof({alias}.payload) = 'blob' AND substr({alias}.payload, 1, 1) = x'5b' "
        f"AND json_valid(CAST({alias}.payload AS TEXT)) THEN CAST({alias}.payload AS TEXT) END"
    )


def _row(seq: str) -> str:
    return f"(SELECT {{col}} FROM log AS a WHERE a.actor = l.actor AND a.seq = {seq})"


_PREV = _row("l.seq - 1")
_REF = _row("l.ref")


def _unpack() -> str:
    """SQL: the unpacked payload of a packed row ``l`` (NULL when it does not unpack)."""
    prev_json = _PREV.format(col=_stored_json("a"))
    prev_code = _PREV.format(col="a.kind")
    ref_json = _REF.format(col=f"CASE WHEN a.kind = 1 THEN {_stored_json('a')} END")
    at_pos = "CASE l.kind WHEN 2 THEN 5 WHEN 3 THEN 2 WHEN 4 THEN 2 WHEN 5 THEN 2 END"
    # each step's JSON text, or NULL when a check fails
    body = f"CASE WHEN json_valid({_BODY}) AND json_type({_BODY}) = 'array' THEN {_BODY} END"
    prev_at = (
        f"(SELECT CASE WHEN json_type(p.j, '$[' || p.i || ']') = 'integer' "
        f"THEN json_extract(p.j, '$[' || p.i || ']') END "
        f"FROM (SELECT {prev_json} AS j, {_AT_OF_CODE.format(code=prev_code)} AS i) AS p)"
    )
    j1 = (
        f"(SELECT CASE WHEN NOT f & 1 THEN b "
        f"WHEN json_type(b, '$[' || i || ']') = 'integer' AND {prev_at} IS NOT NULL "
        f"THEN json_replace(b, '$[' || i || ']', {prev_at} + json_extract(b, '$[' || i || ']')) "
        f"END FROM (SELECT {body} AS b, {at_pos} AS i, {_FLAGS} AS f))"
    )
    key = (
        "(SELECT CASE WHEN json_type(m.j, '$[2]') = 'text' AND json_type(x.b, '$[0]') = 'integer' "
        "AND (json_array_length(x.b) < 8 OR json_type(x.b, '$[7]') = 'text') "
        "THEN ea.actor_id || ':' || json_extract(m.j, '$[2]') || ':' || l.ref || ':' || "
        "CASE WHEN json_array_length(x.b) > 7 AND json_extract(x.b, '$[7]') != '' "
        "THEN json_extract(x.b, '$[7]') || '.' ELSE '' END || json_extract(x.b, '$[0]') END "
        f"FROM (SELECT {ref_json} AS j) AS m, actors AS ea WHERE ea.id = l.actor)"
    )
    j2 = (
        f"(SELECT CASE WHEN NOT {_FLAGS} & 2 THEN x.b "
        "WHEN l.kind = 2 AND json_type(x.b, '$[4]') = 'integer' AND json_extract(x.b, '$[4]') = 0 "
        f"AND {key} IS NOT NULL THEN json_replace(x.b, '$[4]', {key}) END "
        f"FROM (SELECT {j1} AS b) AS x)"
    )
    j3 = (
        f"(SELECT CASE WHEN NOT {_FLAGS} & 4 THEN y.b "
        "WHEN l.kind = 4 AND json_type(y.b, '$[0]') = 'true' "
        "AND json_type(y.b, '$[1]') = 'integer' AND json_extract(y.b, '$[1]') = 0 "
        f"AND {prev_code} = 3 AND json_type(r.j, '$[0]') = 'true' "
        "AND json_array_length(r.j) > 1 "
        "THEN json_replace(y.b, '$[1]', json(r.j -> '$[1]')) END "
        f"FROM (SELECT {j2} AS b) AS y, (SELECT {prev_json} AS j) AS r)"
    )
    return f"CAST({j3} AS BLOB)"


#: SQL: the view's ``payload`` of log row ``l``: unpacked when it is packed and unpacks
PAYLOAD4 = (
    "CASE WHEN typeof(l.payload) = 'blob' AND substr(l.payload, 1, 1) BETWEEN x'01' AND x'07' "
    "AND l.kind BETWEEN 2 AND 5 "
    f"THEN coalesce({_unpack()}, l.payload) ELSE l.payload END"
)
