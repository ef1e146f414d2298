#!/usr/bin/env python3
"""Measure reading topology files with the safe reader, and refusing bombs.

Writes an N-host topology as host inspection would (8 GPUs per host with
inspection details) in YAML and in JSON, and times, in CPU seconds (best
of three), ``documents.load`` (reading and parsing with the checks of
:mod:`nvlink_placement.documents`) and ``loader.load`` (the same, plus the
schema and the semantic checks). Then times refusing a YAML alias bomb and
a document nested 10 000 levels deep, which take gigabytes or a
``RecursionError`` without the checks.

This is a script, not a test: it prints an RST table for
``doc/source/performance.rst`` and never asserts times.

Usage: ``python benchmarks/read_inputs.py --hosts 100,1000``
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import rst  # noqa: E402

from nvlink_placement import documents  # noqa: E402
from nvlink_placement import errors  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402

BOMB = ('version: 1\na: &a ["lol","lol","lol","lol","lol","lol","lol",'
        '"lol","lol"]\n' + ''.join(
            '%s: &%s [%s]\n' % (b, b, ','.join(['*' + a] * 9))
            for a, b in zip('abcdefgh', 'bcdefghi')) + 'hosts: *i\n')


def inspected(n):
    """N hosts of 8 GPUs with the details host inspection records."""
    return {'version': 1, 'hosts': {
        'compute-%04d' % h: {'board': 'hgx-h100-8gpu', 'gpus': {
            '0000:%02x:00.0' % (0x18 + 0x10 * i): {
                'module_id': i + 1, 'vendor_id': '10de',
                'device_id': '2330', 'numa_node': i // 4,
                'health': {'status': 'ok'}} for i in range(8)}}
        for h in range(n)}}


def cpu(func, path):
    """Best CPU seconds of three calls, and the error of the last one."""
    best, problem = None, None
    for _ in range(3):
        start = time.process_time()
        try:
            func(path)
        except errors.NvlinkError as exc:
            problem = exc
        spent = time.process_time() - start
        best = spent if best is None else min(best, spent)
    return best, problem


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', default='100,1000',
                        help='Host counts, comma-separated.')
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp()
    rows = []
    for n in [int(x) for x in args.hosts.split(',')]:
        document = inspected(n)
        for kind, text in (('YAML', yaml.safe_dump(document)),
                           ('JSON', json.dumps(document))):
            path = os.path.join(directory, 'topology.' + kind.lower())
            with open(path, 'w') as handle:
                handle.write(text)
            read, _ = cpu(documents.load, path)
            load, _ = cpu(loader.load, path)
            rows.append(('%d hosts, %s' % (n, kind),
                         '%d' % len(text), '%.2f' % read,
                         '%.2f' % load))
    for name, text in (('alias bomb (9**9 nodes)', BOMB),
                       ('10 000 levels deep', 'x: ' + '[' * 10000 +
                        ']' * 10000 + '\n')):
        path = os.path.join(directory, 'hostile.yaml')
        with open(path, 'w') as handle:
            handle.write(text)
        read, problem = cpu(documents.load, path)
        rows.append((name + ': refused', '%d' % len(text),
                     '%.3f' % read, ''))
        assert problem is not None, name
    print('Machine: %s, Python %s, PyYAML %s (pure Python loader)\n'
          % (platform.machine(), platform.python_version(),
             yaml.__version__))
    for line in rst.table(HEADER, rows):
        print(line)


HEADER = ('file', 'bytes', 'read s', 'load s')

if __name__ == '__main__':
    main()
