#!/usr/bin/env python3
"""Measure ``snapshot --snapshot S --as-configured T`` at scale.

For N HGX H100 hosts (1000 by default: 9000 providers): the flat trees of
``snapshot --from-topology`` with every member trait removed (a cloud
whose nova-compute has no member-trait entries yet), then the command,
whole process, and its part in process (:func:`as_configured.apply`:
nova-config's entries per host, parsed and matched). Checks that every
GPU provider got 3 member traits. A script, not a test: it prints times
and never asserts them.

Usage: ``python benchmarks/as_configured_scale.py --hosts 1000``
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nvlink_placement.novaconfig import as_configured  # noqa: E402
from nvlink_placement.placement import snapshot  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from tests import novalike  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        topology_path = os.path.join(tmp, 'topology.json')
        with open(topology_path, 'w') as f:
            json.dump({'version': 1, 'hosts': {
                'cn-%04d' % i: {'board': 'hgx-h100-8gpu',
                                'gpus': dict(novalike.BOARD1)}
                for i in range(args.hosts)}}, f)
        topology = loader.load(topology_path)
        document = as_configured.from_topology(
            topology, resource_class=novalike.GPU_RC)
        for rp in document['resource_providers']:
            rp['traits'] = [t for t in rp['traits'] if '_MEMBER' not in t]
        prod = os.path.join(tmp, 'prod.json')
        snapshot.write_file(document, prod)
        start, cpu = time.monotonic(), time.process_time()
        _, reports, _ = as_configured.apply(document, topology)
        in_process = time.monotonic() - start
        in_cpu = time.process_time() - cpu
        planned = os.path.join(tmp, 'planned.json')
        start = time.monotonic()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(['openstack', 'nvlink', 'snapshot', '--snapshot', prod,
                        '--as-configured', topology_path, '-o', planned],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        whole = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole_cpu = (after.ru_utime + after.ru_stime - children.ru_utime -
                     children.ru_stime)
        with open(planned) as f:
            out = json.load(f)
        given = sum(1 for rp in out['resource_providers']
                    if sum('_MEMBER' in t for t in rp['traits']) == 3)
        print('hosts %d, providers %d, GPU providers given traits %d'
              % (args.hosts, len(out['resource_providers']), given))
        print('as_configured.apply in process: %.2f s wall, %.2f s CPU '
              '(%d hosts)' % (in_process, in_cpu, len(reports)))
        print('snapshot --snapshot --as-configured (whole process): %.2f s '
              'wall, %.2f s CPU' % (whole, whole_cpu))


if __name__ == '__main__':
    main()
