"""Nova's own ResourceRequest against the query flavor verify builds.

For each generated upstream-dialect flavor, the request spec is built the
way nova-api and nova-scheduler build it (``RequestSpec.from_components``
with the flavor's PCI requests, the scheduler's pre-filters
``request_filter.process_reqspec`` on the real service records, then
``utils.resources_from_request_spec``). Its ``to_querystring()`` equals
the tool's query once the random PCI request id is renamed, and both
return the same GPU sets on two reshaped boards. The tool's query is the
one of ``--nova-release <installed major>``: the test checks the tool's
model of each release (:mod:`nvlink_placement.flavors.release`) against
that release's own scheduler code. The MOSK-dialect keys show what
upstream Nova does with them.
"""

import urllib.parse

from nova import objects
from nova.pci import request as pci_request
from nova.scheduler import request_filter
from nova.scheduler import utils as scheduler_utils
from oslo_utils import uuidutils

from nova_tests import base
from nova_tests import series
from nvlink_placement import errors
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.topology import loader

HOSTS = ['compute-01', 'compute-02']


class TestResourceRequest(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        # As nova-config prints for placement.conf: with Placement's
        # default depth-first strategy the whole-host flavor's 1000
        # candidates may all be one host's permutations (Placement 13.0.1,
        # 2025.1, measured).
        self.placement_fixture.conf_fixture.config(
            group='placement',
            allocation_candidates_generation_strategy='breadth-first')
        for host in HOSTS:
            self.start_board(host)
        self.reshape(HOSTS)
        self.assertEqual((0, []), self.check(HOSTS))
        self.hosts = list(loader.load(self.topology(HOSTS)).hosts.values())
        self.aliases = inputs.parse_alias_config(
            base.nova_config()[('pci', 'alias')])

    def nova_query(self, spec):
        """What nova-scheduler sends for the FlavorSpec ``spec``."""
        flavor = objects.Flavor(
            name=spec.name, flavorid=spec.name, vcpus=spec.vcpus,
            memory_mb=spec.ram, root_gb=spec.disk, ephemeral_gb=0, swap=0,
            extra_specs=dict(spec.extra_specs))
        request_spec = objects.RequestSpec.from_components(
            self.ctxt, uuidutils.generate_uuid(),
            objects.ImageMeta.from_dict({'properties': {}}), flavor, None,
            pci_request.get_pci_requests_from_flavor(flavor), {}, None,
            None, project_id='p', user_id='u')
        request_filter.process_reqspec(self.ctxt, request_spec)
        resources = scheduler_utils.resources_from_request_spec(
            self.ctxt, request_spec, self.scheduler.manager.host_manager)
        return resources.to_querystring(), request_spec

    def assert_same_query(self, query, nova_query, request_spec, name):
        """``query`` is Nova's, but for the random PCI group names."""
        pci_id, = [r.request_id for r in request_spec.pci_requests.requests]
        tool_prefix = query.gpu_groups[0].rsplit('-', 1)[0]
        self.assertEqual(
            base.canonical(query.querystring, {tool_prefix: '_GPU'}),
            base.canonical(nova_query, {pci_id: '_GPU'}), name)

    def test_queries_equal_and_return_the_same_gpu_sets(self):
        specs = generate.generate(self.hosts, base.ALIAS,
                                  dialect=generate.UPSTREAM, vcpus_per_gpu=1,
                                  ram_per_gpu=512, disk=1).flavors
        self.assertEqual([1, 8], [s.size for s in specs])
        for spec in specs:
            nova_query, request_spec = self.nova_query(spec)
            query = request.build(inputs.flavor_from_dict(spec.as_dict()),
                                  self.aliases, nova=base.tool_nova())
            self.assert_same_query(query, nova_query, request_spec,
                                   spec.name)
            sets = self.gpu_sets(nova_query)
            self.assertEqual(self.gpu_sets(query.querystring), sets)
            if spec.size == 1:
                self.assertEqual(16, len(sets))
            else:
                self.assertEqual(
                    {frozenset('%s_%s' % (h, a.upper())
                               for a in base.BOARDS[h]) for h in HOSTS},
                    sets)
        self.assertIn(('root_required', base.ROOT_REQUIRED),
                      urllib.parse.parse_qsl(nova_query))

    @series.requires_series
    def test_mosk_queries_equal_byte_for_byte(self):
        """Nova with nova-patches/ sends flavor verify's mosk queries.

        Byte for byte for the named-alias flavors, and each GPU set they
        return is one NVLink domain.
        """
        self.flags(allow_pci_traits_in_flavor=True, group='filter_scheduler')
        specs = generate.generate(self.hosts, base.ALIAS, vcpus_per_gpu=1,
                                  ram_per_gpu=512, disk=1).flavors
        self.assertEqual([1, 2, 4, 8], [s.size for s in specs])
        for spec in specs:
            nova_query, request_spec = self.nova_query(spec)
            query = request.build(inputs.flavor_from_dict(spec.as_dict()),
                                  self.aliases, nova=base.tool_nova())
            if len(spec.extra_specs[generate.ALIAS_KEY].split(':')) == 3:
                self.assertEqual(query.querystring, nova_query, spec.name)
            else:
                # alias:count: Nova's group names are random
                self.assert_same_query(query, nova_query, request_spec,
                                       spec.name)
            if spec.kind == generate.SINGLE:
                continue
            sets = self.gpu_sets(nova_query)
            self.assertEqual(self.gpu_sets(query.querystring), sets)
            domains = {frozenset('%s_%s' % (host.name, a.upper())
                                 for a in members)
                       for host in self.hosts
                       for members in generate.domains(host, spec.size)}
            if spec.kind == generate.DOMAIN:
                self.assertEqual(domains, sets, spec.name)
            else:
                self.assertEqual(len(self.hosts), len(sets), spec.name)

    @series.upstream_only
    def test_named_alias_is_not_upstream_nova(self):
        pair = [s for s in generate.generate(self.hosts, base.ALIAS).flavors
                if s.size == 2][0]
        # Every boot of such a flavor: HTTP 500 from nova-api.
        flavor = objects.Flavor(extra_specs=dict(pair.extra_specs))
        exc = self.assertRaises(ValueError,
                                pci_request.get_pci_requests_from_flavor,
                                flavor)
        self.assertIn('too many values to unpack', str(exc))
        # With a plain alias, upstream Nova ignores placement:* and sends
        # the resourceless group with an empty resources_nvl2, which
        # Placement refuses.
        specs = dict(pair.extra_specs, **{'pci_passthrough:alias': 'h100:2'})
        plain = generate.FlavorSpec(pair.name, 2, generate.DOMAIN, pair.vcpus,
                                    pair.ram, pair.disk, specs)
        nova_query, _ = self.nova_query(plain)
        params = dict(urllib.parse.parse_qsl(nova_query,
                                             keep_blank_values=True))
        self.assertEqual(('', 'CUSTOM_PCI_GROUP2', None),
                         (params['resources_nvl2'], params['required_nvl2'],
                          params.get('same_subtree')))
        error = self.assertRaises(errors.PlacementError, self.candidates,
                                  nova_query)
        self.assertIn('HTTP 400', str(error))
        self.assertIn('Badly formed resources parameter', str(error))
