"""The shuffler: a separate service between devices and the aggregator (``deniable shuffle``).

Run by another party than the aggregator's operator, with its own data dir and key pairs: it takes device
uploads of shuffled campaigns (:mod:`deniable.shared.shuffle`), stores each durably before acknowledging it,
counts one report per device (dedup token) and campaign, and forwards the inner ciphertexts to the aggregator
only in batches of at least the campaign's ``min_batch``, in a uniformly random order drawn from ``secrets``,
without report ids, arrival times, addresses or dedup tokens, each batch signed and sent until the aggregator
has stored it (exactly once: the aggregator keeps each batch id once).

Modules: :mod:`.keys` (its X25519 and Ed25519 keys), :mod:`.store` (SQLite), :mod:`.forward` (forming and
sending batches), :mod:`.app` (the HTTP API), :mod:`.command` (the CLI).
"""
