"""Servers boot on the reshaped tree under a real Nova.

A nova-compute reports an HGX H100 board (8 GPUs); the tool reshapes the
tree while it runs; periodics and a service restart follow. Then the
upstream-dialect flavors, written through Nova's compute API by the
tool's ``flavor generate --apply`` code, boot: the 1-GPU flavor and the
whole-host flavor, with allocations on the moved GPU providers. The
query Nova's scheduler sends for each is the one ``flavor verify``
builds, and ``flavor verify`` against the live cloud detects the
installed Nova's release.
"""

import json
import os
import urllib.parse

from nova.tests.functional.api import client as api_client

from nova_tests import base
from nova_tests import series
from nvlink_placement import errors
from nvlink_placement.flavors import compute
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.topology import loader

HOST = 'compute-01'


class TestServers(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.start_board(HOST)
        self.reshape([HOST])
        self._run_periodics()
        self.restart_compute_service(HOST)
        self._run_periodics()
        self.assertEqual((0, []), self.check([HOST]))
        self.queries = self.record_queries()
        self.hosts = list(loader.load(self.topology([HOST])).hosts.values())

    def flavors(self, dialect):
        return generate.generate(self.hosts, base.ALIAS, dialect=dialect,
                                 vcpus_per_gpu=1, ram_per_gpu=512,
                                 disk=1).flavors

    def flavor_id(self, name):
        return next(f['id'] for f in self.admin_api.get_flavors()
                    if f['name'] == name)

    def tool_query(self, spec):
        aliases = inputs.parse_alias_config(base.nova_config()[
            ('pci', 'alias')])
        return request.build(inputs.flavor_from_dict(spec.as_dict()),
                             aliases, nova=base.tool_nova())

    def test_upstream_flavors_boot_on_the_moved_gpus(self):
        specs = self.flavors(generate.UPSTREAM)
        self.assertEqual([1, 8], [s.size for s in specs])
        changes = compute.apply(self.connection(), specs)
        self.assertEqual(4, len(changes))
        self.assertEqual(
            {'pci_passthrough:alias': 'h100:1'},
            compute.read(self.connection(), 'gpu.h100.1x')['extra_specs'])
        self.assertEqual([], compute.apply(self.connection(), specs))
        providers = self.providers()
        groups = {name for name, (_, parent) in providers.items()
                  if '_nvlink-group-of-2-' in (parent or '')}
        self.assertEqual(8, len(groups))
        for spec in specs:
            server = self._create_server(
                flavor_id=self.flavor_id(spec.name), networks=[])
            allocations = self._get_allocations_by_server_uuid(server['id'])
            names = {u: n for n, (u, _) in providers.items()}
            gpus = {names[u] for u, a in allocations.items()
                    if base.RC in a['resources']}
            self.assertEqual(spec.size, len(gpus))
            self.assertLessEqual(gpus, groups)
            query = self.tool_query(spec)
            nova_query = self.queries[-1]
            nova_prefix = next(
                k[len('resources'):].rsplit('-', 1)[0]
                for k, _ in urllib.parse.parse_qsl(nova_query)
                if k.startswith('resources') and k != 'resources')
            tool_prefix = query.gpu_groups[0].rsplit('-', 1)[0]
            self.assertEqual(
                base.canonical(query.querystring, {tool_prefix: '_GPU'}),
                base.canonical(nova_query, {nova_prefix: '_GPU'}))
            self._delete_server(server)
        self.assertIn('root_required=' + urllib.parse.quote(
            base.ROOT_REQUIRED, safe=''), self.queries[-1])
        self.assertEqual((0, []), self.check([HOST]))

    @series.upstream_only
    def test_named_alias_flavors_are_refused_by_upstream_nova(self):
        exc = self.assertRaises(errors.NvlinkError, compute.apply,
                                self.connection(),
                                self.flavors(generate.MOSK))
        self.assertEqual(
            "Nova refused the extra specs of flavor gpu.h100.2x at compute "
            "API microversion 2.86 (HTTP 400: Validation failed; "
            "'h100:2:_h100' is not of the format "
            "'[^:]+:\\d+(?:\\s*,\\s*[^:]+:\\d+)*'.). Upstream Nova accepts "
            "only alias:count in pci_passthrough:alias; the named-alias "
            "(alias:count:prefix) NVLink-domain flavors need a Nova with the "
            "MOSK extension, or upstream Nova 29.4.0, 31.3.1, 33.0.2 or "
            "34.0.0 with the nova-patches/ series of nvlink-placement. On "
            "upstream Nova generate with "
            "--dialect upstream (1-GPU and whole-host flavors only). Flavor "
            "gpu.h100.2x, created by this run, was deleted again. Nothing "
            "else was written.", str(exc))
        self.assertEqual([], [f['name'] for f in self.admin_api.get_flavors()
                              if f['name'].startswith('gpu.')])

    @series.upstream_only
    def test_named_alias_below_2_86_is_stored_and_every_boot_fails(self):
        spec = [s for s in self.flavors(generate.MOSK) if s.size == 2][0]
        self.api.microversion = self.admin_api.microversion = '2.85'
        flavor_id = self._create_flavor(
            vcpu=spec.vcpus, memory_mb=spec.ram, disk=spec.disk,
            extra_spec=spec.extra_specs)
        exc = self.assertRaises(
            api_client.OpenStackApiException, self.api.post_server,
            {'server': {'name': 's', 'flavorRef': flavor_id,
                        'imageRef': self.glance.auto_disk_config_enabled_image[
                            'id'], 'networks': 'none'}})
        self.assertEqual(500, exc.response.status_code)
        self.assertIn('too many values to unpack',
                      self.stdlog.logger.output)

    def test_flavor_verify_live_detects_the_release(self):
        # What flavor verify names for each compute API maximum (read from
        # the installed Nova): releases that build the same query share it.
        modelled, label = {34: (34, 'Nova 34'), 33: (33, 'Nova 33'),
                           31: (32, 'Nova 31 or 32'),
                           29: (30, 'Nova 29 or 30')}[base.NOVA_RELEASE]
        owner = ('on', '; every compute node provider carries OWNER_NOVA')
        if not base.OWNER_FILTER:
            owner = ('off', '')
        specs = self.flavors(generate.UPSTREAM)
        path = os.path.join(self.tmp, 'flavors.json')
        with open(path, 'w') as f:
            json.dump([s.as_dict() for s in specs], f)
        self.use_cloud('nova34')
        alias = os.path.join(self.tmp, 'alias.json')
        with open(alias, 'w') as f:
            f.write('[%s]' % base.nova_config()[('pci', 'alias')])
        result = base.cli.run(
            self, '--os-cloud', 'nova34', 'nvlink', 'flavor', 'verify',
            '--topology', self.topology([HOST]), '--flavors', path,
            '--alias-config', alias, '-f', 'value', '-c', 'flavor', '-c',
            'candidates', '-c', 'valid_sets', '-c', 'invalid_sets')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            'flavor verify: Nova %d query, owner filter %s (compute API '
            'maximum microversion %s: %s%s)' % (
                modelled, owner[0], base.MAX_MICROVERSION, label, owner[1]),
            result.stderr.splitlines()[0])
        self.assertEqual('gpu.h100.1x 8 8 0\ngpu.h100.8x 1000 1 0\n',
                         result.stdout)
