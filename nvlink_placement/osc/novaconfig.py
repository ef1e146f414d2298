"""``openstack nvlink nova-config``: the Nova settings for the tree.

The command only: what it prints and writes is
:mod:`nvlink_placement.novaconfig` (settings, deployment layouts).
"""

import argparse
import collections
import os

from nvlink_placement import documents
from nvlink_placement import filetree
from nvlink_placement.flavors import generate
from nvlink_placement.novaconfig import keep
from nvlink_placement.novaconfig import layouts
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.osc import flavor as flavor_cmd
from nvlink_placement.osc import snapshot as snapshot_cmd
from nvlink_placement import textfile
from nvlink_placement.topology import passthrough
from nvlink_placement.topology import pci

#: The rows of ``nova-config --output-dir``.
FILE_COLUMNS = ('file', 'layout', 'host', 'service', 'status')
STALE = 'stale'
STALE_NOTE = (' (a host the topology does not have; left as it is: remove '
              'it and its host\'s entries by hand)')


def pci_id(text):
    """argparse type: a PCI vendor or device id as Nova and sysfs write it.

    Four hex digits, lower case (``0x10DE`` -> ``10de``); Nova names the
    resource class from them (``CUSTOM_PCI_10DE_2330``), so anything else
    would give config that matches no device.
    """
    try:
        return pci.normalize_id(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            '%r is not a PCI id (4 hex digits, e.g. 10de)' % text)


class NovaConfig(commands.OwnOutput, commands.Lister):
    """Print the Nova and Placement settings to pair with the NVLink tree.

    [pci] device_spec and alias for the topology's GPUs (with the mosk dialect
    one device_spec entry per GPU first, per host, carrying the member traits
    the multi-GPU flavors require, and [filter_scheduler]
    allow_pci_traits_in_flavor), report_in_placement, [filter_scheduler]
    pci_in_placement and PciPassthroughFilter; with --dialect upstream the
    Placement wide-tree settings when a host has 8 or more GPUs of one class
    and a flavor asks for more than 4; when the topology has more than 1000
    GPUs (more 1-GPU candidates than Nova asks for), Placement's
    max_allocation_candidates and breadth-first generation, so that Nova's 1000
    candidates come from every host; and, with NUMA data from host inspection,
    per-size hw:numa_nodes / hw:pci_numa_affinity_policy advice naming the
    domains that span NUMA nodes. A host whose topology excludes a GPU (vGPU,
    MIG) gets no generic device_spec entry, only its usable GPUs by address. A
    fleet of several GPU models (told apart by host inspection's vendor/device
    ids) takes one --alias per model and gets an alias line and a generic
    device_spec entry per model, each host's per-GPU entries with its own GPUs'
    ids (a host with two models gets both) and NUMA advice per model. A GPU
    Nova cannot pass through (PCI domain above 0xffff) is refused unless
    excluded. The table shortens host lists to 10 names; -f json|yaml|csv|value
    and --ini name every host. --ini prints ready-to-paste config fragments;
    --output-dir DIR --layout kolla|openstack-ansible|config-dir writes the
    files of a deployment tool, each host's complete device_spec list in the
    order Nova needs after that tool's merge. The settings are upstream Nova
    34's; the mosk-dialect flavors also need Nova's named PCI alias groups
    (MOSK, or upstream Nova 29.4.0, 31.3.1, 33.0.2 or 34.0.0 with this
    project's nova-patches/ series, whose [filter_scheduler]
    allow_pci_traits_in_flavor lets flavors add traits to those groups).
    """

    auth_required = False
    own_output = {'ini': 'config fragments'}

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        flavor_cmd.add_topology_arguments(parser)
        flavor_cmd.add_alias_argument(parser)
        flavor_cmd.add_sizes_argument(parser)
        parser.add_argument('--vendor-id', metavar='HEX', type=pci_id,
                            help='PCI vendor id when the topology has none '
                                 '(4 hex digits, e.g. 10de).')
        parser.add_argument('--product-id', metavar='HEX', type=pci_id,
                            help='PCI product id when the topology has none '
                                 '(4 hex digits, e.g. 2330).')
        parser.add_argument('--resource-class', metavar='RC',
                            type=snapshot_cmd.resource_class_option,
                            help='A resource_class tag for device_spec and '
                                 'alias (default: CUSTOM_PCI_<VENDOR>_'
                                 '<PRODUCT>).')
        parser.add_argument('--dialect', choices=generate.DIALECTS,
                            default=generate.MOSK,
                            help='The flavor dialect the settings serve: '
                                 'mosk (default; per-GPU device_spec entries '
                                 'with member traits) or upstream.')
        parser.add_argument('--ini', action='store_true',
                            help='Print config fragments instead of rows (not '
                                 'with -f or -c).')
        parser.add_argument('--long', action='store_true',
                            help='Add the reason column to the table: why '
                                 'each setting (or -c reason; other formats '
                                 'always have it).')
        parser.add_argument('--output-dir', metavar='DIR',
                            help='Write the files a deployment tool reads '
                                 'under DIR (created if its parent exists) '
                                 'instead of printing rows; needs --layout. '
                                 'Each compute host gets its complete [pci] '
                                 'device_spec list in the order Nova needs '
                                 'for that tool\'s merge. Files whose text '
                                 'is unchanged are not rewritten; each file '
                                 'is named on standard error as written or '
                                 'unchanged, and -f json|yaml|csv|value '
                                 'lists them on standard output (file, '
                                 'layout, host, service, status).')
        parser.add_argument('--layout', choices=layouts.LAYOUTS,
                            help='With --output-dir: kolla (DIR/nova/<host>/'
                                 'nova.conf and DIR/nova/<service>.conf for '
                                 '/etc/kolla/config), openstack-ansible '
                                 '(DIR/host_vars/<host>.yml with '
                                 'nova_device_spec and DIR/group_vars/'
                                 'nova_all.yml for /etc/openstack_deploy) '
                                 'or config-dir '
                                 '(DIR/hosts/<host>/nova-compute.conf.d/'
                                 '%s for /etc/nova/nova-compute.conf.d/, and '
                                 'DIR/services/<service>.conf.d/). The '
                                 'operator\'s settings found in DIR are '
                                 'kept; a file there that this command did '
                                 'not write (no mark on its first line), or '
                                 'a setting that would win over its files, '
                                 'is refused by name, nothing written.'
                                 % layouts.FRAGMENT)
        return parser

    def run(self, parsed_args):
        self.list_files = (parsed_args.formatter is not None or
                           bool(parsed_args.columns))
        if parsed_args.output_dir and parsed_args.ini:
            self._usage_parser.error('--ini prints config fragments; '
                                     '--output-dir writes files: give one')
        if bool(parsed_args.output_dir) != bool(parsed_args.layout):
            self._usage_parser.error('--output-dir DIR and --layout LAYOUT '
                                     'go together: give both or neither')
        return super().run(parsed_args)

    def take_action(self, parsed_args):
        topology, hosts = flavor_cmd.selected_hosts(self.app, parsed_args)
        passthrough.check(hosts, topology.source)
        table = parsed_args.formatter == 'table' and not (
            parsed_args.ini or parsed_args.output_dir)
        everywhere = list(topology.hosts.values())
        flavor_cmd.warn_derived(novaconfig.alias_classes(
            hosts, parsed_args.alias, parsed_args.vendor_id,
            parsed_args.product_id, parsed_args.resource_class, everywhere))
        self.settings = novaconfig.settings(
            hosts, parsed_args.alias, sizes=parsed_args.sizes,
            vendor_id=parsed_args.vendor_id,
            product_id=parsed_args.product_id,
            resource_class=parsed_args.resource_class,
            dialect=parsed_args.dialect, trait_prefix=topology.trait_prefix,
            shown=novaconfig.SHOWN if table else None, scope=everywhere)
        if parsed_args.output_dir:
            return self._write(parsed_args, [h.name for h in hosts])
        return display.long_columns(
            parsed_args, 'reason', novaconfig.COLUMNS,
            [(s.service, s.section, s.option, s.value, s.reason)
             for s in self.settings])

    def _write(self, parsed_args, names):
        layout, out = parsed_args.layout, parsed_args.output_dir
        present = filetree.existing(out)
        tree = {}
        # The literal names too: a folder where the operator's nova.conf
        # goes is refused by name, not skipped as no file.
        # (KOLLA_GLOBALS, beside the directory, is one of kolla's.)
        for relative in present + [r for r in layouts.READS[layout]
                                   if '*' not in r and r not in present]:
            path = os.path.join(out, *relative.split('/'))
            if layouts.reads(layout, relative) and os.path.lexists(path):
                # Whole or refused by name: a setting past a cut-off, or
                # behind a dangling link, would be missed without a word.
                tree[relative] = documents.read_text(path)
        planned = layouts.files(self.settings, names, layout, tree)
        done = filetree.write(out, collections.OrderedDict(
            (path, text) for path, (_, _, text) in planned.items()),
            owned=keep.written_here)
        rows = [(path, layout, host, kind if kind != 'host'
                 else 'nova-compute', status)
                for (path, status), (kind, host, _) in zip(
                    done, planned.values())]
        # An earlier version's file this layout no longer writes.
        rows += [(path, layout, None, '', status) for path, status in
                 filetree.remove(out, layouts.obsolete(layout, tree))]
        if not parsed_args.host:
            # A host file of a host the topology no longer has: named, kept.
            for relative in present:
                host = layouts.host_of(layout, relative)
                if host and relative not in planned and keep.written_here(
                        textfile.read(os.path.join(
                            out, *relative.split('/')))):
                    rows.append((os.path.join(out, *relative.split('/')),
                                 layout, host, 'nova-compute', STALE))
        for row in rows:
            self.app.stderr.write('%s: %s%s\n' % (
                row[4], row[0], STALE_NOTE if row[4] == STALE else ''))
        return FILE_COLUMNS, rows

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.output_dir and not self.list_files:
            return 0
        if not parsed_args.ini:
            return super().produce_output(parsed_args, column_names, data)
        self.app.stdout.write(novaconfig.to_ini(self.settings))
        return 0
