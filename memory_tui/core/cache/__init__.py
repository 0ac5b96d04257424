"""The cache kit: what every cache of memory-tui shares.

* ``envelope``: the one on-disk format (magic, kind, version, crc32, marshal payload);
* ``codec``: the one serializer (marshal), for values nested inside an envelope;
* ``codetag.code_tag(*modules)``: which code made an entry (a digest of those modules' source);
* ``stamp``: the one file stamp ``(mtime_ns, size, inode, ctime_ns)`` and the one racy rule;
* ``registry``: ``keeps`` registers a per-process cache where it is defined, ``forget()``
  clears every one of them.

A cache is keyed and filled by its caller, so the kit never imports the logic it caches.
"""
