"""Sphinx configuration for the nvlink-placement documentation."""

import os
import sys

# Directives made from the code and the shipped files (_ext/; Sphinx runs
# this file from its own directory).
sys.path.insert(0, os.path.abspath('_ext'))

project = 'nvlink-placement'
copyright = '2026, nvlink-placement developers'
extensions = ['cliff.sphinxext', 'sphinx.ext.autodoc', 'nvlink_monitoring']
autoprogram_cliff_application = 'openstack'
autoprogram_cliff_ignored = ['--help', '--format', '--column', '--max-width',
                             '--fit-width', '--print-empty', '--noindent',
                             '--quote', '--sort-column', '--sort-ascending',
                             '--sort-descending']
master_doc = 'index'
# Smart quotes would turn the "--" of options such as --dry-run into an en
# dash in the generated CLI reference, and copied commands would fail.
smartquotes = False
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
