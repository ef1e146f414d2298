"""Plan (diff desired tree vs Placement -> ordered actions) and apply it."""
