#!/usr/bin/env python3
"""Measure the schema checks of topology files and snapshots.

Builds, in memory, the two largest documents a 1000-host cloud gives:

* the topology as host inspection writes it (8 GPUs per host with
  inspection details, as ``benchmarks/read_inputs.py`` writes it);
* the snapshot ``snapshot --from-topology`` writes for 1000 HGX H100
  hosts (9000 providers), with the 375 consumers of
  ``benchmarks/offline_scale.py``.

Then times, in CPU seconds (best of five): the schema step of the
project (``topology.loader`` for the topology, the snapshot's schema
problems for the snapshot, i.e. what every command that reads the file
pays before its semantic checks), jsonschema alone on the same schema
(what the step costs without the compiled check), and the whole read of
each file from disk (``loader.load``, ``snapshot.read_file``).

This is a script, not a test: it prints an RST table for
``doc/source/performance.rst`` and never asserts times.

Usage: ``python benchmarks/schema_checks.py [--hosts 1000]``
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import offline_scale  # noqa: E402
import read_inputs  # noqa: E402
import rst  # noqa: E402

from nvlink_placement.placement import nova_tree  # noqa: E402
from nvlink_placement.placement import snapshot  # noqa: E402
from nvlink_placement.topology import loader  # noqa: E402
from nvlink_placement.topology import schema  # noqa: E402
from nvlink_placement.topology import schema_check  # noqa: E402

RESOURCE_CLASS = 'CUSTOM_PCI_10DE_2330'
HEADER = ('document', 'project schema step s', 'jsonschema alone s',
          'whole read s')


def best(func, *args):
    """Best CPU seconds of five calls of ``func(*args)``."""
    spent = []
    for _ in range(5):
        start = time.process_time()
        func(*args)
        spent.append(time.process_time() - start)
    return min(spent)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000,
                        help='Hosts in both documents (default 1000).')
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp()

    topology = read_inputs.inspected(args.hosts)
    topology_path = os.path.join(directory, 'topology.json')
    with open(topology_path, 'w') as handle:
        json.dump(topology, handle)

    flat_path = os.path.join(directory, 'flat.yaml')
    offline_scale.write_topology(flat_path, args.hosts)
    document = nova_tree.from_topology(loader.load(flat_path), (),
                                       RESOURCE_CLASS)
    offline_scale.add_consumers(document)
    snapshot_path = os.path.join(directory, 'snapshot.json')
    snapshot.write_file(document, snapshot_path)
    document = snapshot.read_file(snapshot_path)

    assert not schema_check.problems(topology, schema.TOPOLOGY)
    assert not snapshot._schema_problems(document)
    topology_validator = jsonschema.Draft202012Validator(schema.TOPOLOGY)
    snapshot_validator = jsonschema.Draft202012Validator(snapshot.SCHEMA)
    rows = [
        ('topology, %d hosts (%d bytes of JSON)'
         % (args.hosts, os.path.getsize(topology_path)),
         '%.3f' % best(schema_check.problems, topology, schema.TOPOLOGY),
         '%.3f' % best(topology_validator.is_valid, topology),
         '%.3f' % best(loader.load, topology_path)),
        ('snapshot, %d providers, %d consumers'
         % (len(document['resource_providers']),
            len(document['allocations'])),
         '%.3f' % best(snapshot._schema_problems, document),
         '%.3f' % best(snapshot_validator.is_valid, document),
         '%.3f' % best(snapshot.read_file, snapshot_path)),
    ]
    print('Machine: %s, Python %s, jsonschema %s, load average %s\n' % (
        platform.machine(), platform.python_version(),
        jsonschema_version(), ' '.join('%.2f' % x for x in os.getloadavg())))
    for line in rst.table(HEADER, rows):
        print(line)


def jsonschema_version():
    from importlib import metadata
    return metadata.version('jsonschema')


if __name__ == '__main__':
    main()
