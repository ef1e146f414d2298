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
# Smart quotes would turn the "--" of options such as --dry-run into an en
# dash in the generated CLI reference, and copied commands would fail.
smartquotes = False
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
