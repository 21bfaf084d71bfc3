"""The journal: the only code that knows bytes. Payload encoding (``codec``), the checksum frames
(``frames``), format 2's compact payloads and compressed snapshots (``compact``), the typed
record of each entry kind (``records``, ``entrykinds``, ``entryreads``, ``fields``), the rows a
store keeps (``rows``, ``storetimers``; public through :mod:`actorlog.store`) and its leases as
read (``leases``), stable names and ids (``names``, ``ids``), the exception tree (``errors``;
public as :mod:`actorlog.errors`) and the argument checks everyone shares (``checks``). With
``actorlog.store`` and ``actorlog.errors`` it is the journal layer, the ground floor: it imports
nothing of actorlog above it.
"""
