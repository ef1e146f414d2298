"""A real Nova compute API holding a busy cloud's servers, for benchmarks.

Nova 34's own functional framework (``nova.test.TestCase``: its API and
cell databases on SQLite in memory, the compute API over wsgi-intercept,
Neutron's fixture for the security groups the server view reads) with one
server object per consumer of a snapshot, on the node (hypervisor
hostname) its allocations are on and with a flavor asking for as many
GPUs (``pci_passthrough:alias = h100:N``). Needs ``nova_tests/
requirements.txt``. Not a test: :func:`list_servers` times Nova's server
list as ``check --consumers nova`` reads it. Nova is imported in a child
process only: its eventlet monkey-patching would break the benchmark's
own HTTP to Placement.
"""

import concurrent.futures
import multiprocessing
import os
import sys
import time
import unittest
import warnings

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint


def servers_of(document, rc):
    """``[(server uuid, node name, GPUs)]`` of a snapshot's consumers.

    The node is the root provider of the consumer's GPUs.
    """
    providers = {rp['uuid']: rp for rp in document['resource_providers']}

    def root(uuid):
        while providers[uuid]['parent_provider_uuid']:
            uuid = providers[uuid]['parent_provider_uuid']
        return providers[uuid]['name']
    out = []
    for consumer, entry in sorted(document['allocations'].items()):
        gpus = [u for u, a in entry['allocations'].items()
                if rc in a['resources']]
        if gpus:
            out.append((consumer, root(gpus[0]), len(gpus)))
    return out


def list_servers(servers):
    """Nova's servers as ``check`` reads them, in a fresh child process.

    :returns: ``(Server list, pages, seconds of the reads)``.
    """
    with concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context('spawn')) as pool:
        return pool.submit(run, servers, _read).result()


def _read(compute):
    from nvlink_placement.flavors import servers as servers_mod
    start = time.perf_counter()
    listed, pages = servers_mod.read(compute)
    return listed, pages, time.perf_counter() - start


def run(servers, callback):
    """Start the compute API with ``servers``; ``callback(adapter)``.

    :param servers: ``[(uuid, node, GPUs)]`` (:func:`servers_of`).
    :param callback: called with a keystoneauth adapter on the compute API
        as admin; its return value is returned.
    :raises RuntimeError: the framework failed (its traceback included).
    """
    from nova import context
    from nova.network import model as network_model
    from nova import objects
    from nova import test
    from nova.tests import fixtures as nova_fixtures

    box = {}

    class _Cloud(test.TestCase):

        def runTest(self):
            # The wheel puts api-paste.ini under sys.prefix (as nova_tests).
            self.flags(api_paste_config=os.path.join(
                sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
            # Production's defaults: response validation warns (the
            # framework's is "error"), and a SQLAlchemy deprecation in
            # Nova's marker lookup (noload(), SQLAlchemy 2.1) is no error.
            self.flags(response_validation='warn', group='api')
            warnings.filterwarnings('ignore', message='The noload')
            self.useFixture(nova_fixtures.NeutronFixture(self))
            api = self.useFixture(nova_fixtures.OSAPIFixture(
                api_version='v2.1')).admin_api
            ctxt = context.get_admin_context()
            flavors = {}
            for size in sorted({n for _, _, n in servers}):
                flavor = objects.Flavor(
                    ctxt, name='gpu.h100.%dx' % size, flavorid='gpu-%d' % size,
                    vcpus=8 * size, memory_mb=65536 * size, root_gb=1,
                    ephemeral_gb=0, swap=0,
                    extra_specs={'pci_passthrough:alias': 'h100:%d' % size})
                flavor.create()
                flavors[size] = flavor
            cell = self.cell_mappings['cell1']
            node_ids = {}
            for uuid, node, size in servers:
                flavor = flavors[size]
                objects.Instance(
                    ctxt, uuid=uuid, project_id=api.project_id,
                    user_id='admin', host=node, node=node,
                    compute_id=node_ids.setdefault(node, len(node_ids) + 1),
                    display_name='s-%s' % uuid[:8],
                    hostname='s-%s' % uuid[:8], vm_state='active',
                    power_state=1, flavor=flavor, instance_type_id=flavor.id,
                    vcpus=flavor.vcpus, memory_mb=flavor.memory_mb,
                    root_gb=1, ephemeral_gb=0, image_ref='',
                    info_cache=objects.InstanceInfoCache(
                        network_info=network_model.NetworkInfo())).create()
                objects.InstanceMapping(
                    ctxt, instance_uuid=uuid, cell_mapping=cell,
                    project_id=api.project_id).create()
            session = ks_session.Session(
                auth=token_endpoint.Token(api.base_url, 'admin'),
                additional_headers={'X-Auth-User': 'admin',
                                    'X-Auth-Project-Id': api.project_id,
                                    'X-Roles': 'reader,member,admin'})
            box['value'] = callback(ks_adapter.Adapter(
                session, service_type='compute',
                endpoint_override=api.base_url))

    result = unittest.TestResult()
    _Cloud().run(result)
    for _, trace in result.errors + result.failures:
        raise RuntimeError('the Nova framework failed:\n%s' % trace)
    return box['value']
