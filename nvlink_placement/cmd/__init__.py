"""Console scripts. Host-side ones import only the standard library,
PyYAML and the standard-library-only parts of nvlink_placement."""
