"""``openstack nvlink flavor generate|verify`` and ``nvlink nova-config``."""

import argparse
import dataclasses
import logging
import shlex

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from osc_lib.cli import format_columns

from nvlink_placement import errors
from nvlink_placement.flavors import aliases
from nvlink_placement.flavors import compute
from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import judge
from nvlink_placement.flavors import release
from nvlink_placement.flavors import request
from nvlink_placement.flavors import servers
from nvlink_placement.flavors import verify
from nvlink_placement import forkmap
from nvlink_placement import interrupt
from nvlink_placement.novaconfig import rollout
from nvlink_placement.novaconfig import settings as novaconfig
from nvlink_placement.osc import commands
from nvlink_placement.osc import display
from nvlink_placement.osc import live
from nvlink_placement.osc import offline
from nvlink_placement.osc import snapshot as snapshot_cmd
from nvlink_placement.osc import topology as topology_cmd

LOG = logging.getLogger(__name__)


def add_topology_arguments(parser):
    parser.add_argument('--topology', metavar='FILE', required=True,
                        help='Topology file (YAML or JSON, version 1).')
    parser.add_argument('--host', metavar='HOST', action='append',
                        default=[],
                        help='Only the GPUs of this host (repeatable; '
                             'default: every host). Use it to pick the '
                             'hosts of one GPU model.')


def _alias(text):
    """``--alias`` for argparse: ``NAME`` or ``NAME=VENDOR:PRODUCT``."""
    try:
        aliases.parse(text)
    except errors.NvlinkError as exc:
        raise argparse.ArgumentTypeError(str(exc))
    return text


ALIAS_HELP = (
    'The [pci] alias naming the GPUs: NAME, or NAME=VENDOR:PRODUCT for '
    'the GPUs of those PCI ids. Repeat it for a fleet of several GPU '
    'models: one alias per model; NAME=VENDOR:PRODUCT names that model, '
    'each bare NAME the next model not named so, in topology order (the '
    'order in which the hosts, in file order, first show each model: '
    'said on standard error, as another host order gives the names to '
    'other models); a model left unnamed gets the alias '
    'pci-<vendor>-<product>, said on standard error.')


def add_alias_argument(parser, required=True, help=ALIAS_HELP):
    parser.add_argument('--alias', metavar='NAME[=VENDOR:PRODUCT]',
                        action='append', required=required, type=_alias,
                        default=None if required else [], help=help)


def warn_derived(found):
    """Name on the log each alias no ``--alias`` named, or named by order.

    A bare name given by topology order among several models would name
    another model once the hosts are listed in another order: the warning
    gives the ``NAME=VENDOR:PRODUCT`` form that pins it.
    """
    for one in found:
        if one.by_order:
            LOG.warning('--alias %s names GPU model %s:%s (%s, on %s) by '
                        'topology order; --alias %s=%s:%s keeps it so if '
                        'the hosts are listed in another order', one.name,
                        one.vendor_id, one.product_id, one.resource_class,
                        display.names(list(one.hosts)), one.name,
                        one.vendor_id, one.product_id)
        if one.derived:
            LOG.warning('GPU model %s:%s (%s, on %s) gets alias %s: no '
                        '--alias names it', one.vendor_id, one.product_id,
                        one.resource_class, display.names(list(one.hosts)),
                        one.name)


def _sizes(text):
    """``--sizes`` for argparse: a bad value is a usage error (exit 3)."""
    try:
        return generate.parse_sizes(text)
    except errors.NvlinkError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def add_sizes_argument(parser):
    parser.add_argument('--sizes', metavar='N[,N...]',
                        type=_sizes,
                        help='GPUs per flavor, e.g. 1,2,4,8 (default: 1, '
                             'every NVLink group size and every whole-host '
                             'size of the topology).')


def selected_hosts(app, parsed_args):
    """The topology of ``--topology`` and its hosts picked by ``--host``."""
    topology = topology_cmd.load_topology(app, parsed_args.topology)
    return topology, topology_cmd.select_hosts(topology, parsed_args.host)


def reach(topology, hosts):
    """The topology's hosts a flavor for ``hosts`` can land on.

    Those with a usable GPU of a class the GPUs of ``hosts`` have (GPUs
    of unknown class are one class): the alias names the class, not the
    hosts.
    """
    classes = {aliases.gpu_class(h.gpus[a]) for h in hosts
               for a in h.usable()}
    return [h for h in topology.hosts.values()
            if any(aliases.gpu_class(h.gpus[a]) in classes
                   for a in h.usable())]


def _warn_wide(hosts, flavors):
    """Warn of flavors whose GPU groups carry no member traits.

    Only those (the upstream dialect's whole-host flavor) make Placement
    enumerate the permutations of a wide host's GPUs.
    """
    unnamed = [f.size for f in flavors if f.size > 1 and not any(
        key.startswith('trait_') for key in f.extra_specs)]
    wide = novaconfig.wide_hosts(hosts)
    if wide and unnamed and max(unnamed) > novaconfig.WIDE_FLAVOR_GPUS:
        LOG.warning('%s', novaconfig.wide_warning(wide, max(unnamed)))


class GenerateFlavors(commands.OwnOutput, commands.Lister):
    """Generate flavors whose GPUs come from one NVLink domain.

    For N GPUs of alias A whose N-GPU NVLink groups carry trait
    CUSTOM_PCI_GROUP<N>: pci_passthrough:alias=A:N:_A,
    trait_nvl<N>:CUSTOM_PCI_GROUP<N>=required,
    trait_A-<i>:CUSTOM_PCI_GROUP<N>_MEMBER<i>=required for each GPU i,
    placement:same_subtree=_A-0,...,_A-<N-1>,_nvl<N> and
    placement:group_policy=none (the MOSK named-alias extension, with
    [filter_scheduler] allow_pci_traits_in_flavor = True). The member
    traits come from Nova's [pci] device_spec (see "openstack nvlink
    nova-config") and make each free domain one allocation candidate. The
    whole-host flavor carries the alias, member traits and policy; 1-GPU
    flavors only the alias. A size no NVLink group has is refused.
    With --host, sizes are still judged on every topology host with GPUs
    of the same class (the alias, not --host, decides where Nova looks): a
    size that is the whole of a selected host but a domain of another is
    a domain flavor.
    In a fleet of several GPU models (told apart by host inspection's
    vendor/device ids) each --alias names one model, and each model's
    flavors are generated on its hosts, on their GPUs of that model (a
    host with two models serves both), named with its alias; a
    --name-template without {alias} that gives two models' flavors one
    name is refused.
    --dialect upstream refuses every size but 1 and the whole host:
    upstream Nova cannot name the request groups of an alias, and its
    whole-host flavor makes Placement enumerate GPU permutations.
    --apply creates or updates the flavors (only differing extra specs are
    written) and sets extra specs at compute API microversion 2.86, where
    Nova validates them: upstream Nova refuses the named-alias flavors
    (HTTP 400) instead of storing flavors whose every boot fails.
    --apply refuses flavors whose member traits no resource provider in
    Placement has yet (nova-compute has not got nova-config's device_spec
    entries): the rollout order is Nova entries, member traits seen by
    check, reshape, flavors; --skip-member-trait-check overrides.
    The mosk dialect runs on MOSK's Nova, or on upstream Nova 29.4.0,
    31.3.1, 33.0.2 or 34.0.0 with this project's nova-patches/ series; to
    check which Nova a cloud has, run --apply (it stops at the first
    named-alias flavor a Nova without the extension refuses, and deletes
    it again) or nova-patches/apply.sh --check on the Nova hosts.
    """

    auth_required = False
    own_output = {'print_commands': 'openstack flavor commands'}

    #: The :class:`interrupt.Stop` of an interrupted --apply, else None.
    stopped = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_topology_arguments(parser)
        add_alias_argument(parser)
        add_sizes_argument(parser)
        parser.add_argument('--name-template', metavar='TEMPLATE',
                            default=generate.DEFAULT_NAME_TEMPLATE,
                            help='Flavor name, with {alias} and {size} '
                                 '(default %s).'
                                 % generate.DEFAULT_NAME_TEMPLATE)
        parser.add_argument('--vcpus-per-gpu', metavar='N', type=int,
                            default=generate.DEFAULT_VCPUS_PER_GPU,
                            help='vCPUs per GPU (default %d).'
                                 % generate.DEFAULT_VCPUS_PER_GPU)
        parser.add_argument('--ram-per-gpu', metavar='MiB', type=int,
                            default=generate.DEFAULT_RAM_PER_GPU,
                            help='RAM per GPU in MiB (default %d).'
                                 % generate.DEFAULT_RAM_PER_GPU)
        parser.add_argument('--disk', metavar='GB', type=int,
                            default=generate.DEFAULT_DISK,
                            help='Root disk in GB (default %d).'
                                 % generate.DEFAULT_DISK)
        parser.add_argument('--dialect', choices=generate.DIALECTS,
                            default=generate.MOSK,
                            help='mosk (named alias groups, default) or '
                                 'upstream (only 1-GPU and whole-host).')
        action = parser.add_mutually_exclusive_group()
        action.add_argument('--print-commands', action='store_true',
                            help='Print the openstack flavor create / set '
                                 'commands instead of rows (not with -f or '
                                 '-c).')
        action.add_argument('--apply', action='store_true',
                            help='Create or update the flavors through the '
                                 'compute API (extra specs at microversion '
                                 '2.86, validated by Nova); rows list the '
                                 'changes.')
        parser.add_argument('--dry-run', action='store_true',
                            help='With --apply: list the changes, write '
                                 'nothing.')
        parser.add_argument(
            rollout.SKIP_OPTION, action='store_true',
            help='With --apply: create flavors whose member traits no '
                 'resource provider in Placement has yet. By default '
                 '--apply refuses them (they would find no host): first '
                 'give nova-compute the device_spec entries of nova-config '
                 'and wait until check shows the member traits.')
        return parser

    def take_action(self, parsed_args):
        if parsed_args.dry_run and not parsed_args.apply:
            raise errors.UsageError('--dry-run goes with --apply')
        if parsed_args.skip_member_trait_check and not parsed_args.apply:
            raise errors.UsageError('%s goes with --apply'
                                    % rollout.SKIP_OPTION)
        topology, hosts = selected_hosts(self.app, parsed_args)
        everywhere = list(topology.hosts.values())
        found = aliases.assign(hosts, parsed_args.alias, scope=everywhere)
        warn_derived(found)
        flavors, names = [], {}
        for one in found:
            result = generate.generate(
                aliases.hosts_of(hosts, one), one.name,
                sizes=parsed_args.sizes, dialect=parsed_args.dialect,
                trait_prefix=topology.trait_prefix,
                name_template=parsed_args.name_template,
                vcpus_per_gpu=parsed_args.vcpus_per_gpu,
                ram_per_gpu=parsed_args.ram_per_gpu, disk=parsed_args.disk,
                scope=aliases.reach_of(reach(topology, hosts), one))
            for size, reason in result.skipped:
                LOG.warning('%ssize %d not generated: %s',
                            _of(found, one), size, reason)
            for note in result.notes:
                LOG.warning('%s%s', _of(found, one), note)
            for flavor in result.flavors:
                if flavor.name in names:
                    raise errors.NvlinkError(
                        '--name-template %r gives the flavors of aliases '
                        '%s and %s the same name %r; include {alias}' % (
                            parsed_args.name_template, names[flavor.name],
                            one.name, flavor.name))
                names[flavor.name] = one.name
            _warn_wide(aliases.hosts_of(hosts, one), result.flavors)
            flavors += result.flavors
        self.flavors = flavors
        if parsed_args.apply:
            return self.apply(parsed_args, flavors)
        return generate.COLUMNS, [
            (f.name, f.vcpus, f.ram, f.disk,
             format_columns.DictColumn(f.extra_specs))
            for f in flavors]

    def apply(self, parsed_args, flavors):
        """--apply: the rows of the changes made (or planned).

        SIGINT or SIGTERM stops it before the next flavor: the rows are
        then the changes of the flavors written, standard error names
        them and those not written, and the command exits 130 or 143.
        """
        made = compute.Progress()
        with interrupt.handled() as stop:
            try:
                changes = stop.call(self._apply, parsed_args, flavors,
                                    stop.event, made)
            except errors.Interrupted:
                changes = None
            if not stop.requested():
                return compute.COLUMNS, [c.row() for c in changes]
        written = list(dict.fromkeys(c.flavor for c in made.made))
        rest = [name for name in made.planned if name not in written]
        what = ('%s written%s, %d not written%s' % (
            display.plural(len(written), 'flavor'),
            ' (%s)' % display.names(written) if written else '',
            len(rest), ' (%s)' % display.names(rest) if rest else '')
            if made.planned else 'nothing written')
        self.app.stderr.write(
            'interrupted by %s: %s; rerun `openstack nvlink flavor generate '
            '--apply` to finish\n' % (stop.name, what))
        self.stopped = stop
        return compute.COLUMNS, [c.row() for c in made.made]

    def _apply(self, parsed_args, flavors, stop, made):
        if not parsed_args.skip_member_trait_check:
            client = live.live_client(self.app, parsed_args)
            client.stop = stop
            missing = rollout.unreported(client, flavors)
            if missing:
                raise rollout.refusal(missing)
        if stop.is_set():
            raise errors.Interrupted()
        connection = live.authenticate(self.app).sdk_connection
        if not servers.has_compute_endpoint(connection.config):
            raise errors.NvlinkError(
                '--apply writes the flavors through the compute API, and '
                'this cloud names none: auth type %s has no service catalog '
                'and no compute_endpoint_override is set; nothing was '
                'written' % connection.config.config.get('auth_type'))
        return compute.apply(connection, flavors,
                             dry_run=parsed_args.dry_run, stop=stop,
                             progress=made)

    def run(self, parsed_args):
        code = super().run(parsed_args)
        if self.stopped is None:
            return code
        self.stopped.exit()
        return self.stopped.exit_code

    def produce_output(self, parsed_args, column_names, data):
        if not parsed_args.print_commands:
            return super().produce_output(parsed_args, column_names, data)
        for flavor in self.flavors:
            self.app.stdout.write(print_commands(flavor))
        return 0


def _of(found, one):
    """``alias A: `` before a message, in a fleet of several models."""
    return 'alias %s: ' % one.name if len(found) > 1 else ''


def print_commands(flavor):
    """``openstack flavor create`` and ``set`` commands for a FlavorSpec.

    ``flavor set`` names the compute API microversion at which Nova
    validates extra specs (:data:`compute.EXTRA_SPECS_MICROVERSION`):
    without it OSC sends 2.61, where an upstream Nova stores a named alias
    and then fails every boot of the flavor.
    """
    name = shlex.quote(flavor.name)
    lines = ['openstack flavor create --vcpus %d --ram %d --disk %d %s\n'
             % (flavor.vcpus, flavor.ram, flavor.disk, name),
             'openstack --os-compute-api-version %s flavor set \\\n'
             % compute.EXTRA_SPECS_MICROVERSION]
    lines += ['  --property %s \\\n' % shlex.quote('%s=%s' % kv)
              for kv in flavor.extra_specs.items()]
    lines.append('  %s\n' % name)
    return ''.join(lines)


class VerifyFlavors(commands.Lister):
    """Prove flavors against Placement: every candidate is one NVLink domain.

    For each flavor, builds the GET /allocation_candidates query exactly
    as the Nova release the cloud runs would (microversion 1.36, limit
    1000; see --nova-release), runs it against the live Placement or an
    embedded one loaded from --snapshot, and checks
    every allocation request: all GPUs on one host of the topology, free,
    and exactly one NVLink domain of the flavor's size. Rows per flavor
    and host: candidates, distinct valid and invalid GPU sets, free
    domains no candidate offers, and status, that host's own: "ok",
    "not reshaped" (the query names a group trait Placement does not have
    yet), "other-class" (by the topology's vendor/device ids, the host
    has no GPU of the alias' model, as a B200 host for H100 flavors: not
    a place the flavor can land, and no failure), "no-match" (the query
    can match no GPU of the host, so nothing is proven: no compute node of
    that name, no provider of its GPUs, or free GPUs none of which has
    the alias' resource class and traits, as with a wrong
    --resource-class; every row says it when no verified host has a GPU
    of the alias' model), or "problem" (the messages on standard error
    say which). Exits 1 on any invalid set, missing domain, no-match or
    problem, naming the GPUs and domains; other-class rows never fail.
    In a fleet of several GPU models, each alias the flavors name stands
    for a model as --alias says (the options given to flavor generate),
    or as --alias-config's [pci] alias values say.
    """

    auth_required = False
    exit_code = 0

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--topology', metavar='FILE', required=True,
                            help='Topology file (YAML or JSON, version 1).')
        parser.add_argument('--flavors', metavar='FILE', action='append',
                            default=[],
                            help='Flavors as "flavor generate -f json|yaml" '
                                 'prints them (repeatable).')
        parser.add_argument('--flavor', metavar='NAME', action='append',
                            default=[],
                            help='A flavor of the compute API (repeatable; '
                                 'needs the cloud, also with --snapshot), '
                                 'or, with --flavors FILE, the flavor of '
                                 'that name in the file.')
        parser.add_argument('--host', metavar='HOST', action='append',
                            default=[],
                            help='Only the candidates and domains of this '
                                 'topology host (repeatable; default: '
                                 'every host).')
        parser.add_argument('--long', action='store_true',
                            help='Add the query column to the table: the '
                                 'GET /allocation_candidates query string '
                                 '(or -c query; other formats always have '
                                 'it).')
        parser.add_argument('--alias-config', metavar='FILE',
                            help='Nova\'s [pci] alias values: nova.conf, or '
                                 'a JSON/YAML list (default: from the '
                                 'topology).')
        add_alias_argument(
            parser, required=False,
            help='In a fleet of several GPU models, the --alias options '
                 'given to flavor generate (NAME or NAME=VENDOR:PRODUCT, '
                 'repeatable): they tell which model each alias the '
                 'flavors name stands for. Default: each model\'s '
                 'pci-<vendor>-<product> alias; a topology of one model '
                 'needs none.')
        parser.add_argument('--resource-class', metavar='RC',
                            type=snapshot_cmd.resource_class_option,
                            help='The GPUs\' resource class when the '
                                 'topology has none and there is no '
                                 '--alias-config.')
        parser.add_argument('--limit', metavar='N', type=int,
                            default=request.DEFAULT_LIMIT,
                            help='[scheduler] max_placement_results '
                                 '(default %d).' % request.DEFAULT_LIMIT)
        parser.add_argument(
            '--nova-release', metavar='N', type=_release,
            help='Nova release of nova-scheduler, e.g. 34 or 33.0.2 '
                 '(%d or later). Default: live, from the compute API\'s '
                 'maximum microversion; with --snapshot, %d. %s'
                 % (release.OLDEST, release.DEFAULT, release.HELP))
        parser.add_argument(
            '--owner-filter', choices=release.OWNER_CHOICES,
            default=release.AUTO,
            help='Nova 34\'s OWNER_NOVA requirement. auto (default): on '
                 'from Nova %d; live, off when a compute node provider '
                 'lacks OWNER_NOVA (a nova-compute older than service '
                 'version %d: Nova\'s API does not show service '
                 'versions). on/off force it, e.g. to model a cloud '
                 'mid-upgrade from a snapshot.'
                 % (release.OWNER_FILTER_SINCE,
                    release.OWNER_SERVICE_VERSION))
        parser.add_argument('--timeout', metavar='SECONDS',
                            type=live.positive_seconds,
                            default=verify.DEFAULT_TIMEOUT,
                            help='Per request, live Placement only '
                                 '(default %d).' % verify.DEFAULT_TIMEOUT)
        offline.add_placement_arguments(parser, save=False)
        live.add_retry_arguments(parser, timeouts=False)
        return parser

    def run(self, parsed_args):
        super().run(parsed_args)
        return self.exit_code

    def take_action(self, parsed_args):
        if not parsed_args.flavors and not parsed_args.flavor:
            raise errors.UsageError('no flavors: give --flavors FILE (as '
                                    '"flavor generate -f json" prints '
                                    'them) or --flavor NAME')
        topology, hosts = selected_hosts(self.app, parsed_args)
        flavors = [f for path in parsed_args.flavors
                   for f in inputs.read_flavors(path)]
        if parsed_args.flavor and flavors:
            # --flavor NAME selects from --flavors FILE: no cloud needed.
            listed = {f['name'] for f in flavors}
            unknown = [n for n in parsed_args.flavor if n not in listed]
            if unknown:
                raise errors.NvlinkError(
                    'no flavor %s in %s (it has: %s)' % (
                        ', '.join(unknown), ', '.join(parsed_args.flavors),
                        ', '.join(sorted(listed))))
            flavors = [f for f in flavors if f['name'] in parsed_args.flavor]
        elif parsed_args.flavor:
            connection = live.authenticate(
                self.app, 'compute API',
                '--flavor NAME reads the flavor from Nova%s; offline, give '
                'the flavors as a file with --flavors FILE ("openstack '
                'nvlink flavor generate ... -f json" output)'
                % (' even with --snapshot' if parsed_args.snapshot else '')
            ).sdk_connection
            flavors += [inputs.flavor_from_dict(
                compute.read(connection, name), 'compute API')
                for name in parsed_args.flavor]
        if not flavors:
            raise errors.NvlinkError('no flavors in %s: give --flavors FILE '
                                     'or --flavor NAME' % ', '.join(
                                         parsed_args.flavors))
        everywhere = list(topology.hosts.values())
        one_model = len(aliases.classes(hosts)[0]) <= 1
        aliases_ = aliases.for_flavors(
            flavors, hosts if one_model and not parsed_args.alias
            else everywhere, parsed_args.alias, parsed_args.alias_config,
            parsed_args.resource_class)
        nova = release.choose(parsed_args.nova_release,
                              parsed_args.owner_filter)
        queries = [request.build(f, aliases_, parsed_args.limit, nova)
                   for f in flavors]
        with offline.placement(self.app, parsed_args) as client:
            if not parsed_args.snapshot:
                client = verify.with_timeout(client, parsed_args.timeout)
                nova = self._detect(parsed_args, client)
                queries = [request.build(f, aliases_, parsed_args.limit,
                                         nova) for f in flavors]
            self.app.stderr.write('flavor verify: %s\n' % nova.describe())
            tables = offline.tables(client)
            providers = (tables.provider_roots() if tables is not None
                         else verify.read_providers(client))
            listings = {}
            others = list(topology.hosts.values())

            def verify_one(query):
                return verify.verify(client, query, hosts, providers,
                                     only=bool(parsed_args.host),
                                     others=others, listings=listings)
            for query in queries:
                LOG.info('%s: GET /allocation_candidates?%s', query.flavor,
                         query.display)
            if parsed_args.snapshot:
                # The embedded Placement only reads from here on: its
                # flavors are verified in parallel, one process per core.
                verify.prefetch(client, queries, listings, carriers=(
                    tables.trait_carriers if tables is not None else None))
                results = forkmap.forkmap(verify_one, queries,
                                          forkmap.workers())
            else:
                results = [verify_one(query) for query in queries]
        for result in results:
            self.app.stderr.write(result.summary() + '\n')
            for warning in result.warnings:
                LOG.warning(warning)
            for problem in result.problems:
                LOG.error(problem)
        self.exit_code = 0 if all(r.ok for r in results) else 1
        return display.long_columns(parsed_args, 'query', judge.COLUMNS + (
            'status',), [row + (status,) for r in results
                         for row, status in zip(r.rows(), _statuses(r))])

    def _detect(self, parsed_args, client):
        """The query shape for the live cloud (see :func:`release.choose`).

        The compute API's maximum microversion unless --nova-release is
        given (an unreadable compute API falls back to the default, saying
        so); with --owner-filter auto, the compute node providers without
        OWNER_NOVA.
        """
        microversion, note = None, ''
        if parsed_args.nova_release is None:
            try:
                microversion = compute.max_microversion(
                    live.authenticate(self.app).sdk_connection)
            except (ks_exc.ClientException, sdk_exc.SDKException) as exc:
                note = '; compute API version not read: %s' % exc
            else:
                if microversion is None:
                    note = '; no compute API v2.1 version document found'
        nodes = (verify.compute_nodes_without_owner(client)
                 if parsed_args.owner_filter == release.AUTO else None)
        nova = release.choose(parsed_args.nova_release,
                              parsed_args.owner_filter, microversion, nodes)
        return dataclasses.replace(nova, source=nova.source + note)


OTHER_CLASS = 'other-class'


def _statuses(result):
    """The status column of ``result``'s rows, each that host's own.

    Problems about other hosts do not count; those about no host in
    particular (a query Placement refuses) count for every row.
    """
    about_hosts = {p for h in result.hosts for p in h.problems}
    shared = [p for p in result.problems if p not in about_hosts]
    return [_status(result, host, shared) for host in result.hosts]


def _status(result, host, shared):
    """The status of one host of a ``flavor verify`` result."""
    if result.no_match or host.no_match:
        return 'no-match'
    if host.other_class:
        return OTHER_CLASS
    own = shared + host.problems
    if any('the tree is not reshaped' in p for p in own):
        return 'not reshaped'
    if any('member traits this flavor requires' in p or 'lack their '
           in p for p in own):
        return 'no member traits'
    if own or host.invalid or host.missing:
        return 'problem'
    return 'ok'


def _release(text):
    try:
        return release.parse_release(text)
    except errors.NvlinkError as exc:
        raise argparse.ArgumentTypeError(str(exc))
