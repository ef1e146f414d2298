"""The import rule of doc/source/contributor/layout.rst holds.

Walks every module of nvlink_placement with :mod:`ast` (imports inside
functions too) and fails on an import the rule does not allow (an arrow
running up, or across from the host side to the cloud side) and on a
cycle between packages.
"""

import ast
import functools
import os

from oslotest import base

import nvlink_placement

ROOT = os.path.dirname(os.path.abspath(nvlink_placement.__file__))
PACKAGE = 'nvlink_placement'

#: The modules at the top of nvlink_placement (errors, documents,
#: textfile, helptext, hostnames) form one group, ``base``.
BASE = 'base'

#: Which group may import which (besides itself): layout.rst's rule.
ALLOWED = {
    BASE: set(),
    'topology': {BASE},
    'fabric': {BASE, 'topology'},
    'discovery': {BASE, 'topology', 'fabric'},
    'hook': {BASE, 'topology', 'fabric', 'discovery'},
    'cmd': {BASE, 'topology', 'fabric', 'discovery', 'hook'},
    'placement': {BASE, 'topology'},
    'plan': {BASE, 'topology', 'placement'},
    'flavors': {BASE, 'topology', 'placement'},
    'novaconfig': {BASE, 'topology', 'placement', 'flavors'},
    'report': {BASE, 'topology', 'placement', 'plan'},
    'simulate': {BASE, 'topology', 'placement', 'plan', 'flavors',
                 'novaconfig'},
    'osc': {BASE, 'topology', 'fabric', 'discovery', 'hook', 'placement',
            'plan', 'flavors', 'novaconfig', 'report', 'simulate'},
}


def module_name(path):
    """``nvlink_placement.hook.lock`` for ``<ROOT>/hook/lock.py``."""
    parts = os.path.relpath(path, ROOT)[:-len('.py')].split(os.sep)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join([PACKAGE] + parts)


def group(module):
    """The group of a module of ours: its package, or :data:`BASE`."""
    parts = module.split('.')
    if len(parts) == 1:
        return BASE   # nvlink_placement itself
    if os.path.isdir(os.path.join(ROOT, parts[1])):
        return parts[1]
    return BASE


def imported(source, module, is_package=False):
    """The modules of ours that ``source`` (the text of ``module``) imports.

    ``from nvlink_placement.x import y`` counts as importing
    ``nvlink_placement.x.y`` (y may be a module or a name in x: either
    way the group is x's).
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split('.')
                if not is_package:
                    here.pop()
                if node.level > 1:
                    here = here[:-(node.level - 1)]
                start = '.'.join(here + ([node.module] if node.module
                                         else []))
            else:
                start = node.module
            found.update('%s.%s' % (start, alias.name)
                         for alias in node.names)
    return {name for name in found
            if name == PACKAGE or name.startswith(PACKAGE + '.')}


def edges(modules):
    """``{(from group, to group): [(module, imported module)]}``.

    :param modules: dict ``{module: (source, is_package)}``.
    """
    found = {}
    for module, (source, is_package) in sorted(modules.items()):
        for target in sorted(imported(source, module, is_package)):
            pair = (group(module), group(target))
            if pair[0] != pair[1]:
                found.setdefault(pair, []).append((module, target))
    return found


def not_allowed(found, allowed=ALLOWED):
    """The imports ``allowed`` forbids, as ``module -> module`` lines."""
    return ['%s -> %s' % use for (source, target), uses in
            sorted(found.items())
            if target not in allowed.get(source, ()) for use in uses]


def cycle(pairs):
    """A cycle of the directed graph ``pairs`` as a list of nodes, or None."""
    graph = {}
    for source, target in pairs:
        graph.setdefault(source, set()).add(target)
    state = {}

    def visit(node, path):
        state[node] = 'open'
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


@functools.lru_cache(maxsize=1)
def our_modules():
    """``{module: (source, is_package)}`` for every module of ours."""
    modules = {}
    for directory, _, names in os.walk(ROOT):
        for name in names:
            if name.endswith('.py'):
                path = os.path.join(directory, name)
                with open(path, encoding='utf-8') as f:
                    modules[module_name(path)] = (f.read(),
                                                  name == '__init__.py')
    return modules


class TestLayout(base.BaseTestCase):

    def test_every_package_is_in_the_rule(self):
        packages = {name for name in os.listdir(ROOT)
                    if os.path.isfile(os.path.join(ROOT, name,
                                                   '__init__.py'))}
        self.assertEqual(sorted(set(ALLOWED) - {BASE}), sorted(packages))

    def test_no_import_the_rule_forbids(self):
        self.assertEqual([], not_allowed(edges(our_modules())))

    def test_no_cycle_between_packages(self):
        self.assertIsNone(cycle(set(edges(our_modules()))))

    def test_the_rule_itself_has_no_cycle(self):
        self.assertIsNone(cycle((source, target) for source, targets in
                                ALLOWED.items() for target in targets))

    def test_discovery_needs_no_hook(self):
        found = set(edges(our_modules()))
        self.assertNotIn(('discovery', 'hook'), found)
        self.assertIn(('discovery', 'fabric'), found)
        self.assertIn(('hook', 'fabric'), found)


class TestChecker(base.BaseTestCase):
    """The checks above catch what they are there to catch."""

    def test_upward_import_found(self):
        found = edges({
            'nvlink_placement.fabric.client': (
                'from nvlink_placement.hook import lock\n', False),
            'nvlink_placement.discovery.inspect': (
                'def f():\n    import nvlink_placement.osc.live\n', False),
            'nvlink_placement.hook.lock': (
                'from nvlink_placement.fabric import trust\n', False)})
        self.assertEqual(
            ['nvlink_placement.discovery.inspect -> '
             'nvlink_placement.osc.live',
             'nvlink_placement.fabric.client -> nvlink_placement.hook.lock'],
            not_allowed(found))

    def test_relative_imports_resolved(self):
        self.assertEqual(
            {'nvlink_placement.hook.lock', 'nvlink_placement.errors',
             'nvlink_placement.fabric.trust'},
            imported('from . import lock\nfrom .. import errors\n'
                     'from ..fabric import trust\nimport os\n',
                     'nvlink_placement.hook.activation'))
        self.assertEqual({'nvlink_placement.hook.lock'},
                         imported('from . import lock\n',
                                  'nvlink_placement.hook', is_package=True))

    def test_top_level_modules_are_base(self):
        self.assertEqual(BASE, group('nvlink_placement.errors'))
        self.assertEqual(BASE, group('nvlink_placement'))
        self.assertEqual('fabric', group('nvlink_placement.fabric.trust'))

    def test_cycle_found(self):
        self.assertEqual(['a', 'b', 'c', 'a'],
                         cycle([('a', 'b'), ('b', 'c'), ('c', 'a'),
                                ('c', 'd')]))
        self.assertIsNone(cycle([('a', 'b'), ('b', 'c'), ('a', 'c')]))
