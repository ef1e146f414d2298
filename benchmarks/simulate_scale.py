#!/usr/bin/env python3
"""Measure ``openstack nvlink simulate`` at scale.

N HGX H100 hosts (100 by default: 800 GPUs), a seeded workload of E events
(2000 by default: 1-, 2- and 4-GPU servers 5:3:2, exponential arrivals and
lifetimes sized to keep the cloud about 80 % busy), each layout in its own
embedded Placement, with the same code as the command (the engine of
:mod:`nvlink_placement.simulate`). Prints, per layout: wall time, CPU
seconds (the process's: on a shared machine the fair measure), the mean
time of each flavor's ``GET /allocation_candidates``,
and the per-flavor results; then an RST table for doc/source/performance.rst.

This is a script, not a test: it never asserts times.

Usage: ``python benchmarks/simulate_scale.py [--hosts 100] [--events 2000]
[--layout flat --layout flat-numa --layout reshaped] [--together]``
"""

import argparse
import collections
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nvlink_placement.flavors import generate  # noqa: E402
from nvlink_placement.flavors import inputs  # noqa: E402
from nvlink_placement.flavors import release  # noqa: E402
from nvlink_placement.flavors import request  # noqa: E402
from nvlink_placement.novaconfig import as_configured  # noqa: E402
from nvlink_placement.placement import embedded  # noqa: E402
from nvlink_placement.simulate import engine  # noqa: E402
from nvlink_placement.simulate import layouts  # noqa: E402
from nvlink_placement.simulate import numa  # noqa: E402
from nvlink_placement.simulate import report  # noqa: E402
from nvlink_placement.simulate import workload as workload_mod  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from tests import novalike  # noqa: E402

RC = novalike.GPU_RC


def topology(hosts):
    """N HGX H100 hosts, modules 1-4 on NUMA node 0 and 5-8 on node 1."""
    gpus = {address: {'module_id': module, 'numa_node': int(module > 4)}
            for address, module in novalike.BOARD1.items()}
    return loader.parse({'version': 1, 'hosts': {
        'compute-%03d' % i: {'board': 'hgx-h100-8gpu', 'gpus': dict(gpus)}
        for i in range(hosts)}}, '<benchmark>')


def workload(hosts, events, seed):
    gpus = hosts * 8
    mean_gpus = (5 * 1 + 3 * 2 + 2 * 4) / 10.0
    lifetime = 12.0
    rate = 0.8 * gpus / (lifetime * mean_gpus)      # boots per hour
    return workload_mod.parse({
        'version': 1, 'seed': seed, 'events': events,
        'arrival': {'distribution': 'exponential', 'mean': 1.0 / rate},
        'lifetime': {'distribution': 'exponential', 'mean': lifetime},
        'flavors': [{'gpus': 1, 'weight': 5}, {'gpus': 2, 'weight': 3},
                    {'gpus': 4, 'weight': 2}]}, '<benchmark workload>')


class _Timed(object):
    """A client wrapper timing the allocation candidates queries."""

    def __init__(self, client, urls):
        self._client = client
        self._urls = urls
        self.times = collections.defaultdict(list)

    def get(self, url, **kwargs):
        started = time.monotonic()
        body = self._client.get(url, **kwargs)
        if url in self._urls:
            self.times[self._urls[url]].append(time.monotonic() - started)
        return body

    def __getattr__(self, name):
        return getattr(self._client, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=100)
    parser.add_argument('--events', type=int, default=2000)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--layout', action='append', default=[],
                        choices=engine.LAYOUTS)
    parser.add_argument('--together', action='store_true',
                        help='Run the layouts as the simulate command does '
                             '(at once, a process each) and print the wall '
                             'time of the whole run instead of timing each '
                             'layout alone.')
    args = parser.parse_args()
    topo = topology(args.hosts)
    hosts = list(topo.hosts.values())
    load = workload(args.hosts, args.events, args.seed)
    ours = [inputs.flavor_from_dict(f.as_dict()) for f in generate.generate(
        hosts, 'h100', sizes=[1, 2, 4]).flavors]
    aliases = {'h100': request.Alias('h100', RC)}
    nova = release.choose(None, release.AUTO)
    by_size = engine.flavors_by_size(ours, aliases, nova, load, 'bench')
    own = {s: f for s, (f, _) in by_size.items()}
    specs = numa.extra_specs(hosts, load.sizes)
    runs = {engine.RESHAPED: by_size}
    for layout, extra in ((engine.FLAT, None), (engine.FLAT_NUMA, specs)):
        runs[layout] = engine.flavors_by_size(
            list(engine.upstream_flavors(own, 'h100', extra).values()),
            aliases, nova, load, 'bench')
    numa_sizes = {engine.FLAT_NUMA: [s for s in load.sizes
                                     if numa.required(specs[s])]}
    document = as_configured.from_topology(topo, resource_class=RC)
    print('machine: %s, %d CPUs, Python %s; %d hosts, %d events'
          % (platform.processor() or platform.machine(), os.cpu_count(),
             platform.python_version(), args.hosts, args.events))
    chosen = args.layout or list(engine.LAYOUTS)
    if args.together:
        started = time.monotonic()
        done = layouts.run(document, hosts, chosen, runs, load, RC,
                           numa_sizes=numa_sizes)
        print('%s at once (%d processes): %.1f s wall' % (
            ' and '.join(chosen), min(len(chosen), os.cpu_count()),
            time.monotonic() - started))
        results = [[r for r, _ in seed] for seed in done]
        for row in report.rows(results):
            print('  ', row)
        return
    table = []
    for layout in chosen:
        urls = {q.url: s for s, (_, q) in runs[layout].items()}
        started, cpu = time.monotonic(), time.process_time()
        with embedded.EmbeddedPlacement(document) as client:
            loaded = time.monotonic() - started
            timed = _Timed(client, urls)
            result = engine.simulate(
                timed, hosts, layout, load, runs[layout], RC,
                numa_sizes=numa_sizes.get(layout, ()))
        wall = time.monotonic() - started
        cpu = time.process_time() - cpu
        queries = ', '.join('%d-GPU %.3f s' % (s, sum(t) / len(t))
                            for s, t in sorted(timed.times.items()))
        print('%s: %.1f s wall (load %.1f s), %.1f s CPU, %.3f CPU s per '
              'event; mean query (wall): %s' % (
                  layout, wall, loaded, cpu, cpu / args.events, queries))
        for row in report.rows([[result]]):
            print('  ', row)
        print('   mean GPUs in use: %.1f' % report.mean_in_use(
            result.timeline))
        table.append((layout, wall, cpu, queries))
    print()
    rule = '=========  ========  =======  ===========  ' + '=' * 44
    print(rule)
    print('layout     wall s    CPU s    CPU s/event  mean allocation '
          'candidates query (wall)')
    print(rule)
    for layout, wall, cpu, queries in table:
        print('%-9s  %8.1f  %7.1f  %11.3f  %s' % (
            layout, wall, cpu, cpu / args.events, queries))
    print(rule)


if __name__ == '__main__':
    main()
