#!/usr/bin/env python3
"""Measure ``check`` on a busy cloud: every GPU used by multi-GPU VMs.

N reshaped HGX H100 hosts (1000 by default) where every GPU is in use:
hosts take turns holding four 2-GPU, two 4-GPU or one 8-GPU instance,
each inside its NVLink domain and with VCPU and memory on the compute
node, as Nova writes them; the first host also holds one split 2-GPU
instance (across two pairs) so ``check`` has something to find. The state
is built as a snapshot (one host reshaped in an embedded Placement, its
tree copied N times with fresh uuids) and bulk-loaded into a gunicorn
Placement, so building it takes seconds, not a reshape of N hosts.

Then ``check`` runs in process (``run.run(..., allocations=ALL_HOSTS)``,
the reads the CLI makes) and as a whole process (``openstack nvlink
check``): its requests, by kind, and its time. This is a script, not a
test: it prints an RST table and never asserts times.

With ``--nova`` it also runs ``check --consumers nova``'s reads in
process against a real Nova 34 compute API (its functional framework,
:mod:`nova_cloud`) holding one server per instance: Nova's server list,
then Placement for the multi-GPU servers.

Usage: ``python benchmarks/check_scale.py --hosts 1000 [--nova]``
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid as uuid_lib

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from nvlink_placement.flavors import servers as servers_mod  # noqa: E402
from nvlink_placement.placement import client as pc  # noqa: E402
from nvlink_placement.placement import embedded  # noqa: E402
from nvlink_placement.placement import snapshot  # noqa: E402
from nvlink_placement.plan import desired  # noqa: E402
from nvlink_placement.plan import run  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from tests import novalike  # noqa: E402
from tests import placement_server  # noqa: E402

RC = novalike.GPU_RC
TEMPLATE = 'cn-template'
SPLIT = 'f0f0f0f0-0000-4000-8000-000000000001'


def topology_document(names):
    return {'version': 1, 'hosts': {
        name: {'board': 'hgx-h100-8gpu', 'gpus': dict(novalike.BOARD1)}
        for name in names}}


def reshaped_template():
    """The reshaped tree of one host (a snapshot document)."""
    topology = loader.parse(topology_document([TEMPLATE]), '<benchmark>')
    hosts = [desired.from_topology(h) for h in topology.hosts.values()]
    with embedded.EmbeddedPlacement(
            novalike.document({TEMPLATE: novalike.BOARD1})) as client:
        result = run.run(client, hosts)
        assert not result.failures, result.failures
        return client.placement.export()


def busy_cloud(n):
    """N copies of the template, every GPU used; (document, names)."""
    template = reshaped_template()
    text = json.dumps(template['resource_providers'])
    old = [rp['uuid'] for rp in template['resource_providers']]
    providers, consumers = [], {}
    for i in range(n):
        host = 'cn-%04d' % i
        copy = text.replace(TEMPLATE, host)
        for u in old:
            copy = copy.replace(u, str(uuid_lib.uuid5(uuid_lib.UUID(u),
                                                      host)))
        tree = json.loads(copy)
        providers.extend(tree)
        by_uuid = {rp['uuid']: rp for rp in tree}
        node = next(rp for rp in tree if rp['parent_provider_uuid'] is None)
        gpus = sorted((rp for rp in tree if RC in rp['inventories']),
                      key=lambda rp: rp['name'])

        def domain(rp, levels):
            for _ in range(levels):
                rp = by_uuid[rp['parent_provider_uuid']]
            return rp['uuid']
        size = (2, 4, 8)[i % 3]
        levels = {2: 1, 4: 2, 8: 3}[size]
        groups = {}
        for rp in gpus:
            groups.setdefault(domain(rp, levels) if size < 8 else node[
                'uuid'], []).append(rp['uuid'])
        instances = list(groups.values())
        if i == 0:
            # One split pair: the first GPU of two different pairs.
            a, b = instances[0], instances[1]
            instances = [[a[0], b[0]], [a[1], b[1]]] + instances[2:]
        for j, members in enumerate(instances):
            consumer = str(uuid_lib.uuid5(uuid_lib.UUID(SPLIT),
                                          '%s-%d' % (host, j)))
            if i == 0 and j == 0:
                consumer = SPLIT
            allocations = {g: {RC: 1} for g in members}
            allocations[node['uuid']] = {'VCPU': 8 * len(members),
                                         'MEMORY_MB': 65536 * len(members)}
            consumers[consumer] = snapshot.consumer_entry(
                'p', 'u', allocations, consumer_type='INSTANCE')
    document = snapshot.document(providers, consumers)
    snapshot.validate(document)
    return document, ['cn-%04d' % i for i in range(n)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--nova', action='store_true',
                        help='Also run check with the consumers from a real '
                             'Nova compute API holding the servers '
                             '(--consumers nova; needs nova_tests/'
                             'requirements.txt).')
    args = parser.parse_args(argv)
    start = time.perf_counter()
    document, names = busy_cloud(args.hosts)
    build_s = time.perf_counter() - start
    tmp = tempfile.mkdtemp(prefix='check-scale-')
    topology_path = os.path.join(tmp, 'topology.yaml')
    with open(topology_path, 'w') as f:
        yaml.safe_dump(topology_document(names), f)
    # Reads only: SQLite serves several workers (doc/source/performance.rst).
    server = placement_server.PlacementServer(
        snapshot=document, workers=2, threads=2).start()
    try:
        client = pc.PlacementClient(server.adapter())
        topology = loader.load(topology_path)
        hosts = [desired.from_topology(h) for h in topology.hosts.values()]
        client.requests.clear()
        start = time.perf_counter()
        result = run.run(client, hosts, apply=False,
                         allocations=run.ALL_HOSTS)
        check_s = time.perf_counter() - start
        reads = dict(client.requests)
        exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
        start = time.perf_counter()
        cli = subprocess.run([exe] + server.cli_auth() + [
            'nvlink', 'check', '--topology', topology_path, '-f', 'value'],
            capture_output=True, text=True)
        cli_s = time.perf_counter() - start
        nova = None
        if args.nova:
            import nova_cloud

            listed, pages, listed_s = nova_cloud.list_servers(
                nova_cloud.servers_of(document, RC))
            client.requests.clear()
            start = time.perf_counter()
            found = run.run(client, hosts, apply=False,
                            allocations=run.ALL_HOSTS,
                            servers=servers_mod.by_node(listed))
            nova = (listed_s, listed_s + time.perf_counter() - start, pages,
                    len(listed), dict(client.requests),
                    sorted(f.consumer for f in found.findings
                           if f.consumer))
    finally:
        server.stop()
    instances = len(document['allocations'])
    print('Machine: %s, %d CPUs, Python %s' % (
        platform.machine(), os.cpu_count(), platform.python_version()))
    print()
    print('%d hosts, %d providers, %d instances (every GPU in use), '
          'state built in %.1f s' % (
              args.hosts, len(document['resource_providers']), instances,
              build_s))
    print('check in process: %.2f s, requests %s; findings %s' % (
        check_s, reads, sorted({f.drift for f in result.findings})))
    print('check whole process: %.2f s, exit %d, %d split-allocation rows'
          % (cli_s, cli.returncode,
             cli.stdout.count('split-allocation')))
    print('reads beyond the idle-cloud constant: %d for %d instances on '
          '%d hosts' % (reads.get('GET', 0), instances, args.hosts))
    if nova:
        listed_s, total_s, pages, listed, nova_reads, split = nova
        placement_split = sorted(f.consumer for f in result.findings
                                 if f.consumer)
        print('check in process, consumers from Nova: %.2f s (server list '
              '%.2f s: %d servers in %d reads), Placement requests %s; '
              'same split consumers as from Placement: %s' % (
                  total_s, listed_s, listed, pages, nova_reads,
                  split == placement_split))


if __name__ == '__main__':
    main()
