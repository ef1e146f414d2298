#!/usr/bin/env python3
"""Time ``nova-config --output-dir`` at fleet scale, per layout.

N HGX H100 hosts (1000 by default) at the real module map of
``tests.novalike.BOARD1``; every 10th host has one GPU excluded (vGPU), so
its list names its GPUs by address. For each layout: a first run into an
empty directory (every file written), then a second run (every file
unchanged, nothing rewritten). Whole-process wall seconds, Python and OSC
start-up included. A script, not a test: it prints an RST table and never
asserts times.

Usage: ``python benchmarks/nova_config_layouts.py [--hosts 1000]``
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from tests import novalike  # noqa: E402

LAYOUTS = ('kolla', 'openstack-ansible', 'config-dir')


def write_topology(path, n):
    hosts = {}
    for i in range(n):
        gpus = {a: {'module_id': m, 'vendor_id': '10de', 'device_id': '2330'}
                for a, m in novalike.BOARD1.items()}
        if i % 10 == 0:
            gpus['0000:bb:00.0']['excluded'] = 'vGPU in use'
        hosts['cn-%04d' % i] = {'board': 'hgx-h100-8gpu', 'gpus': gpus}
    with open(path, 'w') as f:
        json.dump({'version': 1, 'hosts': hosts}, f)


def run(topology, out, layout):
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    start = time.perf_counter()
    result = subprocess.run(
        [exe, 'nvlink', 'nova-config', '--topology', topology, '--alias',
         'h100', '--output-dir', out, '--layout', layout, '-f', 'json'],
        capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    rows = json.loads(result.stdout)
    return seconds, sum(r['status'] == 'written' for r in rows), len(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        topology = os.path.join(tmp, 'topology.json')
        write_topology(topology, args.hosts)
        print('=====  =================  =====  ======  =======  =====')
        print('hosts  layout             run    wall s  written  files')
        print('=====  =================  =====  ======  =======  =====')
        for layout in LAYOUTS:
            out = os.path.join(tmp, layout)
            for label in ('first', 'again'):
                seconds, written, files = run(topology, out, layout)
                print('%-5d  %-17s  %-5s  %6.2f  %7d  %5d' % (
                    args.hosts, layout, label, seconds, written, files))
        print('=====  =================  =====  ======  =======  =====')
    return 0


if __name__ == '__main__':
    sys.exit(main())
