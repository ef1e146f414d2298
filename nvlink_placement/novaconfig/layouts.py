"""``nova-config``'s settings as the files a deployment tool reads.

Pure: :func:`files` turns :func:`novaconfig.settings` rows into
``{relative path: text}`` for one layout. Each compute host's file holds
its complete ``[pci] device_spec`` list, its per-GPU entries before any
generic one (Nova uses the first entry a device matches,
``nova/pci/whitelist.py``), because each tool treats a repeated,
multi-valued option in its own way:

- kolla-ansible (``kolla``): its ``merge_configs`` action plugin
  (``ansible/action_plugins/merge_configs.py``, ``OverrideConfigParser``)
  keeps every line of a key within one file, in order, but a key in a later
  source file *replaces* the earlier files' values. nova-compute's sources
  are, in order, the role's template, ``global.conf``, ``nova.conf``,
  ``nova/nova-compute.conf``, ``nova/<host>/nova.conf``,
  ``nova/<host>/nova-compute.conf`` (``roles/nova-cell/tasks/config.yml``),
  so ``nova/<host>/nova.conf`` carries the whole list.
- OpenStack-Ansible (``openstack-ansible``): ``config_template``
  (``ansible-config-template``, ``ConfigTemplateParser._write_check``)
  writes a multi-valued override in *sorted* order, and host_vars replace
  group_vars whole. So the host's list is one ``device_spec`` value, a
  JSON list Nova's ``Whitelist`` reads in order, in
  ``host_vars/<host>.yml``, with the host's other compute settings.
- oslo.config drop-ins (``config-dir``): oslo.config *extends* a
  multi-valued option file after file (``nova.conf``, then each
  ``*.conf`` of ``nova.conf.d/`` and ``nova-compute.conf.d/`` in name
  order), so a generic entry in ``nova.conf`` would come first and take
  every GPU. The host's fragment carries the whole list, for
  ``/etc/nova/nova-compute.conf.d/``, read by nova-compute only.

The generic ``{vendor_id, product_id}`` entry therefore never goes in a
file shared by hosts: it is the last entry of each host's own list (none
on a host whose topology excludes a GPU, :func:`novaconfig.host_specs`).
"""

import collections
import dataclasses
import fnmatch
import json

import yaml

from nvlink_placement import errors
from nvlink_placement.novaconfig import keep
from nvlink_placement.novaconfig import settings as novaconfig

KOLLA = 'kolla'
OSA = 'openstack-ansible'
CONFIG_DIR = 'config-dir'
LAYOUTS = (KOLLA, OSA, CONFIG_DIR)

#: The name of each config-dir fragment.
FRAGMENT = 'nvlink-placement.conf'
#: kolla-ansible's file per service (beside ``nova/<host>/nova.conf``,
#: which carries nova-compute's settings): the nova role's and nova-cell
#: role's service keys.
KOLLA_SERVICES = (
    ('nova-api', 'nova/nova-api.conf'),
    ('nova-scheduler', 'nova/nova-scheduler.conf'),
    ('nova-conductor', 'nova/nova-conductor.conf'),
    ('nova-conductor', 'nova/nova-super-conductor.conf'),
    ('placement-api', 'placement/placement-api.conf'),
)
#: kolla-ansible's globals.yml, beside the ``/etc/kolla/config`` folder.
KOLLA_GLOBALS = '../globals.yml'
#: OpenStack-Ansible: one file for every nova group (``nova_all``): its
#: ``inventory/env.d/nova.yml`` puts nova-api, nova-conductor and
#: nova-scheduler in one container, where files per group would replace
#: each other's ``nova_nova_conf_overrides``.
OSA_GROUP_FILE = 'group_vars/nova_all.yml'
#: The variables the OpenStack-Ansible files set (os_nova's
#: ``defaults/main.yml``; ``nova_pci_passthrough_whitelist`` is the old
#: name ``nova_device_spec`` defaults to).
OSA_SPEC_VARIABLES = ('nova_device_spec', 'nova_pci_passthrough_whitelist')
OSA_VARIABLES = ('nova_nova_conf_overrides', 'nova_pci_alias',
                 'nova_scheduler_extra_filters',
                 'placement_placement_conf_overrides') + OSA_SPEC_VARIABLES
#: os_nova's ``nova_scheduler_default_filters`` (``defaults/main.yml``):
#: the filters ``nova_scheduler_extra_filters`` is added to.
OSA_DEFAULT_FILTERS = (
    'ComputeFilter', 'AggregateNumInstancesFilter', 'AggregateIoOpsFilter',
    'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
    'NUMATopologyFilter')
#: Files an earlier version wrote that this one does not (each layout):
#: removed when they carry the mark (:func:`obsolete`).
OBSOLETE = {
    KOLLA: ('nova/nova-compute.conf',),
    OSA: ('group_vars/nova_api_os_compute.yml',
          'group_vars/nova_scheduler.yml', 'group_vars/nova_conductor.yml'),
    CONFIG_DIR: (),
}
#: config-dir fragments per service: (service, directory under services/).
CONFIG_DIRS = (
    ('nova-api', 'nova-api.conf.d'),
    ('nova-scheduler', 'nova-scheduler.conf.d'),
    ('nova-conductor', 'nova-conductor.conf.d'),
    ('placement-api', 'placement.conf.d'),
)
DEVICE_SPEC = ('pci', 'device_spec')
ALIAS = ('pci', 'alias')
FILTERS = ('filter_scheduler', 'enabled_filters')


def check_host_names(names):
    """Refuse host names that cannot name a file or folder.

    :raises NvlinkError: naming the first such host.
    """
    for name in names:
        if (not name or '/' in name or '\\' in name or '\0' in name or
                name in ('.', '..') or name.startswith('.')):
            raise errors.NvlinkError(
                'host %r cannot name a file in the output directory (a '
                'path separator, or a name starting with "."); rename it '
                'in the topology' % name)


def service_rows(rows, service):
    """The rows of ``service`` (a program name) that are for every host.

    Flavor advice and per-host rows are left out; so is ``device_spec``,
    which each host gets whole (:func:`novaconfig.host_device_specs`).
    """
    return [row for row in rows
            if not row.hosts and row.section != novaconfig.EXTRA_SPECS and
            (row.section, row.option) != DEVICE_SPEC and
            service in novaconfig.SERVICE_NAMES.get(row.service, ())]


def ini(rows, header, specs=None, carried=()):
    """An ini file: ``header`` comment lines, then ``rows`` by section.

    :param specs: the host's ``device_spec`` entries, written first in
        ``[pci]``, one line each in order (None: no device_spec).
    :param carried: the operator's entries for other devices (JSON texts),
        written after ``specs``.
    """
    sections = collections.OrderedDict()
    if specs is not None:
        sections['pci'] = [('device_spec', s, SPECS_REASON) for s in specs]
        sections['pci'] += [('device_spec', s, KEPT_SPECS) for s in carried]
    for row in rows:
        sections.setdefault(row.section, []).append(
            (row.option, row.value, row.reason))
    out = ['# %s' % line for line in header]
    for section, lines in sections.items():
        out.append('')
        out.append('[%s]' % section)
        reason = None
        for option, value, why in lines:
            if why != reason:
                reason = why
                out.append('# %s' % why)
            out.append('%s = %s' % (option, value))
    if specs == []:
        out += ['', '# no GPU of this host is passed through: no GPU entry '
                'in [pci] device_spec']
    return '\n'.join(out) + '\n'


SPECS_REASON = ('this host\'s complete list, in Nova\'s order (the first '
                'entry a GPU matches gives its traits): per-GPU entries, '
                'then the generic one unless the host excludes a GPU; no '
                'other file may list GPU entries')


def _header(layout, what):
    return ['Written from the topology by "openstack nvlink nova-config '
            '--layout %s": do not edit.' % layout, what]


def files(rows, host_names, layout, tree=None):
    """The files of ``layout``, in writing order.

    :param rows: :func:`novaconfig.settings` rows (all host names in
        full: ``shown=None``); several ``[pci] alias`` rows (one per GPU
        model) each become a line of every file that gets aliases.
    :param host_names: the compute hosts, topology order.
    :param tree: ``{relative path: text}`` of the files already in the
        output directory that :func:`reads` names (the operator's own
        settings and an earlier run's files; see :mod:`.keep`).
    :returns: OrderedDict relative path (``/``-separated) ->
        ``(kind, host or None, text)``, kind ``host`` or the service name.
    :raises NvlinkError: a host name that cannot name a file; an
        operator's setting the files would drop or lose to, naming each
        file and key.
    """
    check_host_names(host_names)
    build = {KOLLA: _kolla, OSA: _osa, CONFIG_DIR: _config_dir}[layout]
    problems = []
    out = build(rows, host_names, tree or {}, problems)
    if problems:
        # A file is read once per option looked for: name each fault once.
        raise errors.NvlinkError(
            'nothing written: the output directory holds settings these '
            'files would drop or lose to:\n  %s'
            % '\n  '.join(dict.fromkeys(problems)))
    return out


def _ids(rows):
    """The ``(vendor_id, product_id)`` pairs of our device_spec rows."""
    ids = set()
    for row in rows:
        if (row.section, row.option) == DEVICE_SPEC:
            entry = json.loads(row.value)
            ids.add((entry.get('vendor_id'), entry.get('product_id')))
    return ids


def _aliases(rows):
    return [r.value for r in rows if (r.section, r.option) == ALIAS and
            not r.hosts]


def _replace(rows, aliases=None, enabled=None):
    """``rows`` with alias and ``enabled_filters`` values replaced.

    :param aliases: alias texts, written at the first alias row (None:
        keep the rows').
    :param enabled: the ``enabled_filters`` value (None: keep the row's).
    """
    ours = _aliases(rows)
    # Each alias of ours keeps its own reason (its model's resource class
    # and hosts), not the first one's.
    reasons = {r.value: r.reason for r in rows
               if (r.section, r.option) == ALIAS and not r.hosts}
    out = []
    for row in rows:
        key = (row.section, row.option)
        if key == ALIAS and aliases is not None:
            if row.value == ours[0]:
                out += [dataclasses.replace(row, value=a, reason=reasons.get(
                    a, KEPT_ALIAS)) for a in aliases]
            continue
        if key == FILTERS and enabled is not None:
            row = dataclasses.replace(row, value=enabled, reason=(
                row.reason if enabled == row.value else KEPT_FILTERS))
        out.append(row)
    return out


KEPT_ALIAS = ('kept: an alias configured before (the operator\'s, or an '
              'earlier run\'s for another GPU model); this file replaces '
              'the alias option of the files read before it')
KEPT_FILTERS = ('the operator\'s enabled_filters with PciPassthroughFilter '
                'added (this file replaces their option)')
KEPT_SPECS = ('kept: the operator\'s entries for other devices, which this '
              'host\'s list replaces otherwise')


def _ini_last(tree, paths, section, option, problems):
    """Where the operator's files set an option last: (path, values).

    :param paths: the operator's files, in the tool's merge order; ours
        (marked) are skipped. ``(None, [])`` when none sets it.
    """
    found = (None, [])
    for path in paths:
        text = tree.get(path)
        if text is None or keep.written_here(text):
            continue
        values = keep.ini_values(path, text, section, option, problems)
        if values:
            found = (path, values)
    return found


def _previous_aliases(tree, path, problems):
    text = tree.get(path)
    if text is None or not keep.written_here(text):
        return []
    return keep.ini_values(path, text, 'pci', 'alias', problems)


def _kolla(rows, host_names, tree, problems):
    ids = _ids(rows)
    # The operator's files every nova-compute reads before the host's file,
    # in kolla-ansible's merge order (roles/nova-cell/tasks/config.yml).
    common = ('global.conf', 'nova.conf', 'nova/nova-compute.conf')
    for path in common:
        text = tree.get(path)
        if text is not None and not keep.written_here(text) and \
                keep.ini_values(path, text, 'pci', 'passthrough_whitelist',
                                problems):
            problems.append(
                '%s: [pci] passthrough_whitelist: kolla-ansible merges keys '
                'by name, so this old name stays beside each host\'s '
                'device_spec and Nova reads it first (no GPU gets its '
                'member traits); rename it device_spec (its entries for '
                'other devices are then carried into every host\'s file)'
                % path)
    globals_yml = tree.get(KOLLA_GLOBALS)
    if globals_yml is not None and 'nova_pci_passthrough_whitelist' in \
            keep.yaml_document(KOLLA_GLOBALS, globals_yml, problems):
        problems.append(
            '%s: nova_pci_passthrough_whitelist: kolla-ansible\'s nova.conf '
            'template writes it as [pci] passthrough_whitelist, which Nova '
            'reads before each host\'s device_spec; remove it and put its '
            'entries for other devices in [pci] device_spec of nova.conf '
            '(carried into every host\'s file)' % KOLLA_GLOBALS)
    where, values = _ini_last(tree, common, 'pci', 'device_spec', problems)
    carried = keep.other_entries(keep.spec_entries(
        '%s [pci] device_spec' % where, values, problems), ids)
    where, theirs = _ini_last(tree, ('global.conf', 'nova.conf'), 'pci',
                              'alias', problems)
    keep.changed_aliases('%s [pci]' % where, _aliases(rows), theirs,
                         problems)
    aliases = keep.alias_lines(_aliases(rows), theirs, _previous_aliases(
        tree, 'nova/nova-api.conf', problems))
    _, enabled = _ini_last(tree, ('global.conf', 'nova.conf'),
                           'filter_scheduler', 'enabled_filters', problems)
    specs = novaconfig.host_device_specs(rows, host_names)
    compute = _replace(service_rows(rows, 'nova-compute'), aliases)
    out = collections.OrderedDict()
    for name in host_names:
        mine = 'nova/%s/nova-compute.conf' % name
        text = tree.get(mine)
        if text is not None and (
                keep.ini_values(mine, text, 'pci', 'device_spec', problems) or
                keep.ini_values(mine, text, 'pci', 'passthrough_whitelist',
                                problems)):
            problems.append(
                '%s: [pci] device_spec: kolla-ansible merges it after '
                'nova/%s/nova.conf, so it would replace the host\'s GPU '
                'entries; remove it (entries for other devices go in '
                'nova.conf)' % (mine, name))
        out[HOST_FILES[KOLLA].format(name)] = ('host', name, ini(
            compute, _header(KOLLA, 'kolla-ansible merges it into every '
                             'nova service of host %s,' % name) +
            ['after nova.conf and nova/<service>.conf: its device_spec and '
             'alias replace theirs whole.'],
            specs[name], [json.dumps(e) for e in carried]))
    for service, path in KOLLA_SERVICES:
        own = _replace(service_rows(rows, service), aliases,
                       keep.filters(enabled[-1] if enabled else None,
                                    _value(rows, FILTERS)))
        if own:
            out[path] = (service, None, ini(own, _header(
                KOLLA, 'kolla-ansible merges it into %s.' % service)))
    return out


def _value(rows, key):
    for row in rows:
        if (row.section, row.option) == key:
            return row.value
    return ''


def _osa(rows, host_names, tree, problems):
    ids = _ids(rows)
    for path in sorted(tree):
        if keep.written_here(tree[path]) or not path.endswith('.yml'):
            continue
        extra = path.startswith('user_') and '/' not in path
        grouped = path.startswith(('group_vars/', 'host_vars/'))
        if not (extra or grouped):
            continue
        document = keep.yaml_document(path, tree[path], problems)
        for name in OSA_VARIABLES:
            if name not in document:
                continue
            if extra:
                problems.append(
                    '%s: %s: the user_*.yml files are extra variables, '
                    'which beat the group_vars and host_vars written here; '
                    'move it to global_overrides in openstack_user_config'
                    '.yml (nova-config then merges it into its files)'
                    % (path, name))
            else:
                problems.append(
                    '%s: %s: Ansible would take one of this file and %s '
                    'whole; move it to global_overrides in '
                    'openstack_user_config.yml (nova-config then merges it '
                    'into its files)' % (path, name, OSA_GROUP_FILE))
    everywhere, per_host = keep.osa_variables(tree, OSA_VARIABLES, problems)
    for host, found in sorted(per_host.items()):
        for name, (where, _) in found.items():
            if name not in OSA_SPEC_VARIABLES:
                problems.append(
                    '%s: %s: a host\'s variables beat group_vars, so this '
                    'would replace %s\'s for its containers; move it to '
                    'global_overrides (nova-config then merges it)'
                    % (where, name, OSA_GROUP_FILE))

    def spec_source(found):
        for name in OSA_SPEC_VARIABLES:
            if name in found:
                where, value = found[name]
                if isinstance(value, (str, dict)):
                    value = [value]
                return keep.spec_entries('%s: %s' % (where, name),
                                         value or [], problems)
        return None

    default = spec_source(everywhere) or []
    previous = []
    text = tree.get(OSA_GROUP_FILE)
    if text is not None and keep.written_here(text):
        previous = keep.yaml_document(OSA_GROUP_FILE, text, problems).get(
            'nova_pci_alias') or []
    where, theirs = everywhere.get('nova_pci_alias', (None, []))
    theirs = [a if isinstance(a, str) else json.dumps(a)
              for a in theirs or []]
    keep.changed_aliases('%s: nova_pci_alias' % where, _aliases(rows),
                         theirs, problems)
    aliases = keep.alias_lines(_aliases(rows), theirs, previous)
    specs = novaconfig.host_device_specs(rows, host_names)
    out = collections.OrderedDict()
    for name in host_names:
        entries = spec_source(per_host.get(name, {}))
        carried = keep.other_entries(default if entries is None else entries,
                                     ids)
        value = ([json.dumps([json.loads(s) for s in specs[name]])]
                 if specs[name] else [])
        value += [json.dumps(e) for e in carried]
        out[HOST_FILES[OSA].format(name)] = ('host', name, _yaml(
            {'nova_device_spec': value}, _header(
                OSA, 'Host %s\'s [pci] device_spec entries: first its GPUs '
                'as one JSON list in Nova\'s order' % name) +
            ['(config_template sorts repeated keys), then the operator\'s '
             'entries for other devices.']))
    nova_rows = []
    for service in ('nova-compute', 'nova-api', 'nova-scheduler',
                    'nova-conductor'):
        nova_rows += [r for r in service_rows(rows, service)
                      if (r.section, r.option) not in (ALIAS, FILTERS)]
    extra_filters = list(everywhere.get(
        'nova_scheduler_extra_filters', (None, []))[1] or [])
    extra_filters += [f for f in _value(rows, FILTERS).split(',')
                      if f and f not in OSA_DEFAULT_FILTERS and
                      f not in extra_filters]
    document = collections.OrderedDict([
        ('nova_nova_conf_overrides', _merged(everywhere.get(
            'nova_nova_conf_overrides', (None, {}))[1], nova_rows)),
        ('nova_pci_alias', aliases),
        ('nova_scheduler_extra_filters', extra_filters)])
    out[OSA_GROUP_FILE] = ('nova-api, nova-scheduler, nova-conductor', None,
                           _yaml(document, _header(
                               OSA, 'For every nova group (nova_all: the '
                               'nova_api_container holds api, conductor '
                               'and scheduler together).')))
    placement = service_rows(rows, 'placement-api')
    if placement:
        out['group_vars/placement_all.yml'] = ('placement-api', None, _yaml(
            {'placement_placement_conf_overrides': _merged(everywhere.get(
                'placement_placement_conf_overrides', (None, {}))[1],
                placement)},
            _header(OSA, 'For the placement_all group (placement-api).')))
    return out


def _merged(theirs, rows):
    """config_template overrides: the operator's, ours set over them."""
    found = collections.OrderedDict()
    for section, options in (theirs or {}).items():
        found[section] = collections.OrderedDict(options or {})
    for row in rows:
        found.setdefault(row.section, collections.OrderedDict())[
            row.option] = row.value
    return found


def _config_dir(rows, host_names, tree, problems):
    specs = novaconfig.host_device_specs(rows, host_names)
    aliases = keep.alias_lines(_aliases(rows), _previous_aliases(
        tree, 'services/nova-api.conf.d/' + FRAGMENT, problems))
    compute = _replace(service_rows(rows, 'nova-compute'), aliases)
    out = collections.OrderedDict()
    for name in host_names:
        out[HOST_FILES[CONFIG_DIR].format(name)] = (
            'host', name, ini(compute, _header(
                CONFIG_DIR, 'Put it at /etc/nova/nova-compute.conf.d/%s on '
                'host %s;' % (FRAGMENT, name)) +
                ['oslo.config adds its device_spec to any in nova.conf and '
                 'nova.conf.d: keep GPU entries out of those.'],
                specs[name]))
    for service, folder in CONFIG_DIRS:
        own = _replace(service_rows(rows, service), aliases)
        if own:
            where = ('/etc/placement/placement.conf.d' if
                     service == 'placement-api' else '/etc/nova/' + folder)
            out['services/%s/%s' % (folder, FRAGMENT)] = (
                service, None, ini(own, _header(
                    CONFIG_DIR, 'Put it at %s/%s on the %s hosts.'
                    % (where, FRAGMENT, service))))
    return out


#: Each layout's per-host file, ``{}`` the host name.
HOST_FILES = {
    KOLLA: 'nova/{}/nova.conf',
    OSA: 'host_vars/{}.yml',
    CONFIG_DIR: 'hosts/{}/nova-compute.conf.d/' + FRAGMENT,
}


def host_of(layout, relative):
    """The host a per-host file of ``layout`` is for, or None.

    :param relative: ``/``-separated path under the output directory.
    """
    head, _, tail = HOST_FILES[layout].partition('{}')
    if not (relative.startswith(head) and relative.endswith(tail)):
        return None
    name = relative[len(head):len(relative) - len(tail)]
    return name if name and '/' not in name else None


def reads(layout, relative):
    """Whether :func:`files` needs the existing file ``relative``.

    :param relative: ``/``-separated, under the output directory
        (:data:`KOLLA_GLOBALS` is beside it).
    """
    return any(fnmatch.fnmatchcase(relative, p) for p in READS[layout])


#: The existing files each layout reads (fnmatch patterns: ``*`` crosses
#: ``/``): the operator's settings it keeps and its own earlier files.
READS = {
    KOLLA: ('global.conf', 'nova.conf', 'nova/*.conf', KOLLA_GLOBALS),
    OSA: ('openstack_user_config.yml', 'conf.d/*.yml', 'user_*.yml',
          'group_vars/*.yml', 'host_vars/*.yml'),
    CONFIG_DIR: ('services/*.conf',),
}


def obsolete(layout, tree):
    """An earlier version's files of ``layout`` to remove (marked ones).

    :param tree: as :func:`files`.
    :returns: relative paths.
    """
    return [p for p in OBSOLETE[layout]
            if keep.written_here(tree.get(p))]


def _yaml(document, header):
    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value
    # libyaml's dumper where PyYAML has it: 5 ms a file in pure Python.
    text = yaml.dump(plain(document), Dumper=getattr(
        yaml, 'CSafeDumper', yaml.SafeDumper), sort_keys=False,
        default_flow_style=False, width=1000)
    return '\n'.join(['# %s' % line for line in header] + ['---', text])
