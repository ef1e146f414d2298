"""A reshape killed after any write: flatten undoes it, reshape finishes it.

The kill is real from Placement's point of view: the fault proxy passes
``k`` writes of the run, then refuses every request, and the client has no
retry window, so the run stops right there (``cut_after``). For every
``k``, then:

- ``flatten`` gives back exactly Nova's original tree: names, parents,
  traits, inventories and allocations;
- ``reshape`` run again gives exactly a clean run's tree, and a
  ``flatten`` killed part-way and run again undoes that.
"""

from nvlink_placement import errors
from nvlink_placement.plan import desired
from nvlink_placement.plan import run
from tests import fault_proxy
from tests.functional import faults


class TreeReader(object):
    """Reads trees cheaply: content cached by (uuid, generation).

    Placement bumps a provider's generation on every change of its traits,
    inventories or allocations (a re-parent changes none of them), so a
    provider seen before with the same generation has the same content.
    """

    def __init__(self, client):
        self.client = client
        self.cache = {}

    def tree(self, host):
        """``{name: (parent name, traits, inventories, allocations)}``."""
        rps = self.client.get('/resource_providers?in_tree=%s' % (
            faults.novalike.node_uuid(host)))['resource_providers']
        names = {rp['uuid']: rp['name'] for rp in rps}
        result = {}
        for rp in rps:
            key = (rp['uuid'], rp['generation'])
            if key not in self.cache:
                url = '/resource_providers/%s' % rp['uuid']
                inventories = self.client.get(url + '/inventories')[
                    'inventories']
                # No inventory, no allocation (a group provider).
                self.cache[key] = (
                    sorted(self.client.get(url + '/traits')['traits']),
                    inventories, {c: a['resources'] for c, a in (
                        self.client.get(url + '/allocations')[
                            'allocations'].items() if inventories else ())})
            result[rp['name']] = (names.get(rp['parent_provider_uuid']),
                                  ) + self.cache[key]
        return result


class InterruptedTestCase(faults.ProxyTestCase):
    """One fresh Placement per class: the custom traits do not exist yet."""

    def setUp(self):
        super().setUp()
        self.host = self.hosts(1)[0]
        faults.seed(self.upstream, [self.host])
        self.reader = TreeReader(self.upstream)
        self.original = self.reader.tree(self.host)
        self.wanted = self.desired([self.host],
                                   unhealthy=(faults.UNHEALTHY,))
        self.flat = [desired.flat(self.host)]

    def killed_after(self, k, hosts):
        """Run towards ``hosts``; the run dies after its ``k``-th write.

        :returns: True when it died, False when it had fewer writes.
        """
        self.proxy.rule = fault_proxy.cut_after(k)
        del self.proxy.log[:]
        try:
            failed = run.run(self.proxy.client(retry_window=0),
                             hosts).failures
        except errors.PlacementError:
            failed = True    # while creating the custom traits
        finally:
            self.proxy.rule = lambda request: fault_proxy.PASS
        passed = [r for r in self.proxy.log
                  if r.fault == 'pass' and r.method in fault_proxy.WRITES]
        if not failed:
            self.assertLess(len(passed), k)
            return False
        self.assertEqual(k, len(passed))
        return True

    def finish(self, hosts):
        result = run.run(self.upstream, hosts)
        self.assertEqual([], result.failures)
        return result

    def clean_reshape(self):
        """Reshape once without faults; the tree it gives, and its writes.

        First interrupted twice while creating the custom traits: the
        clean run then creates only the one trait still missing.
        """
        self.assertTrue(self.killed_after(1, self.wanted))
        self.assertTrue(self.killed_after(2, self.wanted))
        counts = self.upstream.requests.copy()
        result = self.finish(self.wanted)
        writes = sum((self.upstream.requests - counts)[m]
                     for m in fault_proxy.WRITES)
        self.assertEqual(['create-trait'], [a.action for a in result.actions
                                            if not a.host])
        reshaped = self.reader.tree(self.host)
        self.finish(self.flat)
        self.assertEqual(self.original, self.reader.tree(self.host))
        # 6 groups created, 6 trait sets, 8 GPU moves, one reservation
        # (marker trait, then the inventory).
        self.assertEqual(1 + 22, writes)
        return reshaped, writes - 1


class TestRollback(InterruptedTestCase):

    def test_flatten_undoes_a_reshape_killed_after_any_write(self):
        reshaped, writes = self.clean_reshape()
        for k in range(1, writes):
            self.assertTrue(self.killed_after(k, self.wanted), k)
            self.finish(self.flat)
            self.assertEqual(self.original, self.reader.tree(self.host),
                             'killed after %d writes' % k)
        self.assertFalse(self.killed_after(writes + 1, self.wanted))
        # And once more read in full, nothing taken from the cache.
        self.finish(self.flat)
        self.assertEqual(self.original,
                         TreeReader(self.upstream).tree(self.host))


class TestForward(InterruptedTestCase):

    def test_reshape_finishes_and_flatten_undoes_after_any_write(self):
        reshaped, writes = self.clean_reshape()
        names = sorted(reshaped)
        flatten_writes = 8 + 2 + 6
        for k in range(1, writes):
            self.assertTrue(self.killed_after(k, self.wanted), k)
            self.finish(self.wanted)
            got = self.reader.tree(self.host)
            self.assertEqual(names, sorted(got))
            self.assertEqual(reshaped, got, 'killed after %d writes' % k)
            # An interrupted flatten is finished by flatten again.
            self.assertTrue(self.killed_after(
                1 + k % (flatten_writes - 1), self.flat))
            self.finish(self.flat)
            self.assertEqual(self.original, self.reader.tree(self.host),
                             'flatten killed after %d writes'
                             % (1 + k % (flatten_writes - 1)))
        self.assertEqual(self.original,
                         TreeReader(self.upstream).tree(self.host))
