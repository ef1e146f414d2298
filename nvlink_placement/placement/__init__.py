"""Placement access: HTTP client, state reading, embedded server, snapshots.

- :mod:`.client`: the HTTP client with its retries; :mod:`.reads`,
  :mod:`.state`, :mod:`.usage`, :mod:`.nova_tree`: what we read of a
  cloud's providers; :mod:`.naming`: the names of our providers.
- :mod:`.snapshot`: the snapshot file (reading, schema, Placement's
  rules, the canonical form); :mod:`.snapshot_capacity`: its
  inventories' capacity against the allocations and Placement's
  inventory defaults; :mod:`.snapshot_api` and :mod:`.snapshot_db`:
  loading and exporting one.
- :mod:`.embedded`: the embedded Placement.
"""
