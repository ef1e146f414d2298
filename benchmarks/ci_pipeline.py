#!/usr/bin/env python3
"""Time the operator guide's CI flow ("Dry-run in CI") on a generated cloud.

Each step is a separate ``openstack nvlink`` process, as a CI job runs
them, on the topology and production snapshot of
:func:`tests.cloud_corpus.generate` (every host an HGX H100 board, about a
third of the GPUs in use by 1-, 2-, 4- and 8-GPU instances, some split
across NVLink domains, a few hosts reshaped already, interrupted or with
each kind of drift; the GPU providers carry the member traits Nova writes
from ``nova-config``'s ``[pci] device_spec``):

1. ``topology validate --strict``
2. ``check`` on the production snapshot (loads it; exit 2: it drifted)
3. ``snapshot --as-configured`` (the production snapshot as Nova reports
   it once ``nova-config``'s entries run: the planned state)
4. ``reshape --dry-run`` on the planned state (the plan)
5. ``reshape --save-snapshot`` (apply offline, save the result)
6. ``flavor generate -f json`` (the 1-, 2-, 4- and 8-GPU flavors)
7. ``flavor verify`` of every flavor on every host of the saved result
8. ``check`` on the saved result: only drift that no command repairs
   (split instances, unknown GPUs) is left
9. ``nova-config --ini`` (the Nova config per host)

For each step: wall and CPU seconds (the process's own, from
``wait4``), its peak resident memory, its exit status and what it found;
then the total. It fails (exit 1) when a step exits otherwise than
expected, never on time. This is a script, not a test.

Usage: ``python benchmarks/ci_pipeline.py --hosts 1000 [--keep DIR]``
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import yaml  # noqa: E402

import rst  # noqa: E402

from nvlink_placement.placement import snapshot  # noqa: E402
from tests import cloud_corpus  # noqa: E402

ALIAS = 'h100'


def openstack(args, stdout=None):
    """Run one ``openstack`` process; its wall, CPU, peak RSS and status.

    :returns: dict ``wall``, ``cpu`` (s), ``rss`` (MiB), ``code``,
        ``stdout``, ``stderr``.
    """
    exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
    out = tempfile.TemporaryFile(mode='w+')
    err = tempfile.TemporaryFile(mode='w+')
    start = time.perf_counter()
    process = subprocess.Popen([exe] + list(args), stdout=stdout or out,
                               stderr=err)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    return {'wall': wall, 'cpu': usage.ru_utime + usage.ru_stime,
            'rss': usage.ru_maxrss / 1024.0, 'code': process.returncode,
            'stdout': out.read(), 'stderr': err.read()}


def steps(tmp):
    """``(name, argv, expected exit codes, stdout file or None)``."""
    topology = os.path.join(tmp, 'topology.yaml')
    prod = os.path.join(tmp, 'prod.json')
    planned = os.path.join(tmp, 'planned.json')
    reshaped = os.path.join(tmp, 'reshaped.json')
    flavors = os.path.join(tmp, 'flavors.json')
    return [
        ('topology validate --strict',
         ['nvlink', 'topology', 'validate', '--strict', topology, '-f',
          'json'], (0,), None),
        ('check (production snapshot)',
         ['nvlink', 'check', '--topology', topology, '--snapshot', prod,
          '-f', 'json'], (2,), None),
        ('snapshot --as-configured',
         ['nvlink', 'snapshot', '--snapshot', prod, '--as-configured',
          topology, '-o', planned], (0,), None),
        ('reshape --dry-run',
         ['nvlink', 'reshape', '--topology', topology, '--snapshot', planned,
          '--dry-run', '-f', 'json'], (0,), None),
        ('reshape --save-snapshot',
         ['nvlink', 'reshape', '--topology', topology, '--snapshot', planned,
          '--save-snapshot', reshaped, '-f', 'json'], (0,), None),
        ('flavor generate',
         ['nvlink', 'flavor', 'generate', '--topology', topology, '--alias',
          ALIAS, '-f', 'json'], (0,), flavors),
        ('flavor verify',
         ['nvlink', 'flavor', 'verify', '--flavors', flavors, '--topology',
          topology, '--snapshot', reshaped, '--resource-class',
          cloud_corpus.RC, '-f', 'json'], (0, 1), None),
        ('check (saved result)',
         ['nvlink', 'check', '--topology', topology, '--snapshot', reshaped,
          '-f', 'json'], (0, 2), None),
        ('nova-config --ini',
         ['nvlink', 'nova-config', '--topology', topology, '--alias', ALIAS,
          '--vendor-id', '10de', '--product-id', '2330', '--ini'],
         (0,), None),
    ]


def found(name, result, stdout_path):
    """What a step's output says, in a few words (and sanity checks)."""
    text = result['stdout']
    if stdout_path:
        with open(stdout_path) as f:
            text = f.read()
    if name.startswith('snapshot'):
        return result['stderr'].strip().splitlines()[-1][:80]
    if name.startswith('nova-config'):
        return '%d lines' % len(text.splitlines())
    rows = json.loads(text) if text.strip() else []
    if name.startswith('reshape'):
        return '%d writes' % len(rows)
    if name.startswith('check'):
        kinds = {}
        for row in rows:
            kinds[row['drift']] = kinds.get(row['drift'], 0) + 1
        if name.endswith('(saved result)'):
            left = [r for r in rows if r['action']]
            if left:
                raise RuntimeError('the saved result still needs writes: %s'
                                   % left[:3])
        return ', '.join('%s %d' % kv for kv in sorted(kinds.items()))
    if name == 'flavor generate':
        return '%d flavors' % len(rows)
    if name == 'flavor verify':
        bad = sum(1 for r in rows if r['invalid_sets'] or r['missing_sets'])
        return '%d rows, %d hosts with a problem; %d candidates' % (
            len(rows), bad, sum(r['candidates'] for r in rows))
    return '%d rows' % len(rows)


def verdicts(result):
    """The verify rows as a comparable list (``--compare``)."""
    return sorted((r['flavor'], r['host'], r['candidates'], r['valid_sets'],
                   r['invalid_sets'], r['missing_sets'])
                  for r in json.loads(result['stdout']))


def measure(n, seed, tmp):
    start = time.perf_counter()
    cpu = time.process_time()
    # No sharing providers: flavor verify judges a candidate that takes
    # disk from one as spanning two hosts.
    topology, document, info = cloud_corpus.generate(n, seed,
                                                     sharing_every=None)
    with open(os.path.join(tmp, 'topology.yaml'), 'w') as f:
        yaml.safe_dump(topology, f)
    snapshot.write_file(document, os.path.join(tmp, 'prod.json'))
    setup = (time.perf_counter() - start, time.process_time() - cpu)
    rows = []
    for name, argv, expected, stdout_path in steps(tmp):
        print('  %s ...' % name, file=sys.stderr, flush=True)
        if stdout_path:
            with open(stdout_path, 'w') as f:
                result = openstack(argv, stdout=f)
        else:
            result = openstack(argv)
        if result['code'] not in expected:
            raise RuntimeError('openstack %s exited %d: %s' % (
                ' '.join(argv), result['code'], result['stderr'][-3000:]))
        result['found'] = found(name, result, stdout_path)
        result['name'] = name
        rows.append(result)
    info['providers'] = len(document['resource_providers'])
    info['consumers'] = len(document['allocations'])
    return setup, rows, info


def report(n, setup, rows, info, file=sys.stdout):
    def out(*text):
        print(*text, file=file)
    variants = {}
    for kind in info['variants'].values():
        variants[kind] = variants.get(kind, 0) + 1
    out('%d hosts, %d providers, %d consumers; %d of %d GPUs in use '
        '(%d instances, %d split, %d GPUs reserved by Nova); hosts: %s'
        % (n, info['providers'], info['consumers'], info['gpus_used'],
           info['gpus'], info['instances'], info['split'],
           info['nova_reserved'], ', '.join(
               '%s %d' % kv for kv in sorted(variants.items()))))
    out('Machine: %s, %d CPUs, Python %s; load average before: %s' % (
        platform.platform(), os.cpu_count(), platform.python_version(),
        ' '.join('%.2f' % x for x in os.getloadavg())))
    out('(generating the cloud: %.1f s wall, %.1f s CPU; not a step)'
        % setup)
    header = ('step', 'wall s', 'CPU s', 'peak MiB', 'exit', 'found')
    cells = [(r['name'], '%.2f' % r['wall'], '%.2f' % r['cpu'],
              '%.0f' % r['rss'], str(r['code']), r['found']) for r in rows]
    cells.append(('total', '%.2f' % sum(r['wall'] for r in rows),
                  '%.2f' % sum(r['cpu'] for r in rows),
                  '%.0f' % max(r['rss'] for r in rows), '', ''))
    for line in rst.table(header, cells):
        out(line)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000,
                        help='Compute hosts of the generated cloud '
                             '(default %(default)s).')
    parser.add_argument('--seed', type=int, default=0,
                        help='Seed of the generated cloud.')
    parser.add_argument('--keep', metavar='DIR',
                        help='Keep the files (topology, snapshots, flavors, '
                             'the verify rows) in DIR.')
    parser.add_argument('--json', metavar='FILE',
                        help='Also write the measurements as JSON (verify '
                             'rows included, to compare runs).')
    args = parser.parse_args(argv)
    tmp = args.keep or tempfile.mkdtemp(prefix='ci-pipeline-')
    os.makedirs(tmp, exist_ok=True)
    try:
        setup, rows, info = measure(args.hosts, args.seed, tmp)
        report(args.hosts, setup, rows, info)
        if args.json:
            verify = next(r for r in rows if r['name'] == 'flavor verify')
            with open(args.json, 'w') as f:
                json.dump({'hosts': args.hosts, 'seed': args.seed,
                           'steps': [{k: r[k] for k in (
                               'name', 'wall', 'cpu', 'rss', 'code',
                               'found')} for r in rows],
                           'verdicts': verdicts(verify)}, f, indent=1)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
