"""Sphinx configuration for the release notes (reno)."""

project = 'nvlink-placement release notes'
extensions = ['reno.sphinxext']
master_doc = 'index'
html_theme = 'alabaster'
