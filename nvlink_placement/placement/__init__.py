"""Placement access: HTTP client, state reading, embedded server, snapshots."""
