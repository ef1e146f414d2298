"""Read-only reports on Placement trees: capacity and the tree picture."""
