""""Nothing was written", judged by Placement's own database.

:func:`nothing_written` compares every row of every table of an embedded
Placement (``openstack-placement`` on SQLite) before and after a block:
resource providers and their generations, inventories, traits (global
ones too), resource classes, aggregates, consumers, projects, users,
allocations. Exporting the trees (``snapshot``) would miss global traits,
resource classes and anything outside a tree with a Nova PCI provider.

Placement adds its standard traits and resource classes to a fresh
database at its first request that reads them; both are read before the
first comparison, so only a write by the code under test shows.
"""

import contextlib

import fixtures
import sqlalchemy

from nvlink_placement.placement import embedded

#: Rows shown per table in a failure message.
SHOWN = 5


def tables(engine):
    """Every table of ``engine``: dict name -> sorted list of row tuples."""
    metadata = sqlalchemy.MetaData()
    metadata.reflect(bind=engine)
    with engine.connect() as connection:
        return {name: sorted((tuple(row) for row in
                              connection.execute(table.select())), key=repr)
                for name, table in metadata.tables.items()}


def differences(before, after):
    """What changed between two :func:`tables` results, as text."""
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, []), after.get(name, [])
        added = [r for r in new if r not in old]
        removed = [r for r in old if r not in new]
        for what, rows in (('added', added), ('removed', removed)):
            if rows:
                lines.append('table %s: %d row(s) %s: %s%s' % (
                    name, len(rows), what, ', '.join(map(repr, rows[:SHOWN])),
                    ', ...' if len(rows) > SHOWN else ''))
    return '\n'.join(lines)


def _synced_tables(placement):
    """:func:`tables` of an entered EmbeddedPlacement, standard rows in."""
    client = placement.client
    with client.lock:
        for url in ('/traits', '/resource_classes'):
            response = client.adapter.get(url, raise_exc=False, headers={
                'OpenStack-API-Version': 'placement 1.6'})
            assert response.status_code == 200, (url, response.text)
        return tables(placement.engine)


@contextlib.contextmanager
def nothing_written(test, placement=None, opened=1):
    """Fail ``test`` when the block writes to Placement.

    :param placement: the test's own :class:`EmbeddedPlacement`; without
        it, every embedded Placement opened inside the block (a command's
        ``--snapshot``) is judged: its tables when the command left it must
        be those it had once the snapshot was loaded.
    :param opened: without ``placement``, how many embedded Placements the
        block must open (so the check cannot pass with nothing judged; 0
        for a command refused before it reads any).
    """
    if placement is not None:
        before = _synced_tables(placement)
        yield
        after = tables(placement.engine)
        test.assertEqual(before, after, 'Placement was written:\n%s'
                         % differences(before, after))
        return
    judged = []
    enter = embedded.EmbeddedPlacement.__enter__
    leave = embedded.EmbeddedPlacement.__exit__

    def entered(self):
        client = enter(self)
        self._nothing_written_before = _synced_tables(self)
        return client

    def left(self, *exc):
        if self.engine is not None and hasattr(
                self, '_nothing_written_before'):
            judged.append((self._nothing_written_before,
                           tables(self.engine)))
        return leave(self, *exc)

    with fixtures.MonkeyPatch(
            'nvlink_placement.placement.embedded.EmbeddedPlacement.'
            '__enter__', entered), fixtures.MonkeyPatch(
            'nvlink_placement.placement.embedded.EmbeddedPlacement.'
            '__exit__', left):
        yield
    test.assertEqual(opened, len(judged), 'embedded Placements judged')
    for before, after in judged:
        test.assertEqual(before, after, 'Placement was written:\n%s'
                         % differences(before, after))
