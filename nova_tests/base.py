"""Nova 34's own services against the reshaped tree: the shared set-up.

:class:`NovaTestCase` is Nova's PCI-in-Placement functional base
(``nova.tests.functional.libvirt.test_pci_in_placement``): nova-api,
conductor, scheduler and nova-compute in process, the libvirt driver on
Nova's fake libvirt, and Placement's own ``PlacementFixture`` (a real
Placement, SQLite). Each compute is an HGX H100 board: eight 10de:2330
GPUs at the real addresses of ``tests.novalike.BOARD1`` / ``BOARD2``,
configured with the ``[pci]`` values ``openstack nvlink nova-config``
prints: each compute gets its own host's ``[pci] device_spec`` entries
(one per GPU, with its member traits) and the generic one
(:func:`device_specs`). The tool runs as an operator runs it: ``openstack
nvlink ...`` in process against that Placement (admin token,
wsgi-intercept endpoint).

Per-host ``[pci] device_spec`` in one process: every service here shares
one ``CONF``, so the flag is set for a host right before its
nova-compute starts (:meth:`NovaTestCase.start_compute`, which
``restart_compute_service`` calls too). That is enough because Nova 34
reads it only then:

- ``nova/pci/manager.py`` ``PciDevTracker.__init__`` parses
  ``CONF.pci.device_spec`` into ``self.dev_filter`` (a
  ``nova.pci.whitelist.Whitelist``), once per tracker;
- ``nova/compute/resource_tracker.py`` ``_setup_pci_tracker`` builds that
  tracker only ``if not self.pci_tracker``, from ``_init_compute_node`` in
  the first ``update_available_resource``, which
  ``ComputeManager.pre_start_hook`` runs at service start; a restart makes
  a new ``ComputeManager`` and ``ResourceTracker``, so it reads the flag
  again;
- ``nova/compute/pci_placement_translator.py``
  ``update_provider_tree_for_pci`` takes each device's spec (its
  ``traits`` tag) from ``pci_tracker.dev_filter.get_devspec(dev)``, the
  tracker's parsed copy, on every periodic and provider refresh;
  ``Whitelist.get_devspec`` / ``device_assignable``
  (``nova/pci/whitelist.py``) return the first spec that matches, so the
  per-GPU entries go before the generic one;
- the other readers only validate (``ComputeManager.init_host``, the
  libvirt driver's ``_check_pci_whitelist``) or, in nova-scheduler's
  ``HostState``, build a ``PciDeviceStats`` whose pools come from the
  compute node record (``nova/scheduler/host_manager.py``); its filter is
  used only by ``add_device``, on the compute. ``ComputeManager.reset``
  (SIGHUP) clears the report client's cache and keeps the tracker.

Once the compute has started the flag goes back to the generic entry, so
nova-scheduler does not run with one host's 9 entries (in a cloud they are
in that nova-compute's nova.conf only). Measured here with the upstream
whole-host flavor (1000 candidates; 2 CPU cores shared with other jobs, load
about 15): with the 9 entries in the scheduler's CONF, select_destinations
ran 212 s and the boot failed with an RPC timeout; with the generic entry
the whole boot test takes about 100 s. Not fully analysed: the scheduler
builds each HostState's ``PciDeviceStats`` whitelist from
``CONF.pci.device_spec`` and ``PciPassthroughFilter`` deep-copies the stats,
whitelist included, for each candidate (``support_requests``); that copy
alone is 3 times slower with 9 entries than with 1.
"""

import contextlib
import importlib.metadata
import inspect
import json
import os
import re
import sys
from unittest import mock
import urllib.parse

import fixtures
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from nova.api import auth as nova_auth
from nova.api.openstack import api_version_request
from nova.compute import pci_placement_translator
from nova.scheduler.client import report
from nova.scheduler import request_filter
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import fixtures as func_fixtures
from nova.tests.functional.libvirt import test_pci_in_placement
import openstack
import yaml

from nvlink_placement.flavors import release
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot_api
from nvlink_placement.topology import loader
from tests.functional import cli
from tests import novalike

# The nova wheel installs its api-paste.ini under sys.prefix, not where
# the functional framework's default ($state_path) looks.
API_PASTE = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
ALIAS = 'h100'
VENDOR_ID, PRODUCT_ID = '10de', '2330'
RC = 'CUSTOM_PCI_10DE_2330'
BOARDS = {'compute-01': novalike.BOARD1, 'compute-02': novalike.BOARD2}
DEVICE_SPEC = ('pci', 'device_spec')
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'etc', 'examples')

# -- what differs between the Nova releases this suite runs on -----------
# The suite runs on Nova 34.0.0 (tox -e nova) and on the newest wheel of
# 29 (2024.1), 31 (2025.1) and 33 (2026.1) (tox -e nova-<release>). The
# facts that differ are read here from the installed Nova's own code:
#
# - NOVA_RELEASE: the installed wheel's major version.
# - OWNER_FILTER: nova/scheduler/request_filter.py has owner_nova_filter
#   (new in Nova 34): root_required and every PCI group ask for OWNER_NOVA.
# - OWNER_REPORTED: a Nova 34 nova-compute puts OWNER_NOVA on its compute
#   node provider (nova/compute/resource_tracker.py _get_traits) and on
#   every PCI provider (nova/compute/pci_placement_translator.py); 33 and
#   older put neither (read: does the translator's source name it). Both
#   come with service version 73; kept apart to say which test needs
#   which.
# - MAX_MICROVERSION: nova/api/openstack/api_version_request.py
#   _MAX_API_VERSION, what flavor verify reads to name the release.
# - FAKE_LIBVIRT_KEEPS_PCI: Nova's fake libvirt keeps a guest's PCI
#   <hostdev> elements in the domain it defines, so XMLDesc shows them
#   (nova/tests/fixtures/libvirt.py Domain._parse_definition: Nova 31 and
#   later; Nova 29's keeps mdev ones only).
# - PLACEMENT_WIDE_TREES: the installed openstack-placement registers
#   [workarounds] optimize_for_wide_provider_trees (13.0.1 and 15.0.0 on
#   do; 11.0.1, 2024.1, has only the two [placement] wide-tree options).
NOVA_RELEASE = int(importlib.metadata.version('nova').split('.')[0])
OWNER_FILTER = hasattr(request_filter, 'owner_nova_filter')
OWNER_REPORTED = 'OWNER_NOVA' in inspect.getsource(pci_placement_translator)
MAX_MICROVERSION = api_version_request._MAX_API_VERSION
FAKE_LIBVIRT_KEEPS_PCI = "dev_type == 'pci'" in inspect.getsource(
    fakelibvirt.Domain._parse_definition)


def _placement_wide_trees():
    from oslo_config import cfg
    from placement import conf as placement_conf
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    return ('workarounds' in conf and
            'optimize_for_wide_provider_trees' in conf.workarounds)


PLACEMENT_WIDE_TREES = _placement_wide_trees()
# The installed Nova's own traits on a PCI provider
# (pci_placement_translator).
PCI_TRAITS = ('COMPUTE_MANAGED_PCI_DEVICE',) + (
    ('OWNER_NOVA',) if OWNER_REPORTED else ())
# root_required of the installed Nova's allocation candidates query.
ROOT_REQUIRED = ('OWNER_NOVA,' if OWNER_FILTER else '') + (
    '!COMPUTE_STATUS_DISABLED')
# Placement's [workarounds] option for wide trees (in Placement 13.0.1,
# 15.0.0 and 16.0.0; not in 11.0.1): set where the installed Placement
# registers it (NovaTestCase.setUp).
WIDE_TREE_WORKAROUND = 'optimize_for_wide_provider_trees'


def matching_spec(dev_filter, dev):
    """The first ``[pci] device_spec`` entry of ``dev_filter`` for ``dev``.

    :param dev_filter: a ``nova.pci.whitelist.Whitelist``.
    :param dev: dict of the device's PCI properties.
    :returns: the ``PciDeviceSpec``, or None when none matches. Nova 31+
        ``Whitelist.device_assignable`` returns it; Nova 29's returns a
        bool, and its ``get_devspec`` (what its translator calls) takes a
        ``PciDevice`` object, not a dict (``nova/pci/whitelist.py``): the
        entry then comes from ``get_devspec`` on the object Nova's
        tracker would make of ``dev`` (``PciDevice.create``).
    """
    found = dev_filter.device_assignable(dev)
    if found is True:     # Nova 29: a bool; the entry from get_devspec
        from nova import objects
        objects.register_all()
        return dev_filter.get_devspec(objects.PciDevice.create(None, dev))
    return found or None


def alias_from_config(test):
    """``[pci] alias`` as the installed Nova parses it, read afresh.

    Nova 31+ ``nova.pci.request.get_alias_from_config`` caches it (cleared
    now and after ``test``); Nova 29 has the uncached
    ``_get_alias_from_config``.
    """
    from nova.pci import request as pci_request
    read = getattr(pci_request, 'get_alias_from_config', None) or (
        pci_request._get_alias_from_config)
    clear = getattr(read, 'cache_clear', None)
    if clear is not None:
        clear()
        test.addCleanup(clear)
    return read()


def tool_nova():
    """The tool's model of the installed Nova (``--nova-release N``).

    What ``flavor verify --nova-release <NOVA_RELEASE>`` builds its query
    for; the tests compare that query with the one the installed Nova's
    scheduler code sends.
    """
    return release.choose(release=NOVA_RELEASE)


def numa_node(module):
    """NUMA node of a module: 1-4 on node 0, 5-8 on node 1."""
    return 0 if module <= 4 else 1


def topology_document(hosts):
    """Topology of ``hosts`` (names in :data:`BOARDS`).

    As host inspection writes it: module ids, device ids, NUMA nodes.
    """
    return {'version': 1, 'hosts': {
        host: {'board': 'hgx-h100-8gpu', 'gpus': {
            address: {'module_id': module, 'vendor_id': VENDOR_ID,
                      'device_id': PRODUCT_ID, 'numa_node': numa_node(module)}
            # By module id: out of PCI order, as inspection may list them.
            for address, module in sorted(BOARDS[host].items(),
                                          key=lambda item: item[1])}}
        for host in hosts}}


def config_rows(hosts=tuple(BOARDS)):
    """``nova-config``'s rows (:class:`novaconfig.Setting`) for ``hosts``."""
    topology = loader.parse(topology_document(hosts), '<nova_tests>')
    return novaconfig.settings(list(topology.hosts.values()), ALIAS)


def nova_config(hosts=tuple(BOARDS)):
    """``nova-config``'s rows but ``[pci] device_spec``: dict option -> value.

    ``device_spec`` differs per host: :func:`device_specs`.
    """
    return {(row.section, row.option): row.value
            for row in config_rows(hosts)
            if (row.section, row.option) != DEVICE_SPEC}


def row_hosts(row, hosts):
    """The hosts a ``nova-config`` row is for, read from its service.

    ``nova-compute`` is every host; ``nova-compute (<host>, ...)`` the
    hosts it names.
    """
    if row.service == novaconfig.COMPUTE:
        return list(hosts)
    named = re.fullmatch(re.escape(novaconfig.COMPUTE_ON % '@').replace(
        '@', '(.+)'), row.service)
    if not named:
        return []
    names = named.group(1).split(', ')
    if ' more' in names[-1]:
        raise ValueError('nova-config shortened the host list: %s'
                         % row.service)
    return names


def device_specs(hosts=tuple(BOARDS)):
    """``[pci] device_spec`` of each host's nova-compute, from nova-config.

    :returns: dict host -> list of entries (JSON text) in nova-config's
        order: the host's per-GPU entries with member traits, then the
        generic entry.
    """
    specs = {host: [] for host in hosts}
    for row in config_rows(hosts):
        if (row.section, row.option) == DEVICE_SPEC:
            for host in row_hosts(row, hosts):
                specs[host].append(row.value)
    return specs


def generic_device_spec():
    """The generic entry only: a compute not yet configured for members."""
    return [row.value for row in config_rows()
            if (row.section, row.option) == DEVICE_SPEC and
            row.service == novaconfig.COMPUTE]


def member_traits(hosts=tuple(BOARDS)):
    """Each GPU provider's member traits, as Nova 34 derives them.

    From the ``[pci] device_spec`` entries ``nova-config`` prints for each
    host (:func:`device_specs`), through Nova's own
    ``nova.pci.whitelist.Whitelist`` (first matching entry) and
    ``pci_placement_translator._get_traits_for_dev``; not from the code
    that computes them.

    :returns: dict Nova PCI RP name -> sorted tuple of its member traits.
    """
    from nova.pci import utils
    from nova.pci import whitelist
    found = {}
    # Nova's own tests stub this sysfs read (no such device here); its
    # functional framework has already.
    stub = (contextlib.nullcontext()
            if hasattr(utils.is_physical_function, 'assert_called') else
            mock.patch.object(utils, 'is_physical_function',
                              new=lambda *args: False))
    with stub:
        for host, specs in device_specs(hosts).items():
            dev_filter = whitelist.Whitelist(specs)
            for address in BOARDS[host]:
                spec = matching_spec(dev_filter, {
                    'vendor_id': VENDOR_ID, 'product_id': PRODUCT_ID,
                    'address': address, 'parent_addr': None,
                    'dev_type': 'type-PCI'})
                traits = pci_placement_translator._get_traits_for_dev(
                    spec.tags) if spec else ()
                found['%s_%s' % (host, address.upper())] = tuple(sorted(
                    t for t in traits if t not in PCI_TRAITS))
    return found


def pci_traits(member=()):
    """What the installed Nova gives a PCI provider: its traits, ``member``."""
    return sorted(set(PCI_TRAITS) | set(member))


def pci_info(board, exclude=()):
    """Nova's fake libvirt PCI devices of an HGX H100 board.

    Type-PCI 10de:2330 devices at the board's addresses, on the NUMA
    node of their module (:func:`numa_node`).
    """
    info = fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=0, num_vfs=0)
    for group, (address, module) in enumerate(sorted(board.items())):
        if address in exclude:
            continue
        _, bus, slot_function = address.split(':')
        slot, function = slot_function.split('.')
        info.add_device(dev_type='PCI', bus=int(bus, 16),
                        slot=int(slot, 16), function=int(function),
                        iommu_group=40 + group,
                        numa_node=numa_node(module),
                        vend_id=VENDOR_ID, prod_id=PRODUCT_ID)
    return info


class NovaTestCase(test_pci_in_placement.PlacementPCIReportingTests):
    """Nova's PCI-in-Placement functional base with H100 boards.

    :ivar device_spec: dict host -> its nova-compute's ``[pci]
        device_spec`` (:func:`device_specs`); a test changes a host's
        entry before (re)starting it. Hosts not in it get
        :attr:`PCI_DEVICE_SPEC`, the generic entry.
    """

    PCI_DEVICE_SPEC = generic_device_spec()
    PCI_ALIAS = [nova_config()[('pci', 'alias')]]

    def _setup_services(self):
        self.flags(api_paste_config=API_PASTE, group='wsgi')
        super()._setup_services()

    def useFixture(self, fixture):
        """Keep Nova's Placement fixture as ``placement_fixture``.

        Nova 33 and 34 do (``_IntegratedTestBase.setUp`` in
        ``nova/tests/functional/integrated_helpers.py``); Nova 31 and 29
        keep only its ``api``.
        """
        result = super().useFixture(fixture)
        if isinstance(fixture, func_fixtures.PlacementFixture):
            self.placement_fixture = fixture
        return result

    def setUp(self):
        super().setUp()
        self.flags(group='filter_scheduler', pci_in_placement=True)
        self.placement_fixture.conf_fixture.config(
            group='placement', max_allocation_candidates=1000)
        if WIDE_TREE_WORKAROUND in getattr(
                self.placement_fixture.conf_fixture.conf, 'workarounds', ()):
            # nova-config's placement-api row for this board (8 GPUs, the
            # whole-host flavor). It prunes products that exceed capacity,
            # so Placement returns the same candidates, sooner: unset, the
            # whole-host query alone took 54 s (Placement 13.0.1, two
            # suite workers, load 6 on 2 cores) and the boot failed with
            # MessagingTimeout, Nova's functional framework making the
            # casts to the scheduler calls with a 60 s timeout. Placement
            # 11 has no such option.
            self.placement_fixture.conf_fixture.config(
                group='workarounds', **{WIDE_TREE_WORKAROUND: True})
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.device_spec = device_specs()

    # -- the cloud ---------------------------------------------------------

    def use_cloud(self, name, token='admin'):
        """Point ``OS_CLIENT_CONFIG_FILE`` at a cloud ``name``.

        ``admin_token`` auth with ``token``: Placement's fixture (noauth2)
        takes ``admin`` as an admin token, and Nova's API, whose framework
        stubs keystonemiddleware and builds the request context from the
        ``X-Auth-User`` / ``X-Roles`` headers of its own test client, is
        told that ``token`` stands for an admin of the framework's project
        (what keystonemiddleware would put in the request after validating
        a token). The compute API is ``compute_endpoint_override``.
        """
        api = self.api_fixture.admin_api
        stub = nova_auth.NovaKeystoneContext._create_context

        def from_token(env, **kwargs):
            if ('HTTP_X_AUTH_USER' not in env and
                    env.get('HTTP_X_AUTH_TOKEN') == token):
                env.update({'HTTP_X_AUTH_USER': 'admin',
                            'HTTP_X_AUTH_PROJECT_ID': api.project_id,
                            'HTTP_X_ROLES': 'reader,member,admin'})
            return stub(env, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context', from_token))
        clouds = os.path.join(self.tmp, 'clouds.yaml')
        with open(clouds, 'w') as f:
            yaml.safe_dump({'clouds': {name: {
                'auth_type': 'admin_token',
                # auth_token, not token: openstacksdk 4.4 and older (the
                # 2025.1 and 2024.1 upper constraints) send "None" for an
                # admin_token plugin's "token" from clouds.yaml.
                'auth': {'endpoint': self.placement_fixture.endpoint,
                         'auth_token': token},
                'compute_endpoint_override': api.base_url}}}, f)
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', clouds))

    def start_compute(self, hostname='compute1', *args, **kwargs):
        """Nova's ``start_compute`` with ``hostname``'s ``[pci] device_spec``.

        ``restart_compute_service`` starts the new service through here
        too. See the module docstring for why setting the flag now is
        what that host's nova-compute reads.
        """
        self.flags(device_spec=self.device_spec.get(
            hostname, self.PCI_DEVICE_SPEC), group='pci')
        try:
            return super().start_compute(hostname, *args, **kwargs)
        finally:
            # The other services of this process (nova-scheduler's
            # HostState whitelist) see the generic entry, not this host's.
            self.flags(device_spec=self.PCI_DEVICE_SPEC, group='pci')

    def start_board(self, host, exclude=()):
        """Start nova-compute ``host`` with its H100 board."""
        self.start_compute(hostname=host,
                           pci_info=pci_info(BOARDS[host], exclude))

    def connection(self):
        """An openstacksdk connection to Nova's API as admin."""
        api = self.api_fixture.admin_api
        session = ks_session.Session(
            auth=token_endpoint.Token(api.base_url, 'admin'),
            additional_headers={'X-Auth-User': 'admin',
                                'X-Auth-Project-Id': api.project_id,
                                'X-Roles': 'reader,member,admin'})
        return openstack.connection.Connection(
            session=session, compute_endpoint_override=api.base_url)

    def client(self):
        """A :class:`PlacementClient` on Nova's Placement fixture."""
        session = ks_session.Session(auth=None)
        adapter = ks_adapter.Adapter(
            session, endpoint_override=self.placement_fixture.endpoint,
            additional_headers={'x-auth-token': 'admin'})
        return pc.PlacementClient(adapter, description='Placement')

    def state(self):
        """The exported trees, as canonical JSON text."""
        return json.dumps(snapshot_api.export(self.client()), sort_keys=True)

    def providers(self):
        """dict RP name -> (uuid, parent name)."""
        body = self.client().get('/resource_providers')
        by_uuid = {rp['uuid']: rp['name']
                   for rp in body['resource_providers']}
        return {rp['name']: (rp['uuid'],
                             by_uuid.get(rp['parent_provider_uuid']))
                for rp in body['resource_providers']}

    def traits(self, name):
        uuid = self.providers()[name][0]
        return sorted(self.client().get(
            '/resource_providers/%s/traits' % uuid)['traits'])

    # -- the tool, as an operator runs it ----------------------------------

    def topology(self, hosts):
        path = os.path.join(self.tmp, 'topology-%s.yaml' % '-'.join(hosts))
        with open(path, 'w') as f:
            yaml.safe_dump(topology_document(hosts), f)
        return path

    def nvlink(self, *argv):
        """``openstack nvlink <argv>`` against the live Placement."""
        return cli.run(self, '--os-auth-type', 'admin_token', '--os-token',
                       'admin', '--os-endpoint',
                       self.placement_fixture.endpoint, 'nvlink', *argv)

    def reshape(self, hosts):
        result = self.nvlink('reshape', '--topology', self.topology(hosts),
                             '-f', 'json')
        self.assertEqual(0, result.code, result.stderr)
        return json.loads(result.stdout)

    def check(self, hosts):
        """``check``: (exit code, rows)."""
        result = self.nvlink('check', '--topology', self.topology(hosts),
                             '-f', 'json')
        self.assertIn(result.code, (0, 2), result.stderr)
        return result.code, json.loads(result.stdout or '[]')

    def record_queries(self):
        """The allocation candidates queries nova-scheduler sends, in order.

        :returns: a list that fills as Nova's report client asks
            Placement (``SchedulerReportClient.get_allocation_candidates``).
        """
        queries = []
        original = report.SchedulerReportClient.get_allocation_candidates

        def spy(client, context, resources):
            queries.append(resources.to_querystring())
            return original(client, context, resources)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', spy))
        return queries

    def candidates(self, querystring):
        """GET /allocation_candidates at 1.36 (Nova's microversion)."""
        return self.client().get('/allocation_candidates?' + querystring,
                                 version='1.36')

    def gpu_sets(self, querystring, rc=RC):
        """The GPU RP names of each allocation request, as frozensets."""
        names = {u: n for n, (u, _) in self.providers().items()}
        return {frozenset(names[u] for u, a in r['allocations'].items()
                          if rc in a['resources'])
                for r in self.candidates(querystring)['allocation_requests']}


def canonical(querystring, prefixes):
    """``querystring`` with PCI group suffixes renamed, sorted again.

    :param prefixes: dict suffix prefix (a PCI request id, random per
        request in Nova) -> the name to use.
    """
    def rename(text):
        for old, new in prefixes.items():
            text = text.replace(old + '-', new + '-')
        return text

    params = [(rename(k), rename(v))
              for k, v in urllib.parse.parse_qsl(querystring)]
    return '&'.join('%s=%s' % kv for kv in sorted(params))
