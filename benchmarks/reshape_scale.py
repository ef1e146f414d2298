#!/usr/bin/env python3
"""Measure reshape, no-op reshape, check and flatten at cloud scale.

Starts a real Placement over HTTP (gunicorn on 127.0.0.1; SQLite with one
worker, or PostgreSQL with ``--postgres`` and two workers) holding N hosts of
8 GPUs as nova-compute reports them (bulk-loaded into the SQLite file, or
seeded with nova-compute's requests on PostgreSQL), then times each
operation and counts its HTTP requests by method. Two references are
measured in the same run:

* the server floor: the exact writes of the first reshape, replayed one by
  one with a bare ``requests`` session on the same server (after flatten);
* the manual procedure: the ``openstack resource provider ...`` command
  sequence an operator runs with osc-placement, for a few hosts.

Then the offline figures of ``benchmarks/offline_scale.py`` (``--snapshot``
commands and the live export of ``--offline-hosts`` hosts), so one command
(``tox -e bench``) prints both.

This is a script, not a test: it prints RST tables for
``doc/source/performance.rst`` and never asserts times.

Usage: ``python benchmarks/reshape_scale.py --hosts 10,100,1000``
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import offline_scale  # noqa: E402
import rst  # noqa: E402

from nvlink_placement.placement import client as pc  # noqa: E402
from nvlink_placement.plan import desired  # noqa: E402
from nvlink_placement.plan import run  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from tests import novalike  # noqa: E402
from tests import placement_server  # noqa: E402

WRITES = ('POST', 'PUT', 'DELETE')


class Recorder(pc.PlacementClient):
    """The real client, also keeping every write it sends."""

    def __init__(self, adapter):
        super().__init__(adapter)
        self.writes = []

    def request(self, method, url, body=None, version=None, **kwargs):
        if method in WRITES:
            self.writes.append((method, url, body, version))
        return super().request(method, url, body=body, version=version,
                               **kwargs)


def topology_for(n):
    """N HGX H100 hosts with the real board-1 BDF map."""
    document = {'version': 1, 'hosts': {
        'cn-%04d' % i: {'board': 'hgx-h100-8gpu',
                        'gpus': dict(novalike.BOARD1)} for i in range(n)}}
    return loader.parse(document, '<benchmark>')


def timed(func):
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def counts(client):
    return ', '.join('%s %d' % (m, client.requests[m])
                     for m in ('GET', 'POST', 'PUT', 'DELETE')
                     if client.requests[m])


def replay(server, writes):
    """Send recorded writes with a bare HTTP client; return the seconds."""
    session = requests.Session()
    session.headers['X-Auth-Token'] = 'admin'
    start = time.perf_counter()
    for method, url, body, version in writes:
        headers = {'OpenStack-API-Version': 'placement %s' % version}
        response = session.request(method, server.url + url, json=body,
                                   headers=headers, timeout=60)
        if response.status_code >= 400:
            raise RuntimeError('replay %s %s: %s' % (method, url,
                                                     response.text))
    return time.perf_counter() - start


def openstack(server, *args):
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    out = subprocess.run([exe] + server.cli_auth() + list(args),
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def manual_procedure(server, host, board, topology):
    """What an operator types with osc-placement for one host.

    Includes the uuid look-ups (``resource provider list --name``) the
    manual procedure needs; returns the number of CLI calls.
    """
    calls = [0]

    def cli(*args):
        calls[0] += 1
        return openstack(server, *args)

    cn = cli('resource', 'provider', 'list', '--name', host, '-f', 'value',
             '-c', 'uuid')
    uuids = {None: cn}
    for group in topology.hosts[host].groups:
        uuids[group.name] = cli(
            'resource', 'provider', 'create', '--parent-provider',
            uuids[group.parent], group.name, '-f', 'value', '-c', 'uuid')
        cli('--os-placement-api-version', '1.6', 'resource', 'provider',
            'trait', 'set', '--trait', group.trait, '--trait',
            'CUSTOM_OWNER_NVLINK_PLACEMENT', uuids[group.name])
    host_topology = topology.hosts[host]
    for address in board:
        name = host_topology.gpu_provider_name(address)
        rp = cli('resource', 'provider', 'list', '--name', name, '-f',
                 'value', '-c', 'uuid')
        cli('--os-placement-api-version', '1.37', 'resource', 'provider',
            'set', '--name', name, '--parent-provider',
            uuids[host_topology.parent_of_gpu(address)], rp)
    return calls[0]


def start_server(args, n):
    """Placement with N Nova-like hosts; returns (server, database, s).

    On SQLite the hosts are bulk-loaded into the file before the server
    starts; on PostgreSQL they are seeded with nova-compute's requests.
    """
    if not args.postgres:
        seconds, server = timed(lambda: placement_server.PlacementServer(
            snapshot=novalike.document({'cn-%04d' % i: novalike.BOARD1
                                        for i in range(n)})).start())
        return server, None, seconds
    database = Postgres().start()
    server = placement_server.PlacementServer(
        workers=2, connection=database.url).start()
    client = pc.PlacementClient(server.adapter())
    seconds, _ = timed(lambda: [novalike.seed_host(
        client, 'cn-%04d' % i, novalike.BOARD1) for i in range(n)])
    return server, database, seconds


class Postgres(object):
    """A throw-away PostgreSQL cluster on a Unix socket (run as postgres)."""

    def start(self):
        self.dir = tempfile.mkdtemp(prefix='pg-')
        shutil.chown(self.dir, 'postgres')
        bindir = subprocess.run(['pg_config', '--bindir'], text=True,
                                capture_output=True).stdout.strip()
        if not os.path.exists(os.path.join(bindir, 'initdb')):
            bindir = sorted(os.path.join('/usr/lib/postgresql', v, 'bin')
                            for v in os.listdir('/usr/lib/postgresql'))[-1]
        self.bindir = bindir
        self._as_postgres(os.path.join(bindir, 'initdb'), '-D',
                          self.dir + '/data', '-A', 'trust', '-U',
                          'postgres')
        self._as_postgres(os.path.join(bindir, 'pg_ctl'), '-D',
                          self.dir + '/data', '-o',
                          "-k %s -c listen_addresses=''" % self.dir,
                          '-l', self.dir + '/log', '-w', 'start')
        self._as_postgres(os.path.join(bindir, 'createdb'), '-h', self.dir,
                          'placement')
        self.url = ('postgresql+psycopg2://postgres@/placement?host=%s'
                    % self.dir)
        return self

    def _as_postgres(self, *cmd):
        subprocess.run(['runuser', '-u', 'postgres', '--'] + list(cmd),
                       check=True, capture_output=True)

    def stop(self):
        self._as_postgres(os.path.join(self.bindir, 'pg_ctl'), '-D',
                          self.dir + '/data', '-m', 'fast', 'stop')
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(n, args):
    server, database, seed = start_server(args, n)
    try:
        client = Recorder(server.adapter())
        topology = topology_for(n)
        hosts = [desired.from_topology(h) for h in topology.hosts.values()]
        row = {'hosts': n, 'seed_s': seed}
        for name, call in (
                ('reshape', lambda: run.run(client, hosts,
                                            workers=args.workers)),
                ('noop', lambda: run.run(client, hosts,
                                         workers=args.workers)),
                ('check', lambda: run.run(client, hosts, apply=False)),
                ('flatten', lambda: run.run(
                    client, [desired.flat(h.name) for h in hosts],
                    workers=args.workers))):
            client.requests.clear()
            if name == 'reshape':
                client.writes = []
            seconds, result = timed(call)
            writes = list(client.writes) if name == 'reshape' else None
            row[name] = (seconds, counts(client), len(result.actions))
            if result.failures:
                raise RuntimeError('%s failed: %s' % (name, [
                    (f.host, f.error) for f in result.failures[:3]]))
            if writes is not None:
                recorded = writes
        row['floor_s'] = replay(server, recorded)
        row['floor_writes'] = len(recorded)
        seconds, _ = timed(lambda: openstack(
            server, 'nvlink', 'check', '--topology', args.topology_file(n),
            '-f', 'value'))
        row['cli_check_s'] = seconds
        run.run(client, [desired.flat(h.name) for h in hosts])
        if args.osc_hosts and n == min(args.hosts):
            names = list(topology.hosts)[:args.osc_hosts]
            seconds, calls = timed(lambda: sum(manual_procedure(
                server, host, novalike.BOARD1, topology) for host in names))
            row['osc'] = (seconds / len(names), calls / len(names))
        return row
    finally:
        server.stop()
        if database:
            database.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', default='10,100,1000',
                        help='Comma-separated host counts (default '
                             '%(default)s).')
    parser.add_argument('--workers', type=int, default=8)
    parser.add_argument('--osc-hosts', type=int, default=2,
                        help='Hosts reshaped by the osc-placement command '
                             'sequence in the smallest run (0: skip).')
    parser.add_argument('--postgres', action='store_true',
                        help='Placement on PostgreSQL with 2 workers.')
    parser.add_argument('--json', metavar='FILE',
                        help='Also write the raw results as JSON (the '
                             'offline ones to FILE.offline.json).')
    offline_scale.add_arguments(parser)
    args = parser.parse_args(argv)
    args.hosts = [int(h) for h in args.hosts.split(',')]
    tmp = tempfile.mkdtemp(prefix='bench-')

    def topology_file(n):
        path = os.path.join(tmp, 'topology-%d.yaml' % n)
        if not os.path.exists(path):
            import yaml
            with open(path, 'w') as f:
                yaml.safe_dump({'version': 1, 'hosts': {
                    'cn-%04d' % i: {'board': 'hgx-h100-8gpu',
                                    'gpus': dict(novalike.BOARD1)}
                    for i in range(n)}}, f)
        return path
    args.topology_file = topology_file
    rows = []
    for n in args.hosts:
        print('measuring %d hosts ...' % n, file=sys.stderr)
        rows.append(measure(n, args))
        report(rows[-1:], args, file=sys.stderr)     # progress
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(rows, f, indent=2)
    shutil.rmtree(tmp, ignore_errors=True)
    report(rows, args)
    print()
    offline_scale.run_all(args, args.json and args.json + '.offline.json')


def report(rows, args, file=None):
    def out(*text):
        print(*text, file=file or sys.stdout)

    backend = ('PostgreSQL, gunicorn 2 workers' if args.postgres
               else 'SQLite, gunicorn 1 worker 1 thread')
    out('Machine: %s, %d CPUs, Python %s; Placement: %s; client workers: '
        '%d' % (platform.platform(), os.cpu_count(),
                platform.python_version(), backend, args.workers))
    out()
    header = ('hosts', 'operation', 'wall s', 'per host ms', 'requests',
              'actions')
    lines = []
    for row in rows:
        for op in ('reshape', 'noop', 'check', 'flatten'):
            seconds, reqs, actions = row[op]
            lines.append((str(row['hosts']), op, '%.2f' % seconds,
                          '%.1f' % (1000 * seconds / row['hosts']), reqs,
                          str(actions)))
        lines.append((str(row['hosts']), 'floor (bare replay)',
                      '%.2f' % row['floor_s'],
                      '%.1f' % (1000 * row['floor_s'] / row['hosts']),
                      '%d writes' % row['floor_writes'], ''))
        lines.append((str(row['hosts']), 'CLI check (whole process)',
                      '%.2f' % row['cli_check_s'], '', '', ''))
    for line in rst.table(header, lines):
        out(line)
    out()
    for row in rows:
        ratio = row['reshape'][0] / row['floor_s']
        out('%d hosts: reshape / server floor = %.2f; seeding (bulk on '
            'SQLite) took %.1f s'
            % (row['hosts'], ratio, row['seed_s']))
        if 'osc' in row:
            per_host, calls = row['osc']
            ours = row['reshape'][0] / row['hosts']
            out('osc-placement sequence: %.1f s per host (%.0f CLI calls);'
                ' nvlink reshape: %.3f s per host; ratio %.0fx'
                % (per_host, calls, ours, per_host / ours))


if __name__ == '__main__':
    main()
