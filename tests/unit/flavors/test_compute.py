"""Creating and updating flavors through the compute API."""

import threading
import types

from oslotest import base

from nvlink_placement import errors
from nvlink_placement.flavors import compute
from nvlink_placement.flavors import generate
from tests.unit.flavors import helpers

H100 = helpers.hosts(**{'compute-01': helpers.h100_host()})
PAIR = [f for f in generate.generate(H100, 'h100').flavors if f.size == 2][0]


def current(**extra_specs):
    return {'vcpus': PAIR.vcpus, 'ram': PAIR.ram, 'disk': PAIR.disk,
            'extra_specs': extra_specs}


class TestPlan(base.BaseTestCase):

    def test_new_flavor(self):
        self.assertEqual([
            ('gpu.h100.2x', 'create-flavor', '',
             'vcpus=32 ram=262144 disk=100'),
            ('gpu.h100.2x', 'set-property', 'pci_passthrough:alias',
             'h100:2:_h100'),
            ('gpu.h100.2x', 'set-property', 'trait_nvl2:CUSTOM_PCI_GROUP2',
             'required'),
            ('gpu.h100.2x', 'set-property',
             'trait_h100-0:CUSTOM_PCI_GROUP2_MEMBER0', 'required'),
            ('gpu.h100.2x', 'set-property',
             'trait_h100-1:CUSTOM_PCI_GROUP2_MEMBER1', 'required'),
            ('gpu.h100.2x', 'set-property', 'placement:same_subtree',
             '_h100-0,_h100-1,_nvl2'),
            ('gpu.h100.2x', 'set-property', 'placement:group_policy',
             'none'),
        ], [c.row() for c in compute.plan(PAIR, None)])

    def test_in_sync_flavor(self):
        self.assertEqual([], compute.plan(PAIR, current(**PAIR.extra_specs)))

    def test_only_differing_and_stale_managed_keys(self):
        specs = dict(PAIR.extra_specs, **{
            'placement:same_subtree': '_h100-0,_nvl2',
            'trait_nvl4:CUSTOM_PCI_GROUP4': 'required',
            'hw:numa_nodes': '1', 'quota:cpu_shares': '10'})
        self.assertEqual([
            ('gpu.h100.2x', 'set-property', 'placement:same_subtree',
             '_h100-0,_h100-1,_nvl2'),
            ('gpu.h100.2x', 'unset-property',
             'trait_nvl4:CUSTOM_PCI_GROUP4', 'required'),
        ], [c.row() for c in compute.plan(PAIR, current(**specs))])

    def test_immutable_fields_conflict(self):
        data = current()
        data['ram'] = 1024
        exc = self.assertRaises(errors.NvlinkError, compute.plan, PAIR, data)
        self.assertEqual(
            'flavor gpu.h100.2x exists with ram 1024, not 262144; Nova '
            'flavors cannot be changed: delete it (running servers keep '
            'their copy) or choose another --name-template', str(exc))


class _Compute(object):
    """Records the openstacksdk compute proxy calls apply() makes.

    The compute API's answers to them are proven against Nova itself in
    ``nova_tests/test_servers.py``; here only the order of the calls.
    """

    def __init__(self, flavors, max_version=(2, 104), refuse=()):
        self.flavors = flavors
        self.max_version = max_version
        self.refuse = refuse
        self.calls = []

    def find_flavor(self, name, ignore_missing, get_extra_specs):
        return self.flavors.get(name)

    def get_endpoint_data(self):
        return types.SimpleNamespace(api_version=(2, 1),
                                     max_microversion=self.max_version)

    def create_flavor(self, **attrs):
        self.calls.append(('create_flavor', attrs))
        return types.SimpleNamespace(name=attrs['name'], id=attrs['name'])

    def delete_flavor(self, flavor):
        self.calls.append(('delete_flavor', flavor.name))

    def post(self, url, json, microversion, raise_exc):
        self.calls.append(('post', url, json['extra_specs'], microversion))
        if url.split('/')[2] in self.refuse:
            return types.SimpleNamespace(
                status_code=400, json=lambda: {'badRequest': {
                    'message': 'Validation failed', 'code': 400}})
        return types.SimpleNamespace(status_code=200)

    def delete_flavor_extra_specs_property(self, flavor, key):
        self.calls.append(('delete', flavor.name, key))


def sdk_flavor(name, **extra_specs):
    return types.SimpleNamespace(name=name, id=name, vcpus=PAIR.vcpus,
                                 ram=PAIR.ram,
                                 disk=PAIR.disk, ephemeral=0, swap='',
                                 extra_specs=extra_specs)


class TestApply(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        single = [f for f in generate.generate(H100, 'h100').flavors
                  if f.size == 1][0]
        self.specs = [single, PAIR]
        stale = dict(PAIR.extra_specs, **{'trait_nvl4:X': 'required'})
        del stale['placement:group_policy']
        self.proxy = _Compute({'gpu.h100.2x': sdk_flavor('gpu.h100.2x',
                                                         **stale)})
        self.connection = types.SimpleNamespace(compute=self.proxy)

    def test_dry_run_writes_nothing(self):
        changes = compute.apply(self.connection, self.specs, dry_run=True)
        self.assertEqual(['create-flavor', 'set-property', 'set-property',
                          'unset-property'], [c.action for c in changes])
        self.assertEqual([], self.proxy.calls)

    def test_apply(self):
        compute.apply(self.connection, self.specs)
        # The named-alias flavor first; extra specs at 2.86.
        self.assertEqual([
            ('post', '/flavors/gpu.h100.2x/os-extra_specs',
             {'placement:group_policy': 'none'}, '2.86'),
            ('delete', 'gpu.h100.2x', 'trait_nvl4:X'),
            ('create_flavor', {'name': 'gpu.h100.1x', 'vcpus': 16,
                               'ram': 131072, 'disk': 100}),
            ('post', '/flavors/gpu.h100.1x/os-extra_specs',
             {'pci_passthrough:alias': 'h100:1'}, '2.86'),
        ], self.proxy.calls)

    def test_refused_flavor_is_deleted_and_nothing_else_written(self):
        proxy = _Compute({}, refuse=('gpu.h100.2x',))
        exc = self.assertRaises(errors.NvlinkError, compute.apply,
                                types.SimpleNamespace(compute=proxy),
                                self.specs)
        self.assertEqual(['create_flavor', 'post', 'delete_flavor'],
                         [c[0] for c in proxy.calls])
        self.assertEqual(
            'Nova refused the extra specs of flavor gpu.h100.2x at compute '
            'API microversion 2.86 (HTTP 400: Validation failed). Upstream '
            'Nova accepts only alias:count in pci_passthrough:alias; the '
            'named-alias (alias:count:prefix) NVLink-domain flavors need a '
            'Nova with the MOSK extension, or upstream Nova 29.4.0, 31.3.1, '
            '33.0.2 or 34.0.0 with the nova-patches/ series of '
            'nvlink-placement. On upstream Nova '
            'generate with --dialect upstream (1-GPU and whole-host flavors '
            'only). Flavor '
            'gpu.h100.2x, created by this run, was deleted again. Nothing '
            'else was written.', str(exc))

    def test_stop_finishes_the_flavor_begun_and_begins_no_other(self):
        stop = threading.Event()
        made = compute.Progress()
        post = self.proxy.post

        def post_then_stop(*args, **kwargs):
            stop.set()     # a signal while the first flavor is written
            return post(*args, **kwargs)
        self.proxy.post = post_then_stop
        self.assertRaises(errors.Interrupted, compute.apply, self.connection,
                          self.specs, stop=stop, progress=made)
        self.assertEqual([
            ('post', '/flavors/gpu.h100.2x/os-extra_specs',
             {'placement:group_policy': 'none'}, '2.86'),
            ('delete', 'gpu.h100.2x', 'trait_nvl4:X'),
        ], self.proxy.calls)
        self.assertEqual(['gpu.h100.2x', 'gpu.h100.1x'], made.planned)
        self.assertEqual([('gpu.h100.2x', 'set-property'),
                          ('gpu.h100.2x', 'unset-property')],
                         [(c.flavor, c.action) for c in made.made])

    def test_compute_api_without_validation_is_refused(self):
        proxy = _Compute({}, max_version=(2, 79))
        exc = self.assertRaises(errors.NvlinkError, compute.apply,
                                types.SimpleNamespace(compute=proxy),
                                self.specs)
        self.assertIn('the compute API stops at microversion 2.79', str(exc))
        self.assertEqual([], proxy.calls)

    def test_read(self):
        self.assertEqual(
            {'name': 'gpu.h100.2x', 'vcpus': 32, 'ram': 262144, 'disk': 100,
             'ephemeral': 0, 'swap': 0, 'extra_specs': {'a': 'b'}},
            compute.read(types.SimpleNamespace(compute=_Compute({
                'gpu.h100.2x': sdk_flavor('gpu.h100.2x', a='b')})),
                'gpu.h100.2x'))
        exc = self.assertRaises(errors.NvlinkError, compute.read,
                                self.connection, 'nope')
        self.assertEqual("no flavor named 'nope' in the compute API",
                         str(exc))
