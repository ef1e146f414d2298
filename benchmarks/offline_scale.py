#!/usr/bin/env python3
"""Measure offline mode (``--snapshot``) and the live export at scale.

For N HGX H100 hosts (1000 by default: 9000 providers), in one run:

1. ``openstack nvlink snapshot --from-topology T -o S`` (the flat trees
   Nova reports), then consumers added to S: every 4th host runs a typed
   2-GPU instance, every 8th an untyped 1-GPU consumer (written before
   consumer types existed).
2. ``openstack nvlink reshape --topology T --snapshot S --dry-run``.
3. ``reshape --topology T --snapshot S --save-snapshot OUT``, then
   ``check --topology T --snapshot OUT``, which must exit 0.
4. The parts of 3, in process with the same code: load (read, check,
   bulk-load), apply (the reshape, 8 workers), export (the saved
   snapshot); and the embedded server's floor for the apply: the same
   writes sent one by one with a bare ``requests`` session to a fresh
   embedded Placement loaded with S.
5. ``openstack nvlink snapshot -o LIVE`` against a gunicorn Placement
   whose SQLite file was bulk-loaded with S; LIVE must equal S.

Whole-process times include Python and OSC start-up. This is a script,
not a test: it prints an RST table and never asserts times.

Usage: ``python benchmarks/offline_scale.py --offline-hosts 1000`` (also run
by ``benchmarks/reshape_scale.py``, i.e. ``tox -e bench``)
"""

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import requests
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import rst  # noqa: E402

from nvlink_placement.placement import embedded  # noqa: E402
from nvlink_placement.placement import snapshot  # noqa: E402
from nvlink_placement.plan import desired  # noqa: E402
from nvlink_placement.plan import run  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from tests import novalike  # noqa: E402
from tests import placement_server  # noqa: E402

RC = novalike.GPU_RC
WRITES = ('POST', 'PUT', 'DELETE')


def children_cpu():
    """CPU seconds used by this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def openstack(*args, expect=0):
    """Run the installed ``openstack`` CLI.

    :returns: ``((wall s, CPU s), stdout)``.
    """
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    cpu = children_cpu()
    start = time.perf_counter()
    out = subprocess.run([exe] + list(args), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != expect:
        raise RuntimeError('openstack %s exited %d: %s' % (
            ' '.join(args), out.returncode, out.stderr[-2000:]))
    return (seconds, children_cpu() - cpu), out.stdout


def timed(func):
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def cpu_timed(func):
    """Return ``(wall s, CPU s of this process, value)``.

    The machine is shared: the CPU time of the process is the steadier
    figure.
    """
    cpu = time.process_time()
    seconds, value = timed(func)
    return seconds, time.process_time() - cpu, value


def write_topology(path, n):
    with open(path, 'w') as f:
        yaml.safe_dump({'version': 1, 'hosts': {
            'cn-%04d' % i: {'board': 'hgx-h100-8gpu',
                            'gpus': dict(novalike.BOARD1)}
            for i in range(n)}}, f)


def add_consumers(document):
    """Typed 2-GPU instances on every 4th host, untyped ones on every 8th.

    :returns: ``(consumers, untyped)`` counts.
    """
    names = {rp['name']: rp['uuid'] for rp in document['resource_providers']}
    hosts = sorted(rp['name'] for rp in document['resource_providers']
                   if rp['parent_provider_uuid'] is None)
    untyped = 0
    for i, host in enumerate(hosts):
        if i % 4 == 0:     # modules 1 and 3: an NVLink pair
            gpus, kind = ('0000:4C:00.0', '0000:5D:00.0'), 'INSTANCE'
        elif i % 8 == 1:
            gpus, kind = ('0000:BB:00.0',), None
            untyped += 1
        else:
            continue
        alloc = {names[host]: {'VCPU': 32, 'MEMORY_MB': 262144,
                               'DISK_GB': 100}}
        alloc.update({names['%s_%s' % (host, g)]: {RC: 1} for g in gpus})
        consumer = '%08x-0000-4000-8000-%012x' % (i, i)
        document['allocations'][consumer] = snapshot.consumer_entry(
            'project-%d' % (i % 7), 'user-%d' % (i % 5), alloc, 1, kind)
    snapshot.validate(document)
    return len(document['allocations']), untyped


def in_process(topology_path, snapshot_path, workers):
    """Load, apply and export as ``reshape --save-snapshot`` does."""
    hosts = [desired.from_topology(h)
             for h in loader.load(topology_path).hosts.values()]
    row = {}
    writes = []
    start = time.perf_counter()
    cpu = time.process_time()
    document = snapshot.read_file(snapshot_path)
    placement = embedded.EmbeddedPlacement(document)
    with placement as client:
        row['load'] = (time.perf_counter() - start,
                       time.process_time() - cpu)
        real = client.request

        def recording(method, url, body=None, version=None, **kwargs):
            if method in WRITES:
                writes.append((method, url, body, version))
            return real(method, url, body=body, version=version, **kwargs)
        client.request = recording
        wall, cpu, result = cpu_timed(
            lambda: run.run(client, hosts, workers=workers))
        row['apply'] = (wall, cpu)
        if result.failures:
            raise RuntimeError('apply failed: %s' % result.failures[:3])
        wall, cpu, _ = cpu_timed(lambda: snapshot.write_file(
            placement.export(), os.devnull))
        row['export'] = (wall, cpu)
    row['writes'] = len(writes)
    with embedded.EmbeddedPlacement(document) as client:
        session = requests.Session()
        session.trust_env = False
        session.headers['X-Auth-Token'] = 'admin'
        url = client.placement.url

        def replay():
            for method, path, body, version in writes:
                response = session.request(
                    method, url + path, json=body,
                    headers={'OpenStack-API-Version': 'placement %s'
                             % version})
                if response.status_code >= 400:
                    raise RuntimeError('replay %s %s: %s' % (
                        method, path, response.text[:500]))
        wall, cpu, _ = cpu_timed(replay)
        row['floor'] = (wall, cpu)
    return row


def live_export(snapshot_path, args, tmp):
    """Export over gunicorn; the server's CPU is that of its processes."""
    document = snapshot.read_file(snapshot_path)
    start = time.perf_counter()
    server = placement_server.PlacementServer(
        workers=args.server_workers, threads=args.server_threads,
        snapshot=document).start()
    row = {'preload': (time.perf_counter() - start, None)}
    cpu = children_cpu()
    try:
        out = os.path.join(tmp, 'live.json')
        row['live'], _ = openstack('nvlink', 'snapshot', '-o', out,
                                   '--workers', str(export_workers(args)),
                                   *server.cli_auth())
        row['live_same'] = snapshot.read_file(out) == document
    finally:
        server.stop()
    # gunicorn's processes, boot included, are accounted once reaped.
    row['live_server'] = (None, children_cpu() - cpu - row['live'][1])
    return row


def export_workers(args):
    """Reads in flight for the live export.

    ``--export-workers``, else as many as the server serves at once
    (workers x threads). More only queue: measured on 2 cores against 2
    workers x 2 threads, the 1000-host export with 8 in flight cost
    Placement 99 s of CPU and took 65-69 s, with 2 to 4 in flight 70-84 s
    of CPU and 49-56 s.
    """
    return args.export_workers or args.server_workers * args.server_threads


def measure(n, args):
    tmp = tempfile.mkdtemp(prefix='offline-bench-')
    try:
        topology = os.path.join(tmp, 'topology.yaml')
        flat = os.path.join(tmp, 'flat.json')
        write_topology(topology, n)
        row = {'hosts': n}
        row['generate'], _ = openstack(
            'nvlink', 'snapshot', '--from-topology', topology,
            '--resource-class', RC, '-o', flat)
        document = snapshot.read_file(flat)
        row['providers'] = len(document['resource_providers'])
        row['consumers'], row['untyped'] = add_consumers(document)
        snapshot.write_file(document, flat)
        row['dry_run'], out = openstack(
            'nvlink', 'reshape', '--topology', topology, '--snapshot', flat,
            '--dry-run', '-f', 'value', '-c', 'action')
        row['actions'] = len(out.splitlines())
        saved = os.path.join(tmp, 'reshaped.json')
        if not args.quick:
            row['save'], _ = openstack(
                'nvlink', 'reshape', '--topology', topology, '--snapshot',
                flat, '--save-snapshot', saved, '-f', 'value', '-c',
                'action')
            row['check'], _ = openstack('nvlink', 'check', '--topology',
                                        topology, '--snapshot', saved)
            row.update(in_process(topology, flat, args.workers))
        row.update(live_export(flat, args, tmp))
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(rows, args, file=None):
    def out(*text):
        print(*text, file=file or sys.stdout)

    out('Machine: %s, %d CPUs, Python %s; offline: embedded Placement '
        '(SQLite in memory); live export: gunicorn %d worker(s) x %d '
        'thread(s) on SQLite, %d read(s) in flight' % (
            platform.platform(), os.cpu_count(), platform.python_version(),
            args.server_workers, args.server_threads, export_workers(args)))
    out()
    lines = []
    for r in rows:
        def line(key, operation, note=''):
            if key in r:
                lines.append((r['hosts'], operation, r[key], note))

        line('generate', 'snapshot --from-topology (whole process)',
             '%d providers' % r['providers'])
        line('dry_run', 'reshape --dry-run --snapshot (whole process)',
             '%d actions; target < 15 s' % r['actions'])
        line('save', 'reshape --save-snapshot (whole process)')
        line('load', '  load: read, check, bulk-load',
             '%d consumers, %d untyped' % (r['consumers'], r['untyped']))
        if 'apply' in r:
            line('apply', '  apply', '%d writes; %.2f x floor (CPU %.2f x);'
                 ' target <= 1.25' % (
                     r['writes'], r['apply'][0] / r['floor'][0],
                     r['apply'][1] / r['floor'][1]))
        line('floor', '  embedded floor (bare replay)')
        line('export', '  export (--save-snapshot)', 'target < 15 s')
        line('check', 'check --snapshot OUT (whole process)', 'exit 0')
        line('live', 'live snapshot -o over gunicorn (whole process)',
             '%s; target < 60 s' % ('same document' if r['live_same']
                                    else 'DIFFERENT'))
        line('live_server', '  Placement (gunicorn) during the export',
             'CPU of its processes')
        line('preload', '  (gunicorn start with bulk preload)')

    def number(value):
        return '' if value is None else '%.2f' % value
    cells = [(str(h), op, number(t[0]), number(t[1]), note)
             for h, op, t, note in lines]
    header = ('hosts', 'operation', 'wall s', 'CPU s', 'notes')
    for line in rst.table(header, cells):
        out(line)
    out('CPU s: of the process and its children (whole-process rows), of '
        'this process (in-process rows); the machine is shared, so CPU is '
        'the steadier figure.')


def add_arguments(parser):
    parser.add_argument('--offline-hosts', default='1000',
                        help='Comma-separated host counts for the offline '
                             'and live-export figures (default '
                             '%(default)s; 0 skips them).')
    parser.add_argument('--quick', action='store_true',
                        help='Skip the apply (reshape --save-snapshot, '
                             'check, the in-process parts and the floor).')
    parser.add_argument('--server-workers', type=int, default=2,
                        help='gunicorn workers serving the live export '
                             '(reads only, so SQLite allows several; '
                             'default %(default)s).')
    parser.add_argument('--server-threads', type=int, default=2,
                        help='Threads per gunicorn worker (more than one '
                             'keeps connections alive; default '
                             '%(default)s).')
    parser.add_argument('--export-workers', type=int, default=0,
                        help='snapshot --workers for the live export '
                             '(default: --server-workers x '
                             '--server-threads, what the server serves at '
                             'once).')


def run_all(args, json_path=None):
    counts = [int(h) for h in str(args.offline_hosts).split(',') if int(h)]
    rows = []
    for n in counts:
        print('measuring offline mode with %d hosts ...' % n,
              file=sys.stderr)
        rows.append(measure(n, args))
        if json_path:
            with open(json_path, 'w') as f:
                json.dump(rows, f, indent=2)
    if rows:
        report(rows, args)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_arguments(parser)
    parser.add_argument('--workers', type=int, default=8)
    parser.add_argument('--json', metavar='FILE',
                        help='Also write the raw results as JSON.')
    args = parser.parse_args(argv)
    run_all(args, args.json)


if __name__ == '__main__':
    main()
