"""Member traits come from Nova's ``[pci] device_spec``, and stay.

Each GPU provider's member traits (``CUSTOM_PCI_GROUP<N>_MEMBER<i>``,
:mod:`nvlink_placement.topology.members`) are written by nova-compute
only: its PCI translator (``nova.compute.pci_placement_translator``) sets
a PCI provider's traits to ``COMPUTE_MANAGED_PCI_DEVICE``, ``OWNER_NOVA``
and the ``traits`` tag of the matching ``[pci] device_spec`` entry, the
entries ``openstack nvlink nova-config`` prints per host; the tool never
writes them. Two nova-computes whose boards share PCI addresses with
different module ids each get their own host's entries (see
:mod:`nova_tests.base`).

Here Nova's own translator and report client run against the reshaped
tree: periodics, a provider cache refresh, a SIGHUP reset and a restart
leave the member traits and the tree as they were, ``check`` finds no
drift and ``reshape`` plans nothing (no flapping between the two). A
compute still on the generic entry (mid-rollout) has no member traits:
``check`` names them as drift, the new multi-GPU flavors find no
candidate there and the flavors from before member traits still do.
"""

import json

from nova_tests import base
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.topology import loader

HOSTS = ['compute-01', 'compute-02']


class TestMemberTraits(base.NovaTestCase):

    def start(self):
        for host in HOSTS:
            self.start_board(host)
        self._run_periodics()

    def gpu_traits(self):
        """dict GPU RP name -> its traits, for every GPU of :data:`HOSTS`."""
        return {name: self.traits(name) for name in base.member_traits(HOSTS)}

    def expected(self, configured=HOSTS):
        """What Nova should write: member traits on ``configured`` hosts."""
        return {name: base.pci_traits(traits if name.split('_')[0]
                                      in configured else ())
                for name, traits in base.member_traits(HOSTS).items()}

    def age_provider_caches(self, seconds=301):
        """Each report client's cache as it is ``seconds`` later.

        ``_associations_stale`` compares ``[compute]
        resource_provider_association_refresh`` (300 s) with the time each
        provider was last read.
        """
        for compute in self.computes.values():
            client = compute.manager.rt.reportclient
            for uuid in client._association_refresh_time:
                client._association_refresh_time[uuid] -= seconds

    def test_each_gpu_carries_exactly_its_member_traits(self):
        self.start()
        expected = self.expected()
        self.assertEqual(16, len(expected))
        self.assertEqual(expected, self.gpu_traits())
        # The same address, a different module on each board: one global
        # device_spec list would give one of them the wrong members.
        self.assertNotEqual(expected['compute-01_0000:DB:00.0'],
                            expected['compute-02_0000:DB:00.0'])
        for name, traits in expected.items():
            self.assertEqual(3, len(set(traits) - set(base.PCI_TRAITS)),
                             name)

    def test_refresh_and_restart_keep_them_and_reshape_agrees(self):
        self.start()
        self.reshape(HOSTS)
        self.assertEqual((0, []), self.check(HOSTS))
        reshaped = json.loads(self.state())
        expected = self.expected()
        steps = [
            ('periodic', self._run_periodics),
            ('cache refresh after 300 s', lambda: (
                self.age_provider_caches(), self._run_periodics())),
            ('SIGHUP cache reset', lambda: (
                [c.manager.reset() for c in self.computes.values()],
                self._run_periodics())),
            ('restart', lambda: (
                [self.restart_compute_service(h) for h in HOSTS],
                self._run_periodics())),
            ('cache refresh after restart', lambda: (
                self.age_provider_caches(), self._run_periodics())),
        ]
        for label, step in steps:
            step()
            self.assertEqual(expected, self.gpu_traits(), label)
            self.assertEqual(reshaped, json.loads(self.state()), label)
            self.assertEqual((0, []), self.check(HOSTS), label)
            # reshape after Nova's write plans nothing: no flapping.
            self.assertEqual([], self.reshape(HOSTS), label)
            self.assertEqual(reshaped, json.loads(self.state()), label)

    def test_compute_not_yet_configured(self):
        self.device_spec['compute-02'] = list(self.PCI_DEVICE_SPEC)
        self.start()
        self.assertEqual(self.expected(['compute-01']), self.gpu_traits())
        self.reshape(HOSTS)
        code, rows = self.check(HOSTS)
        self.assertEqual(2, code)
        missing = base.member_traits(['compute-02'])
        self.assertEqual(
            sorted((name, 'member traits %s (from nova-compute\'s [pci] '
                    'device_spec)' % ' '.join('+' + t for t in traits))
                   for name, traits in missing.items()),
            sorted((r['provider'], r['detail']) for r in rows))
        self.assertEqual({('compute-02', 'member-traits', '')},
                         {(r['host'], r['drift'], r['action'])
                          for r in rows})
        for row in rows:
            self.assertIn('set its [pci] device_spec as', row['repair'])
            self.assertIn('--host compute-02', row['repair'])
        # No reshape write repairs it, and reshape does not try.
        self.assertEqual([], self.reshape(HOSTS))

        topology = loader.load(self.topology(HOSTS))
        hosts = list(topology.hosts.values())
        aliases = inputs.parse_alias_config(
            base.nova_config()[('pci', 'alias')])
        # Sized to fit Nova's fake libvirt host.
        flavors = generate.generate(hosts, base.ALIAS, vcpus_per_gpu=1,
                                    ram_per_gpu=512, disk=1).flavors
        self.assertEqual([1, 2, 4, 8], [f.size for f in flavors])

        def gpu_sets(spec):
            return self.gpu_sets(request.build(
                inputs.flavor_from_dict(spec.as_dict()),
                aliases, nova=base.tool_nova()).querystring)

        def domains(host, size):
            return {frozenset(host.gpu_provider_name(a) for a in g.members)
                    for g in host.groups if size in g.sizes}

        configured, pending = topology.hosts['compute-01'], \
            topology.hosts['compute-02']
        for spec in flavors:
            if spec.size == 1:
                self.assertEqual(16, len(gpu_sets(spec)))
                continue
            whole = frozenset(configured.gpu_provider_name(a)
                              for a in configured.gpus)
            want = (domains(configured, spec.size) if spec.kind ==
                    generate.DOMAIN else {whole})
            self.assertTrue(want, spec.name)
            # New flavors: only the configured host, one set per domain.
            self.assertEqual(want, gpu_sets(spec), spec.name)
            if spec.kind != generate.DOMAIN:
                continue
            # The same flavor as generated before member traits (no
            # trait_<alias>-<i> keys) still lands on both hosts.
            old = generate.FlavorSpec(
                spec.name, spec.size, spec.kind, spec.vcpus, spec.ram,
                spec.disk, {k: v for k, v in spec.extra_specs.items()
                            if not k.startswith('trait_%s-' % base.ALIAS)})
            self.assertNotEqual(spec.extra_specs, old.extra_specs)
            self.assertEqual(domains(configured, spec.size) |
                             domains(pending, spec.size), gpu_sets(old),
                             spec.name)
