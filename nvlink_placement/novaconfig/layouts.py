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
import json

import yaml

from nvlink_placement import errors
from nvlink_placement.novaconfig import settings as novaconfig

KOLLA = 'kolla'
OSA = 'openstack-ansible'
CONFIG_DIR = 'config-dir'
LAYOUTS = (KOLLA, OSA, CONFIG_DIR)

#: The name of each config-dir fragment.
FRAGMENT = 'nvlink-placement.conf'
#: kolla-ansible's file per service (beside ``nova/<host>/nova.conf``):
#: the nova role's and nova-cell role's service keys.
KOLLA_SERVICES = (
    ('nova-compute', 'nova/nova-compute.conf'),
    ('nova-api', 'nova/nova-api.conf'),
    ('nova-scheduler', 'nova/nova-scheduler.conf'),
    ('nova-conductor', 'nova/nova-conductor.conf'),
    ('nova-conductor', 'nova/nova-super-conductor.conf'),
    ('placement-api', 'placement/placement-api.conf'),
)
#: OpenStack-Ansible group_vars per service: (service, group, variable).
OSA_GROUPS = (
    ('nova-api', 'nova_api_os_compute', 'nova_nova_conf_overrides'),
    ('nova-scheduler', 'nova_scheduler', 'nova_nova_conf_overrides'),
    ('nova-conductor', 'nova_conductor', 'nova_nova_conf_overrides'),
    ('placement-api', 'placement_all', 'placement_placement_conf_overrides'),
)
#: config-dir fragments per service: (service, directory under services/).
CONFIG_DIRS = (
    ('nova-api', 'nova-api.conf.d'),
    ('nova-scheduler', 'nova-scheduler.conf.d'),
    ('nova-conductor', 'nova-conductor.conf.d'),
    ('placement-api', 'placement.conf.d'),
)
DEVICE_SPEC = ('pci', 'device_spec')


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


def ini(rows, header, specs=None):
    """An ini file: ``header`` comment lines, then ``rows`` by section.

    :param specs: the host's ``device_spec`` entries, written first in
        ``[pci]``, one line each in order (None: no device_spec).
    """
    sections = collections.OrderedDict()
    if specs is not None:
        sections['pci'] = [('device_spec', s, SPECS_REASON) for s in specs]
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
        out += ['', '# no GPU of this host is passed through: no [pci] '
                'device_spec']
    return '\n'.join(out) + '\n'


SPECS_REASON = ('this host\'s complete list, in Nova\'s order (the first '
                'entry a GPU matches gives its traits): per-GPU entries, '
                'then the generic one unless the host excludes a GPU; no '
                'other file may list GPU entries')


def _header(layout, what):
    return ['Written from the topology by "openstack nvlink nova-config '
            '--layout %s": do not edit.' % layout, what]


def files(rows, host_names, layout):
    """The files of ``layout``, in writing order.

    :param rows: :func:`novaconfig.settings` rows (all host names in
        full: ``shown=None``).
    :param host_names: the compute hosts, topology order.
    :returns: OrderedDict relative path (``/``-separated) ->
        ``(kind, host or None, text)``, kind ``host`` or the service name.
    :raises NvlinkError: a host name that cannot name a file.
    """
    check_host_names(host_names)
    specs = novaconfig.host_device_specs(rows, host_names)
    compute = service_rows(rows, 'nova-compute')
    out = collections.OrderedDict()
    if layout == KOLLA:
        for name in host_names:
            out[HOST_FILES[KOLLA].format(name)] = ('host', name, ini(
                [], _header(layout, 'kolla-ansible merges it into every '
                            'nova service of host %s,' % name) +
                ['after nova.conf and nova/<service>.conf: its '
                 'device_spec replaces theirs whole.'],
                specs[name]))
        for service, path in KOLLA_SERVICES:
            own = service_rows(rows, service)
            if own:
                out[path] = (service, None, ini(own, _header(
                    layout, 'kolla-ansible merges it into %s.' % service)))
        return out
    if layout == OSA:
        for name in host_names:
            overrides = _overrides(compute)
            if specs[name]:
                overrides.setdefault('pci', {})['device_spec'] = json.dumps(
                    [json.loads(s) for s in specs[name]])
            out[HOST_FILES[OSA].format(name)] = ('host', name, _yaml(
                {'nova_nova_conf_overrides': overrides}, _header(
                    layout, 'host_vars replace group_vars whole: these are '
                    'all of %s\'s nova.conf overrides;' % name) +
                ['device_spec is one JSON list, in Nova\'s order '
                 '(config_template sorts repeated keys).']))
        for service, group, variable in OSA_GROUPS:
            own = service_rows(rows, service)
            if own:
                what = 'For the %s group (%s).' % (group, service)
                out['group_vars/%s.yml' % group] = (service, None, _yaml(
                    {variable: _overrides(own)}, _header(layout, what)))
        return out
    for name in host_names:
        out[HOST_FILES[CONFIG_DIR].format(name)] = (
            'host', name, ini(compute, _header(
                layout, 'Put it at /etc/nova/nova-compute.conf.d/%s on '
                'host %s;' % (FRAGMENT, name)) +
                ['oslo.config adds its device_spec to any in nova.conf and '
                 'nova.conf.d: keep GPU entries out of those.'],
                specs[name]))
    for service, folder in CONFIG_DIRS:
        own = service_rows(rows, service)
        if own:
            where = ('/etc/placement/placement.conf.d' if
                     service == 'placement-api' else '/etc/nova/' + folder)
            out['services/%s/%s' % (folder, FRAGMENT)] = (
                service, None, ini(own, _header(
                    layout, 'Put it at %s/%s on the %s hosts.'
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


def _overrides(rows):
    """config_template overrides: {section: {option: value}}.

    A repeated option (``[pci] alias`` is one here) keeps its last value.
    """
    found = collections.OrderedDict()
    for row in rows:
        found.setdefault(row.section, collections.OrderedDict())[
            row.option] = row.value
    return found


def _yaml(document, header):
    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    # libyaml's dumper where PyYAML has it: 5 ms a file in pure Python.
    text = yaml.dump(plain(document), Dumper=getattr(
        yaml, 'CSafeDumper', yaml.SafeDumper), sort_keys=False,
        default_flow_style=False, width=1000)
    return '\n'.join(['# %s' % line for line in header] + ['---', text])
