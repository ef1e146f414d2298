"""Topology model, loading and validation, PCI addresses and board catalog.

``pci``, ``laminar`` and ``boards`` depend on the standard library only, so
host-side discovery code can import them on a bare compute node.
"""
