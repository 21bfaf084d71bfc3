"""What operators read: the terminal formatting of what a store holds (``term``) and one actor's
self-contained HTML timeline (``html``), shared by the ``actorlog`` command and the web console.
May import the public API, ``actorlog.ops`` and the journal layer; never the actor core.
"""
