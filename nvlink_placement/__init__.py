"""nvlink-placement: NVLink domains as Placement resource provider subtrees."""
