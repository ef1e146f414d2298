"""The options and the work of host inspection, for both front ends.

One definition shared by the console script ``nvlink-host-inspect``
(:mod:`nvlink_placement.cmd.host_inspect`) and the OpenStackClient commands
``openstack nvlink host inspect|partitions``
(:mod:`nvlink_placement.osc.host`). Imports nothing from OpenStack
libraries: it runs on a compute node where only PyYAML is installed.
"""

import argparse
import json
import socket

import yaml

from nvlink_placement.discovery import files
from nvlink_placement.discovery import inspect
from nvlink_placement.discovery import module_ids
from nvlink_placement.discovery import nvidia_smi
from nvlink_placement import errors
from nvlink_placement.fabric import access
from nvlink_placement.fabric import client
from nvlink_placement.topology import boards


def _seconds(text):
    try:
        return files.seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def add_fm_arguments(parser, no_fm):
    """Add ``--mapping`` and the Fabric Manager options to ``parser``.

    The one definition for ``host inspect`` and ``host partitions``.

    :param no_fm: also offer ``--no-fm`` (inspect works without FM).
    """
    parser.add_argument(
        '--mapping', metavar='FILE',
        help='GPU PCI address -> module id JSON file (default: %s when it '
             'exists)' % module_ids.DEFAULT_MAPPING_FILE)
    fm = parser.add_mutually_exclusive_group()
    fm.add_argument(
        '--fm-address', metavar='HOST[:PORT]',
        help='ask the Fabric Manager at this TCP address (default: %s:%d)'
             % (client.DEFAULT_ADDRESS,
                client.FM_CMD_PORT_NUMBER))
    fm.add_argument(
        '--fm-socket', metavar='PATH',
        help='ask the Fabric Manager listening on this Unix socket')
    fm.add_argument(
        '--fmpm-json', metavar='FILE',
        help='read the partitions from saved `fmpm -l` output instead of '
             'asking Fabric Manager')
    if no_fm:
        fm.add_argument(
            '--no-fm', action='store_true',
            help='never ask Fabric Manager (by default it is asked at '
                 '127.0.0.1:6666 when libnvfm can be loaded)')
    parser.add_argument(
        '--fm-library', metavar='PATH',
        help='libnvfm to load (default: libnvfm.so.1, then libnvfm.so)')
    timeout = client.DEFAULT_TIMEOUT_MS / 1000.0
    parser.add_argument(
        '--fm-timeout', metavar='SECONDS', type=_seconds, default=timeout,
        help='Fabric Manager connection timeout (default: %g)' % timeout)
    parser.add_argument(
        '--fm-deadline', metavar='SECONDS', type=_seconds,
        default=access.DEFAULT_DEADLINE,
        help='give up on Fabric Manager after this long, whatever it does '
             '(libnvfm runs in a child process that is stopped then; '
             'default: %g)' % access.DEFAULT_DEADLINE)
    return parser


def add_arguments(parser):
    """Add the host-inspect options to an argparse ``parser``; return it.

    The one definition of the options, shared by the console script and
    the OpenStackClient command.
    """
    parser.add_argument(
        '--hostname', metavar='NAME',
        help="the host's name in the fragment: Nova's hypervisor_hostname "
             "(default: this host's FQDN)")
    parser.add_argument(
        '--sysfs-root', metavar='DIR', default='/sys',
        help='where sysfs is mounted (default: /sys)')
    parser.add_argument(
        '--nvidia-smi-q', metavar='FILE',
        help='captured `nvidia-smi -q` output to read instead of running '
             'nvidia-smi')
    parser.add_argument(
        '--topo-matrix', metavar='FILE',
        help='captured `nvidia-smi topo -m` output to read instead of '
             'running nvidia-smi (needs --nvidia-smi-q)')
    parser.add_argument(
        '--no-nvidia-smi', action='store_true',
        help='do not run nvidia-smi (by default it is run, %g s timeout '
             'per call, when it is on PATH and no capture is given)'
             % nvidia_smi.DEFAULT_TIMEOUT)
    add_fm_arguments(parser, no_fm=True)
    parser.add_argument(
        '--board', metavar='NAME',
        help='the baseboard, from the built-in catalog: %s'
             % ', '.join(boards.names()))
    parser.add_argument(
        '-o', '--output', metavar='FILE',
        help='write the fragment to FILE instead of standard output')
    parser.add_argument(
        '-f', '--format', choices=('yaml', 'json'), default='yaml',
        help='output format (default: yaml)')
    return parser


def fragment_from_args(args):
    """Gather and build the fragment for parsed ``args``.

    :returns: the fragment dict (see
        :func:`nvlink_placement.discovery.inspect.build_fragment`).
    :raises NvlinkError: for any problem an operator can fix.
    """
    return inspect.build_fragment(inspect.gather(
        hostname=args.hostname or socket.getfqdn(),
        sysfs_root=args.sysfs_root,
        mapping=args.mapping,
        nvidia_smi_q=args.nvidia_smi_q,
        topo_matrix_file=args.topo_matrix,
        use_nvidia_smi=not args.no_nvidia_smi,
        fm_address=args.fm_address,
        fm_socket=args.fm_socket,
        fm_library=args.fm_library,
        fm_timeout=args.fm_timeout,
        fmpm_json=args.fmpm_json,
        use_fm=not args.no_fm,
        board=args.board,
        fm_deadline=args.fm_deadline))


def render(fragment, output_format):
    """Serialize a fragment as ``'yaml'`` or ``'json'`` text."""
    if output_format == 'json':
        return json.dumps(fragment, indent=2) + '\n'
    return yaml.safe_dump(fragment, sort_keys=False,
                          default_flow_style=False)


def execute(args, stdout, stderr):
    """Build the fragment and write it to ``args.output`` or ``stdout``.

    Written to a file, the fragment's notes and the GPUs that are not
    healthy are also printed to ``stderr`` (one line each): nobody reads
    the file before it is merged.

    :raises NvlinkError: for any problem an operator can fix.
    """
    fragment = fragment_from_args(args)
    text = render(fragment, args.format)
    if not args.output:
        stdout.write(text)
        return
    try:
        with open(args.output, 'w', encoding='utf-8') as handle:
            handle.write(text)
    except OSError as exc:
        raise errors.NvlinkError('cannot write %s: %s'
                                 % (args.output, exc.strerror or exc))
    for name, host in fragment['hosts'].items():
        for address, gpu in host['gpus'].items():
            health = gpu.get('health') or {}
            if health.get('status', 'ok') != 'ok':
                stderr.write('%s: %s: GPU %s %s: %s\n' % (
                    args.output, name, address, health['status'],
                    '; '.join(health.get('reasons', ()))))
        for note in host.get('notes', ()):
            stderr.write('%s: %s: note: %s\n' % (args.output, name, note))
