"""nvlink-host-inspect: print this host's topology fragment.

Discovers the NVIDIA GPUs (sysfs), their module ids (mapping file,
nvidia-smi -q), NVLink domains (Fabric Manager partitions, the board, or
nvidia-smi topo -m) and health, and prints a topology v1 document with
one host, ready to merge into the topology file.

Runs on a compute node where only PyYAML is installed. The same options
serve ``openstack nvlink host inspect``; they live in
:mod:`nvlink_placement.discovery.options`.
"""

import argparse
import sys

from nvlink_placement.discovery import options
from nvlink_placement import errors

PROG = 'nvlink-host-inspect'


class _Parser(argparse.ArgumentParser):
    """A usage error exits :data:`errors.USAGE_ERROR`, not argparse's 2."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(errors.USAGE_ERROR, '%s: error: %s\n' % (self.prog,
                                                           message))


def main(argv=None):
    """Console script entry point; returns the exit status.

    0 done, 1 error; a usage error exits :data:`errors.USAGE_ERROR` (3).
    """
    parser = _Parser(
        prog=PROG, description=__doc__.split('\n\n')[1])
    options.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        options.execute(args, sys.stdout, sys.stderr)
    except errors.NvlinkError as exc:
        print('%s: error: %s' % (PROG, exc), file=sys.stderr)
        return 1
    return 0
