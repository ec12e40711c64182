"""Subscriptions, message TTL and backlog quotas (Pulsar semantics, DESIGN §2 and §3).

:class:`~storage_engine.subscriptions.registry.Subscriptions`, with
:class:`~storage_engine.subscriptions.expiry.MessageExpiry` and
:class:`~storage_engine.subscriptions.quota.BacklogQuota` (parts of :class:`storage_engine.engine.Engine`),
implements the subscription half of the :class:`~storage_engine.api.StorageAdapter`
contract once, for every store, on top of the engine's own public reads
(:class:`SubscriptionReads`). A store only says how cursors persist (a
:data:`CursorWriter` and the subscriptions it restored; the memory store keeps
them in memory); the engine calls :meth:`BacklogQuota.check_quota` on its append
path (only when the namespace has a quota, so an append without one pays
nothing) and :meth:`Subscriptions.forget` when a namespace is deleted.

The cursor math:

- a cursor is a shard's *mark-delete position*: every offset ≤ it is
  acknowledged; -1 means nothing is;
- backlog messages = ``end_offset − max(cursor + 1, log_start_offset)``;
- backlog bytes: whole segments after the cursor plus the segment holding it
  prorated by offset (O(segments), no record is read);
- backlog age: now − timestamp of the first visible record after the cursor.

May import :mod:`storage_engine.lifecycle`, :mod:`storage_engine.rules`, :mod:`storage_engine.policies` and the
contract — never a store or an adapter (a store hands over its cursors through :data:`CursorWriter`).
"""

# Modules: ``cursors`` (a subscription's cursors, their format and the cursor math),
# ``registry`` (:class:`~storage_engine.subscriptions.registry.Subscriptions`: create, read,
# acknowledge, seek, backlog, the retention hook), ``expiry`` (message TTL), ``quota``
# (backlog quotas on the append path and the periodic check).
