#!/usr/bin/env python3
"""Time Nova's allocation candidates query for every flavor at cloud scale.

For N HGX H100 hosts (real board-1 BDF map) the script builds, in one run:

1. the topology in memory and the flat trees Nova reports for it
   (``snapshot --from-topology``, :mod:`nvlink_placement.placement.
   nova_tree`): each GPU provider carries its member traits, as Nova
   writes them from ``nova-config``'s ``[pci] device_spec``;
2. the reshaped trees: the planner and executor (``reshape``) applied to
   the flat snapshot on the embedded Placement, the result exported as
   ``reshape --save-snapshot`` does (the largest N once; smaller clouds
   are its first hosts);
3. a half-used copy of both: a third of the 2-GPU domains broken by
   1-GPU VMs, allocated as Nova does (VCPU, MEMORY_MB and DISK_GB on the
   compute node, one unit on a GPU).

Each state is bulk-loaded into a real Placement (gunicorn, one worker) on
SQLite, and with ``--mariadb`` also on a throw-away MariaDB (Unix socket,
PyMySQL driver). For each Placement setting (its defaults, and the
wide-tree settings ``nova-config`` prints) and each generated flavor of
``flavor generate --alias h100`` (1, 2, 4 and 8 GPUs), three layouts side
by side:

* ``member``: the flavors as generated (each named GPU group requires its
  member trait) on the reshaped tree;
* ``today``: the same flavors without the ``trait_h100-<i>:...MEMBER<i>``
  keys (what the generator wrote before member traits), same tree;
* ``flat``: the tree Nova reports, not reshaped, with upstream's unnamed
  groups (``pci_passthrough:alias = h100:N``).

The query is the exact one Nova 34 sends (``flavor verify``'s model,
:func:`nvlink_placement.flavors.request.build`: microversion 1.36, limit
1000), timed over HTTP with a client-side timeout; the median of
``--runs`` runs (a query slower than ``--once-above`` seconds is run once).
A query that times out is reported as ``> timeout`` and the server is
replaced by a fresh one (gunicorn would still be computing it). Each
answer is judged with ``flavor verify``'s check
(:func:`nvlink_placement.flavors.judge.check`): candidates, distinct GPU
sets, duplicates (candidates repeating a set already in the answer), sets
that are not one NVLink domain, and hosts reached against the hosts that
have a free domain of the flavor's size (at most ``limit``).

This is a script, not a test: it prints RST tables for
``doc/source/performance.rst`` and never asserts times.

Usage: ``python benchmarks/scheduling.py --hosts 100,1000 --mariadb``
(``tox -e bench-scheduling``)
"""

import argparse
import copy
import importlib.metadata
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from placement.db.sqlalchemy import migration
from placement.db.sqlalchemy import models
import psutil
import requests
import sqlalchemy as sa

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import reshape_scale  # noqa: E402
import rst  # noqa: E402

from nvlink_placement.flavors import generate  # noqa: E402
from nvlink_placement.flavors import inputs  # noqa: E402
from nvlink_placement.flavors import judge as judge_mod  # noqa: E402
from nvlink_placement.flavors import request as request_mod  # noqa: E402
from nvlink_placement.novaconfig import as_configured  # noqa: E402
from nvlink_placement.placement import embedded  # noqa: E402
from nvlink_placement.placement import nova_tree  # noqa: E402
from nvlink_placement.placement import snapshot  # noqa: E402
from nvlink_placement.placement import snapshot_db  # noqa: E402
from nvlink_placement.plan import desired  # noqa: E402
from nvlink_placement.plan import run  # noqa: E402
from tests import novalike  # noqa: E402
from tests import placement_server  # noqa: E402

ALIAS = 'h100'
RC = novalike.GPU_RC
LAYOUTS = ('member', 'today', 'flat')
SETTINGS = {'tuned': placement_server.TUNED, 'defaults': {}}
#: What a 1-GPU VM takes, as Nova allocates it (flavor generate's 1x).
VM = {'VCPU': generate.DEFAULT_VCPUS_PER_GPU,
      'MEMORY_MB': generate.DEFAULT_RAM_PER_GPU,
      'DISK_GB': generate.DEFAULT_DISK}
#: Pairs (by position on the board) taken by a 1-GPU VM, per host in each
#: run of six hosts: 8 of the 24 pairs, a third. Leaves free pairs on five
#: hosts, free quads on four, free boards on two.
BROKEN_PAIRS = ((0, 1, 2, 3), (0, 2), (1,), (3,), (), ())


# -- the cloud ---------------------------------------------------------------

def build_states(n_max, args):
    """Flat and reshaped snapshots of ``n_max`` hosts.

    :returns: ``(topology, flat, reshaped, seconds of the reshape)``; the
        reshape is skipped when ``--snapshots`` holds it (seconds then
        negative: those of the run that wrote it).
    """
    topology = reshape_scale.topology_for(n_max)
    flat = as_configured.from_topology(topology, resource_class=RC)
    cached = args.snapshots and os.path.join(
        args.snapshots, 'reshaped-%d.json' % n_max)
    if cached and os.path.exists(cached):
        with open(cached + '.seconds') as f:
            seconds = -float(f.read())      # negative: measured earlier
        return topology, flat, snapshot.read_file(cached), seconds
    hosts = [desired.from_topology(h) for h in topology.hosts.values()]
    start = time.perf_counter()
    with embedded.EmbeddedPlacement(flat) as client:
        result = run.run(client, hosts, workers=args.workers)
        if result.failures:
            raise RuntimeError('reshape failed: %s' % result.failures[:3])
        reshaped = client.placement.export()
    seconds = time.perf_counter() - start
    if cached:
        os.makedirs(args.snapshots, exist_ok=True)
        snapshot.write_file(reshaped, cached)
        with open(cached + '.seconds', 'w') as f:
            f.write('%.1f' % seconds)
    return topology, flat, reshaped, seconds


def subset(document, names):
    """The trees (and consumers) of the hosts ``names`` of ``document``."""
    roots = {p['uuid'] for p in document['resource_providers']
             if p['parent_provider_uuid'] is None and p['name'] in names}
    kept, parent = set(), {}
    for p in snapshot.parents_first(document['resource_providers']):
        parent[p['uuid']] = p['parent_provider_uuid']
        if p['uuid'] in roots or parent[p['uuid']] in kept:
            kept.add(p['uuid'])
    consumers = {c: entry for c, entry in document['allocations'].items()
                 if set(entry['allocations']) <= kept}
    return snapshot.document([p for p in document['resource_providers']
                              if p['uuid'] in kept], consumers)


def half_used(topology, names):
    """1-GPU VMs breaking a third of the pairs of ``names``.

    :returns: ``(allocations {consumer: entry}, busy {host: addresses})``.
    """
    consumers, busy = {}, {}
    for i, name in enumerate(names):
        host = topology.hosts[name]
        pairs = sorted(sorted(key, key=lambda a: host.gpus[a].module_id)
                       for key in host.fixed_domains(2))
        pairs.sort(key=lambda pair: host.gpus[pair[0]].module_id)
        busy[name] = set()
        cn = nova_tree.node_uuid(name)
        for k in BROKEN_PAIRS[i % len(BROKEN_PAIRS)]:
            address = pairs[k][0]
            busy[name].add(address)
            consumer = '%08x-0000-4000-8000-%012x' % (i, k)
            consumers[consumer] = snapshot.consumer_entry(
                'project-%d' % (i % 7), 'user-%d' % (i % 5),
                {cn: dict(VM), nova_tree.pci_uuid(cn, address): {RC: 1}},
                None, 'INSTANCE')
    return consumers, busy


def with_allocations(document, consumers):
    document = copy.deepcopy(document)
    document['allocations'] = dict(sorted(consumers.items()))
    snapshot.validate(document)
    return document


def free_domain_hosts(topology, names, busy, size):
    """Hosts of ``names`` with a free fixed NVLink domain of ``size``."""
    return {name for name in names
            if any(not key & busy.get(name, set())
                   for key in topology.hosts[name].fixed_domains(size))}


# -- the flavors -------------------------------------------------------------

def flavors_by_layout(topology):
    """dict layout -> list of validated flavors, by size."""
    hosts = list(topology.hosts.values())[:1]
    specs = generate.generate(hosts, ALIAS).flavors
    out = {layout: [] for layout in LAYOUTS}
    for spec in specs:
        member = spec.as_dict()
        today = copy.deepcopy(member)
        for key in generate.member_keys(ALIAS, spec.size,
                                        topology.trait_prefix):
            today['extra_specs'].pop(key, None)
        flat = copy.deepcopy(member)
        flat['extra_specs'] = {generate.ALIAS_KEY: '%s:%d' % (ALIAS,
                                                              spec.size)}
        for layout, flavor in zip(LAYOUTS, (member, today, flat)):
            out[layout].append(inputs.flavor_from_dict(flavor))
    return out


def requests_by_layout(flavors, limit):
    aliases = {ALIAS: request_mod.Alias(ALIAS, RC)}
    return {layout: [request_mod.build(f, aliases, limit) for f in items]
            for layout, items in flavors.items()}


# -- Placement ---------------------------------------------------------------

class MariaDB(object):
    """A throw-away MariaDB on a Unix socket (mysqld runs as ``mysql``)."""

    def start(self):
        self.dir = tempfile.mkdtemp(prefix='mariadb-')
        self.socket = os.path.join(self.dir, 'mysqld.sock')
        user = ['--user=mysql'] if os.geteuid() == 0 else []
        if user:
            shutil.chown(self.dir, 'mysql')
        subprocess.run(['mariadb-install-db', '--datadir=%s/data' % self.dir,
                        '--auth-root-authentication-method=normal',
                        '--skip-test-db'] + user,
                       check=True, capture_output=True)
        self.log = open(os.path.join(self.dir, 'mysqld.log'), 'w')
        self.process = subprocess.Popen(
            ['mariadbd', '--no-defaults', '--datadir=%s/data' % self.dir,
             '--socket=%s' % self.socket, '--skip-networking',
             '--pid-file=%s/mysqld.pid' % self.dir,
             '--innodb-buffer-pool-size=512M'] + user,
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not self._sql('SELECT 1', check=False):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('mariadbd did not start: %s'
                                   % open(self.log.name).read()[-2000:])
            time.sleep(0.3)
        self.version = self._sql('SELECT VERSION()').strip()
        return self

    def _sql(self, statement, check=True):
        out = subprocess.run(['mariadb', '--socket=%s' % self.socket,
                              '-uroot', '-N', '-e', statement],
                             capture_output=True, text=True)
        if check and out.returncode:
            raise RuntimeError('mariadb: %s' % out.stderr)
        return out.stdout if not out.returncode else None

    @property
    def url(self):
        return ('mysql+pymysql://root@localhost/placement?unix_socket=%s'
                '&charset=utf8mb4' % self.socket)

    def load(self, source_engine):
        """A fresh ``placement`` database holding ``source_engine``'s rows.

        Placement's own migrations create the schema (``placement-manage
        db sync``); then every row of Placement's tables is copied from the
        bulk-loaded SQLite database, ids included.
        """
        self._sql('DROP DATABASE IF EXISTS placement; CREATE DATABASE '
                  'placement CHARACTER SET utf8mb4')
        conf = os.path.join(self.dir, 'manage.conf')
        with open(conf, 'w') as f:
            f.write('[placement_database]\nconnection = %s\n' % self.url)
        subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                     'placement-manage'),
                        '--config-file', conf, 'db', 'sync'],
                       check=True, capture_output=True)
        target = sa.create_engine(self.url)
        try:
            with source_engine.connect() as src, target.begin() as dst:
                # Ids as written (VCPU is resource class 0).
                dst.execute(sa.text(
                    "SET SESSION sql_mode = CONCAT(@@sql_mode, "
                    "',NO_AUTO_VALUE_ON_ZERO'), FOREIGN_KEY_CHECKS = 0"))
                for table in models.BASE.metadata.sorted_tables:
                    rows = [dict(r._mapping) for r in
                            src.execute(sa.select(table))]
                    if rows:
                        dst.execute(table.insert(), rows)
                dst.execute(sa.text('SET FOREIGN_KEY_CHECKS = 1'))
        finally:
            target.dispose()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def sqlite_engine(document, directory):
    """A SQLite file holding ``document``, bulk-loaded (schema first)."""
    path = os.path.join(directory, 'source.db')
    if os.path.exists(path):
        os.unlink(path)
    engine = sa.create_engine('sqlite:///%s' % path)
    migration.create_schema(engine)
    snapshot_db.load(engine, document)
    return engine


class Backend(object):
    """Starts Placement on one database state, as often as needed."""

    def __init__(self, name, document, settings, args, mariadb=None):
        self.name = name
        self.document = document
        self.settings = settings
        self.args = args
        self.mariadb = mariadb
        self.server = None
        self.starts = 0

    def start(self):
        self.stop()
        self.starts += 1
        timeout = int(self.args.timeout) + 60
        if self.mariadb:
            self.server = placement_server.PlacementServer(
                connection=self.mariadb.url, settings=self.settings,
                worker_timeout=timeout).start()
        else:
            self.server = placement_server.PlacementServer(
                snapshot=self.document, settings=self.settings,
                worker_timeout=timeout).start()
        # Where the query's CPU goes: gunicorn's worker (and mariadbd).
        self.processes = psutil.Process(self.server.process.pid).children()
        if self.mariadb:
            self.processes.append(psutil.Process(self.mariadb.process.pid))
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers.update({
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement %s'
                                     % request_mod.MICROVERSION})
        return self

    def cpu(self):
        return sum(sum(p.cpu_times()[:2]) for p in self.processes)

    def get(self, url, timeout):
        """``(wall s, server CPU s, answer)`` of one GET."""
        cpu = self.cpu()
        start = time.perf_counter()
        response = self.session.get(self.server.url + url, timeout=timeout)
        seconds = time.perf_counter() - start
        cpu = self.cpu() - cpu
        if response.status_code != 200:
            raise RuntimeError('%s: HTTP %d %s' % (url[:80],
                                                   response.status_code,
                                                   response.text[:300]))
        return seconds, cpu, response.json()

    def stop(self):
        if self.server is not None:
            self.server.stop()
            self.server = None


def measure_query(backend, req, args):
    """``(median s, median server CPU s, runs, body)``.

    Seconds and body are None when the query timed out.
    """
    times, cpus, body = [], [], None
    for i in range(args.runs):
        try:
            seconds, cpu, body = backend.get(req.url, args.timeout)
        except requests.Timeout:
            backend.start()     # its worker is still computing
            return None, None, len(times) + 1, None
        times.append(seconds)
        cpus.append(cpu)
        if seconds > args.once_above:
            break
    return (statistics.median(times), statistics.median(cpus), len(times),
            body)


def judge(req, body, hosts, document, reachable):
    providers = {}
    by_uuid = {p['uuid']: p for p in document['resource_providers']}
    for p in document['resource_providers']:
        root = p
        while root['parent_provider_uuid']:
            root = by_uuid[root['parent_provider_uuid']]
        providers[p['uuid']] = (p['name'], root['uuid'])
    used = {rp for c in document['allocations'].values()
            for rp, a in c['allocations'].items() if RC in a['resources']}
    free = {p['uuid'] for p in document['resource_providers']
            if RC in p['inventories'] and p['uuid'] not in used}
    result = judge_mod.check(req, hosts, body, providers, free, None,
                             only=True)
    candidates = sum(h.candidates for h in result.hosts)
    valid = sum(len(h.valid) for h in result.hosts)
    invalid = sum(len(h.invalid) for h in result.hosts)
    reached = sum(1 for h in result.hosts if h.candidates)
    return {'candidates': candidates, 'sets': valid + invalid,
            'duplicates': candidates - valid - invalid,
            'not_domain': invalid, 'reached': reached,
            'reachable': min(len(reachable), req.limit),
            'domain_reached': sum(1 for h in result.hosts if h.valid)}


def measure_state(rows, base, topology, names, trees, busy, settings_names,
                  requests_, args, timed_out, mariadb=None):
    """Every layout and flavor on one cloud state, each setting.

    :param timed_out: dict ``(backend, settings, layout, size)`` -> where
        that query timed out; it is not sent again on a bigger or busier
        cloud (Placement's work only grows with free GPUs and hosts), and
        this run's time-outs are added.
    """
    hosts = [topology.hosts[n] for n in names]
    for settings_name in settings_names:
        for tree, layouts in (('reshaped', ('member', 'today')),
                              ('flat', ('flat',))):
            layouts = [x for x in layouts if x in args.layouts]
            if not layouts:
                continue
            document = trees[tree]
            if mariadb:
                directory = tempfile.mkdtemp(prefix='sched-')
                engine = sqlite_engine(document, directory)
                try:
                    load_s, _ = reshape_scale.timed(
                        lambda: mariadb.load(engine))
                finally:
                    engine.dispose()
                    shutil.rmtree(directory, ignore_errors=True)
                print('  %s %s: MariaDB loaded in %.1f s' % (
                    base['cloud'], tree, load_s), file=sys.stderr)
            backend = Backend(base['backend'], document,
                              SETTINGS[settings_name], args, mariadb)
            start_s, _ = reshape_scale.timed(backend.start)
            print('  %s %s %s: Placement up in %.1f s (load avg %.1f)'
                  % (base['cloud'], settings_name, tree, start_s,
                     os.getloadavg()[0]), file=sys.stderr)
            try:
                done = {}
                for layout in layouts:
                    for req in requests_[layout]:
                        row = dict(base, settings=settings_name,
                                   layout=layout, size=req.size)
                        known = (base['backend'], settings_name, layout,
                                 req.size)
                        if req.url in done:   # same query, same tree
                            row.update(done[req.url])
                        elif known in timed_out:
                            row.update(seconds=None, runs=0,
                                       skipped=timed_out[known])
                        else:
                            seconds, cpu, runs, body = measure_query(
                                backend, req, args)
                            row.update(seconds=seconds, cpu=cpu, runs=runs,
                                       load=os.getloadavg()[0])
                            if body is not None:
                                row.update(judge(req, body, hosts, document,
                                                 free_domain_hosts(
                                                     topology, names, busy,
                                                     req.size)))
                            else:
                                timed_out[known] = '%d hosts, %s cloud' % (
                                    base['hosts'], base['cloud'])
                            done[req.url] = dict(
                                {k: v for k, v in row.items()
                                 if k not in base and k not in (
                                     'settings', 'layout', 'size')},
                                same_as=layout)
                        rows.append(row)
                        print('    ' + progress(row), file=sys.stderr)
                        if args.json:
                            with open(args.json, 'w') as f:
                                json.dump(rows, f, indent=1)
            finally:
                backend.stop()


def progress(row):
    if row['seconds'] is not None:
        seconds = '%.2fs (CPU %.2fs)' % (row['seconds'], row['cpu'])
    else:
        seconds = 'not run' if row.get('skipped') else '> %gs' % row['timeout']
    return '%s %dx: %s%s' % (row['layout'], row['size'], seconds, (
        ' %(candidates)d cand, %(sets)d sets, %(duplicates)d dup, '
        '%(not_domain)d not 1 domain, %(reached)d hosts, %(domain_reached)d'
        '/%(reachable)d with a domain' % row) if 'candidates' in row
        else (' (timed out at %s)' % row['skipped']
              if row.get('skipped') else ''))


# -- the report --------------------------------------------------------------

def machine(mariadb_version=None):
    model, mem = '?', 0
    try:
        with open('/proc/cpuinfo') as f:
            model = next(line.split(':', 1)[1].strip() for line in f
                         if line.startswith('model name'))
        with open('/proc/meminfo') as f:
            mem = int(next(line.split()[1] for line in f
                           if line.startswith('MemTotal'))) / 1024 / 1024
    except (OSError, StopIteration):
        pass
    text = ('%d CPUs (nproc), %s, %.1f GiB RAM, %s, Python %s, '
            'openstack-placement %s, SQLite %s' % (
                os.cpu_count(), model, mem, platform.platform(),
                platform.python_version(),
                importlib.metadata.version('openstack-placement'),
                sqlite3.sqlite_version))
    if mariadb_version:
        text += ', MariaDB %s (PyMySQL %s)' % (
            mariadb_version, importlib.metadata.version('PyMySQL'))
    return text


def report(rows, out=sys.stdout):
    """One RST table per backend, cloud size, cloud state and setting."""
    groups = []
    for row in rows:
        key = (row['backend'], row['hosts'], row['cloud'], row['settings'])
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        groups[-1][1].append(row)
    header = ('layout', 'GPUs', 'median s', 'x 1-GPU', 'CPU s', 'x 1-GPU',
              'candidates', 'sets', 'dup', 'not 1 domain', 'hosts',
              'with a domain')
    for (backend, hosts, cloud, settings), items in groups:
        print('%s, %d hosts, %s cloud, Placement %s:' % (
            backend, hosts, cloud, 'tuned (nova-config)' if settings ==
            'tuned' else 'defaults'), file=out)
        print(file=out)
        ones = {r['layout']: r for r in items if r['size'] == 1}
        lines = [line(r, ones.get(r['layout'])) for r in items]
        for text in rst.table(header, lines):
            print(text, file=out)
        print(file=out)
    print('median s: wall time of Nova\'s query, median of 3 runs unless '
          'marked; CPU s: the CPU Placement spent on it (gunicorn\'s worker, '
          'and mariadbd on MariaDB), median; x 1-GPU: against the 1-GPU '
          'flavor of the same layout, cloud and settings; "> T": no answer '
          'within the client timeout T; "not run": timed out on a smaller or '
          'less used cloud. sets: distinct GPU sets; dup: candidates '
          'repeating a set; not 1 domain: sets that are not one NVLink '
          'domain; hosts: '
          'hosts with a candidate; with a domain: hosts offered a domain / '
          'hosts with a free domain of that size (at most the limit).',
          file=out)


def line(row, one):
    """The table cells of one measurement; ``one``: its 1-GPU row."""
    seconds = row['seconds']
    one = one if one and one['seconds'] else None
    if seconds is None:
        if row.get('skipped'):
            return (row['layout'], str(row['size']), 'not run') + ('-',) * 9
        return ((row['layout'], str(row['size']), '> %g' % row['timeout'],
                 '> %.0f' % (row['timeout'] / one['seconds']) if one
                 else '-') + ('-',) * 8)
    text = '%.2f' % seconds
    if row['runs'] < 3:
        text += ' (%d run%s)' % (row['runs'], 's' if row['runs'] > 1 else '')
    if row.get('same_as') and row['same_as'] != row['layout']:
        text += ' (= %s)' % row['same_as']

    def ratio(key):
        if not one or row['size'] == 1 or not one[key]:
            return '-'
        return '%.2f' % (row[key] / one[key])
    return (row['layout'], str(row['size']), text, ratio('seconds'),
            '%.2f' % row['cpu'], ratio('cpu'),
            str(row['candidates']), str(row['sets']), str(row['duplicates']),
            str(row['not_domain']), str(row['reached']),
            '%d / %d' % (row['domain_reached'], row['reachable']))


def reshape_text(seconds, args):
    if seconds < 0:
        return '%.1f s, in the run that saved it to %s' % (
            -seconds, args.snapshots)
    return '%.1f s' % seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', default='100,1000',
                        help='Comma-separated host counts (default '
                             '%(default)s).')
    parser.add_argument('--settings', default='tuned,defaults',
                        help='Placement settings to measure: tuned '
                             '(nova-config\'s), defaults (default '
                             '%(default)s).')
    parser.add_argument('--half-used', default='tuned,defaults',
                        help='Settings for the half-used cloud (default '
                             '%(default)s; "" skips it).')
    parser.add_argument('--half-used-hosts', default='1000',
                        help='Host counts of the half-used cloud, among '
                             '--hosts (default %(default)s).')
    parser.add_argument('--mariadb', action='store_true',
                        help='Also on a throw-away MariaDB (needs '
                             'mariadb-server and PyMySQL).')
    parser.add_argument('--mariadb-hosts', default='1000',
                        help='Host counts measured on MariaDB (default '
                             '%(default)s).')
    parser.add_argument('--mariadb-settings', default='tuned',
                        help='Settings measured on MariaDB (default '
                             '%(default)s).')
    parser.add_argument('--runs', type=int, default=3,
                        help='Runs per query, median reported (default '
                             '%(default)s).')
    parser.add_argument('--once-above', type=float, default=10.0,
                        help='Run a query once when its first run takes '
                             'longer, in seconds (default %(default)s).')
    parser.add_argument('--timeout', type=float, default=120.0,
                        help='Client-side timeout per query, seconds '
                             '(default %(default)s).')
    parser.add_argument('--limit', type=int,
                        default=request_mod.DEFAULT_LIMIT,
                        help='Nova\'s [scheduler] max_placement_results '
                             '(default %(default)s).')
    parser.add_argument('--workers', type=int, default=8,
                        help='Reshape workers (default %(default)s).')
    parser.add_argument('--snapshots', metavar='DIR',
                        help='Keep the reshaped snapshot in DIR and reuse '
                             'it when there (skips the reshape).')
    parser.add_argument('--layouts', default=','.join(LAYOUTS),
                        help='Layouts to measure (default %(default)s).')
    parser.add_argument('--json', metavar='FILE',
                        help='Also write the raw results as JSON.')
    args = parser.parse_args(argv)
    args.layouts = [x for x in args.layouts.split(',') if x]
    if set(args.layouts) - set(LAYOUTS) or not args.layouts:
        parser.error('--layouts: choose among %s' % ', '.join(LAYOUTS))
    counts = sorted(int(h) for h in args.hosts.split(','))
    lists = {k: [s for s in getattr(args, k).split(',') if s]
             for k in ('settings', 'half_used', 'mariadb_settings')}
    for name, values in lists.items():
        unknown = set(values) - set(SETTINGS)
        if unknown:
            parser.error('--%s: unknown %s (choose tuned, defaults)' % (
                name.replace('_', '-'), ', '.join(sorted(unknown))))
    mariadb_counts = ([int(h) for h in args.mariadb_hosts.split(',')]
                      if args.mariadb else [])
    half_counts = {int(h) for h in args.half_used_hosts.split(',') if h}
    started = time.perf_counter()
    n_max = max(counts + mariadb_counts)
    topology, flat, reshaped, reshape_s = build_states(n_max, args)
    print('reshape of %d hosts: %s' % (n_max, reshape_text(reshape_s, args)),
          file=sys.stderr)
    requests_ = requests_by_layout(flavors_by_layout(topology), args.limit)
    all_names = list(topology.hosts)
    mariadb = MariaDB().start() if args.mariadb else None
    rows, timed_out = [], {}
    try:
        plan = [('SQLite', n, None) for n in counts]
        plan += [('MariaDB', n, mariadb) for n in mariadb_counts]
        for backend, n, db in plan:
            names = all_names[:n]
            trees = {'flat': subset(flat, set(names)),
                     'reshaped': subset(reshaped, set(names))}
            consumers, busy = half_used(topology, names)
            clouds = [('free', trees, {}, lists['mariadb_settings']
                       if db else lists['settings'])]
            if not db and lists['half_used'] and n in half_counts:
                clouds.append(('half-used', {
                    k: with_allocations(v, consumers)
                    for k, v in trees.items()}, busy, lists['half_used']))
            for cloud, docs, used, settings_names in clouds:
                print('%s, %d hosts, %s cloud ...' % (backend, n, cloud),
                      file=sys.stderr)
                base = {'backend': backend, 'hosts': n, 'cloud': cloud,
                        'timeout': args.timeout}
                measure_state(rows, base, topology, names, docs, used,
                              settings_names, requests_, args, timed_out,
                              db)
    finally:
        version = mariadb and mariadb.version
        if mariadb:
            mariadb.stop()
    print('Machine: %s; load average at the end %.1f; whole run %.0f s' % (
        machine(version), os.getloadavg()[0],
        time.perf_counter() - started))
    print('Reshape of %d hosts on the embedded Placement (%d workers): %s'
          % (n_max, args.workers, reshape_text(reshape_s, args)))
    print()
    report(rows)


if __name__ == '__main__':
    main()
