"""Sphinx configuration for the nvlink-placement documentation."""

project = 'nvlink-placement'
copyright = '2026, nvlink-placement developers'
extensions = ['cliff.sphinxext', 'sphinx.ext.autodoc']
autoprogram_cliff_application = 'openstack'
autoprogram_cliff_ignored = ['--help', '--format', '--column', '--max-width',
                             '--fit-width', '--print-empty', '--noindent',
                             '--quote', '--sort-column', '--sort-ascending',
                             '--sort-descending']
master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
