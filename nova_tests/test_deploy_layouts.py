"""``nova-config --output-dir`` merged by the deployment tools, read by Nova.

Each layout is written through the CLI into a folder that already holds
the operator's own settings, then merged as its tool merges it:

- kolla: kolla-ansible's own ``merge_configs`` action plugin (the
  kolla-ansible package's ``share/kolla-ansible/ansible/action_plugins``),
  run by ansible-core over a local connection, with the sources and order
  of its nova-cell and nova roles (``roles/nova-cell/tasks/config.yml``)
  and an operator's common ``nova.conf`` holding the generic GPU entry, an
  SR-IOV NIC's entry and alias, and a filter of theirs; then the same with
  an old-name ``passthrough_whitelist``, which Nova would read first (so
  nova-config refuses it);
- openstack-ansible: ``ansible-inventory`` over the inventory
  OpenStack-Ansible's own generator made from the operator's
  ``openstack_user_config.yml`` (``fixtures/osa/``: its default
  ``env.d`` puts nova-api, nova-conductor and nova-scheduler in one
  ``nova_api_container``, every nova group a child of ``nova_all``;
  ``global_overrides`` and ``container_vars`` as its variables), and the
  written ``host_vars`` and ``group_vars`` beside it; then
  ``config_template`` (what os_nova renders ``nova.conf`` with) over a
  template with os_nova's ``nova_device_spec``, ``nova_pci_alias`` and
  scheduler filter variables;
- config-dir: oslo.config itself, as RDO's ``openstack-nova-compute``
  starts nova-compute (no ``--config-file``: ``nova.conf``, then the
  default folders) and as Debian's unit does (explicit ``--config-file``,
  which oslo.config parses after the default folders, plus the
  ``--config-dir`` the operator guide adds).

Each resulting nova.conf is parsed with Nova 34's option registry and its
``[pci] device_spec`` given to ``nova.pci.whitelist.Whitelist``: every
usable GPU of every host must match an entry whose tags make exactly its
member traits (``pci_placement_translator._get_traits_for_dev``), every
excluded GPU none, the operator's NIC its own entry, and Nova must refuse
nothing. Expected traits are written out by hand
(:mod:`tests.deploy_fixture`).
"""

import json
import os
import shutil
import subprocess
import sys

import fixtures
from nova.compute import pci_placement_translator
import nova.conf.opts
from nova.pci import whitelist
from oslo_config import cfg
from oslotest import base
import yaml

from nova_tests import base as nova_base
from tests import deploy_fixture as fx
from tests.functional import cli

KOLLA_PLUGINS = os.path.join(sys.prefix, 'share', 'kolla-ansible',
                             'ansible', 'action_plugins')
BIN = os.path.dirname(sys.executable)
CONTROL = 'ctl-01'
# What every service's nova.conf holds before the operator's files (the
# role template's part that matters here), and an operator's common
# nova.conf written "the natural way": the generic GPU entry for all.
TEMPLATE = '[DEFAULT]\ndebug = False\n\n[pci]\nreport_in_placement = False\n'
GENERIC = '{"vendor_id": "10de", "product_id": "2330"}'
OLD_COMMON = '[pci]\ndevice_spec = %s\n' % GENERIC
# The operator's SR-IOV NIC (Intel X710 VFs): an entry, an alias, and a
# scheduler filter of theirs, which the layouts must keep.
NIC = {'vendor_id': '8086', 'product_id': '154c', 'address': '0000:06:02.0',
       'parent_addr': '0000:06:00.0', 'dev_type': 'type-VF'}
NIC_SPEC = '{"vendor_id": "8086", "product_id": "154c", ' \
           '"physical_network": "physnet1"}'
NIC_ALIAS = '{"name": "x710", "vendor_id": "8086", "product_id": "154c", ' \
            '"device_type": "type-VF"}'
THEIR_FILTER = 'AggregateInstanceExtraSpecsFilter'
OPERATOR_COMMON = (
    '[pci]\ndevice_spec = %s\ndevice_spec = %s\nalias = %s\n\n'
    '[filter_scheduler]\nenabled_filters = ComputeFilter,%s\n'
    % (GENERIC, NIC_SPEC, NIC_ALIAS, THEIR_FILTER))
H100_ALIAS = ('legacy', [{'vendor_id': fx.VENDOR_ID,
                          'product_id': fx.PRODUCT_ID}])
X710_ALIAS = ('legacy', [{'vendor_id': '8086', 'product_id': '154c',
                          'dev_type': 'type-VF'}])

KOLLA_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: The config directories (kolla-ansible makes them first)
      ansible.builtin.file:
        path: "{{ out }}/{{ inventory_hostname }}/{{ item }}"
        state: directory
        mode: "0700"
      loop: "{{ services }}"
    - name: nova.conf of each nova service, as kolla-ansible merges it
      merge_configs:
        sources:
          - "{{ base }}/nova.conf.j2"
          - "{{ custom }}/global.conf"
          - "{{ custom }}/nova.conf"
          - "{{ custom }}/nova/{{ item }}.conf"
          - "{{ custom }}/nova/{{ inventory_hostname }}/nova.conf"
          - "{{ custom }}/nova/{{ inventory_hostname }}/{{ item }}.conf"
        dest: "{{ out }}/{{ inventory_hostname }}/{{ item }}/nova.conf"
        mode: "0600"
      loop: "{{ services }}"
"""
# os_nova's play runs on the hosts of nova_all (the physical infra host,
# also in the inventory, gets no nova.conf).
OSA_PLAY = """
- hosts: nova_all
  gather_facts: false
  tasks:
    - name: The config directory
      ansible.builtin.file:
        path: "{{ out }}/{{ inventory_hostname }}"
        state: directory
        mode: "0700"
    - name: nova.conf as OpenStack-Ansible renders it
      config_template:
        src: "{{ base }}/osa-nova.conf.j2"
        dest: "{{ out }}/{{ inventory_hostname }}/nova.conf"
        config_type: ini
        config_overrides: "{{ nova_nova_conf_overrides }}"
        mode: "0600"
"""
# The parts of os_nova's templates/nova.conf.j2 that these variables feed
# (one device_spec line per nova_device_spec item, one alias line per
# nova_pci_alias item; enabled_filters from vars/main.yml's
# _nova_scheduler_filters: the defaults, then the extra filters), and
# defaults/main.yml's defaults.
OSA_TEMPLATE = """[DEFAULT]
debug = False

[filter_scheduler]
enabled_filters = {{ (osa_default_filters + nova_scheduler_extra_filters)
                     | join(',') }}

{% if nova_device_spec or nova_pci_alias %}
[pci]
{% for item in nova_device_spec %}
device_spec = {{ item if item is string else item | to_json }}
{% endfor %}
{% for item in nova_pci_alias %}
alias = {{ item }}
{% endfor %}
{% endif %}
"""
OSA_DEFAULTS = {
    'nova_nova_conf_overrides': {}, 'nova_device_spec': [],
    'nova_pci_alias': [], 'nova_scheduler_extra_filters': [],
    'osa_default_filters': [
        'ComputeFilter', 'AggregateNumInstancesFilter',
        'AggregateIoOpsFilter', 'ComputeCapabilitiesFilter',
        'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
        'ServerGroupAffinityFilter', 'NUMATopologyFilter']}
# OpenStack-Ansible's inventory of this cloud, as its own generator made
# it from the operator's openstack_user_config.yml (fixtures/osa/README):
# the NIC everywhere, a second NIC port on hgx-02 only (its
# container_vars), their alias and filter.
OSA_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            'fixtures', 'osa')
HGX02_NIC = '{"vendor_id": "8086", "product_id": "1572", ' \
            '"physical_network": "physnet2"}'
# A dynamic inventory whose --list answer is the capture.
INVENTORY_SCRIPT = """#!/bin/sh
[ "$1" = --list ] || { echo '{}'; exit 0; }
exec cat "%s"
"""


def osa_inventory(deploy):
    """OpenStack-Ansible's inventory beside ``deploy``'s files.

    The capture is given as a dynamic inventory in ``deploy`` (where
    Ansible then finds the ``group_vars`` and ``host_vars`` written
    there), as OpenStack-Ansible's generator gives it.

    :returns: ``(inventory script path, the nova_api_container's name)``.
    """
    path = os.path.join(deploy, 'inventory.sh')
    with open(path, 'w') as f:
        f.write(INVENTORY_SCRIPT % os.path.join(OSA_FIXTURES,
                                                'inventory.json'))
    os.chmod(path, 0o755)
    with open(os.path.join(OSA_FIXTURES, 'inventory.json')) as f:
        inventory = json.load(f)
    api, = inventory['nova_api_container']['hosts']
    return path, api


def nova_conf(path, config_dir=None, args=None, default_dirs=(),
              default_files=()):
    """``path`` (and ``config_dir``) parsed with Nova 34's option registry.

    Unknown options are ignored by oslo.config as by Nova; the ones read
    here are Nova's own.

    :param args: the command line instead (``path`` and ``config_dir``
        then unused).
    :param default_dirs: the folders oslo.config finds by itself
        (``/etc/nova/nova-compute.conf.d`` ...).
    :param default_files: the files it finds (``/etc/nova/nova.conf``).
    """
    conf = cfg.ConfigOpts()
    for group, opts in nova.conf.opts.list_opts():
        name = getattr(group, 'name', group)
        if name in ('pci', 'filter_scheduler', 'scheduler'):
            conf.register_group(cfg.OptGroup(name))
            conf.register_opts(opts, group=name)
    if args is None:
        args = ['--config-file', path]
        if config_dir:
            args += ['--config-dir', config_dir]
    conf(args, project='nova', prog='nova-compute',
         default_config_files=list(default_files),
         default_config_dirs=list(default_dirs))
    return conf


class TestDeployLayouts(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        # Nova's own tests stub this sysfs read (no such device here).
        self.useFixture(fixtures.MockPatch(
            'nova.pci.utils.is_physical_function', return_value=False))
        self.base = os.path.join(self.tmp, 'base')
        os.makedirs(self.base)
        with open(os.path.join(self.base, 'nova.conf.j2'), 'w') as f:
            f.write(TEMPLATE)

    def write_layout(self, layout, out=None, code=0):
        out = out or os.path.join(self.tmp, layout)
        result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                         fx.TOPOLOGY, '--alias', 'h100', '--output-dir', out,
                         '--layout', layout)
        self.assertEqual(code, result.code, result.stderr)
        return out if code == 0 else result.stderr

    def playbook(self, play, inventory_dir, hosts, plugins, tool=None,
                 inventory=None, **extra):
        """Run ``play`` on ``hosts`` over a local connection.

        :param inventory: the path of an inventory instead of ``hosts``
            (its hosts are run over a local connection too).
        """
        if tool is None:
            tool = os.path.join(BIN, 'ansible-playbook')
            if not os.access(tool, os.X_OK):
                tool = shutil.which('ansible-playbook')
        self.assertIsNotNone(tool, 'ansible-playbook (ansible-core)')
        path = os.path.join(self.tmp, 'play.yml')
        with open(path, 'w') as f:
            f.write(play or '')
        local = {'ansible_connection': 'local',
                 'ansible_python_interpreter': sys.executable}
        if inventory is None:
            document = {'all': {'hosts': {h: local for h in hosts}}}
            inventory = os.path.join(inventory_dir, 'inventory.yml')
            with open(inventory, 'w') as f:
                yaml.safe_dump(document, f)
        else:
            # Every host of the tool's inventory, run here.
            extra = dict(local, **extra)
        env = dict(os.environ, ANSIBLE_HOME=os.path.join(self.tmp, 'ah'),
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.tmp, 'at'),
                   ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
                   ANSIBLE_CONFIG=os.path.join(self.tmp, 'none.cfg'),
                   ANSIBLE_ACTION_PLUGINS=plugins)
        args = [tool, '-i', inventory, path, '-e', json.dumps(extra)]
        if play is None:
            # ansible-inventory: every host's variables as Ansible merges
            # them (group_vars and host_vars beside the inventory).
            args = [os.path.join(os.path.dirname(tool), 'ansible-inventory'),
                    '-i', inventory, '--list']
        result = subprocess.run(args, capture_output=True, text=True,
                                env=env, cwd=self.tmp, timeout=300)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        return result

    def assert_nova_sees_members(self, conf_of, nic=False):
        """``conf_of(host)``: the host's nova-compute config, parsed.

        :param nic: the operator's NIC must keep its entry too.
        """
        for host in fx.HOSTS:
            conf = conf_of(host)
            self.assertTrue(conf.pci.report_in_placement, host)
            # Nova refuses a bad entry here (PciConfigInvalidSpec).
            specs = whitelist.Whitelist(conf.pci.device_spec)
            if nic:
                spec = nova_base.matching_spec(specs, dict(NIC))
                self.assertIsNotNone(spec, host)
                self.assertEqual('physnet1', spec.tags['physical_network'])
            gpus = dict(fx.MEMBER_TRAITS[host])
            gpus.update({a: None for a in fx.EXCLUDED.get(host, ())})
            for address, traits in gpus.items():
                spec = nova_base.matching_spec(specs, {
                    'vendor_id': fx.VENDOR_ID, 'product_id': fx.PRODUCT_ID,
                    'address': address, 'parent_addr': None,
                    'dev_type': 'type-PCI'})
                if traits is None:
                    self.assertIsNone(spec, (host, address))
                    continue
                self.assertIsNotNone(spec, (host, address))
                self.assertEqual(
                    set(traits) | {'COMPUTE_MANAGED_PCI_DEVICE'},
                    pci_placement_translator._get_traits_for_dev(spec.tags),
                    (host, address))

    def assert_alias(self, conf, **expected):
        """Nova's aliases from ``conf``: ``expected`` (default: h100)."""
        self.useFixture(fixtures.MockPatch('nova.pci.request.CONF', conf))
        self.assertEqual(expected or {'h100': H100_ALIAS},
                         nova_base.alias_from_config(self))

    def kolla_merge(self, custom):
        out = os.path.join(self.tmp, 'merged')
        shutil.rmtree(out, ignore_errors=True)
        self.playbook(KOLLA_PLAY, self.tmp, list(fx.HOSTS) + [CONTROL],
                      KOLLA_PLUGINS, base=self.base, custom=custom, out=out,
                      services=['nova-compute', 'nova-api', 'nova-scheduler',
                                'nova-conductor'])

        def merged(host, service='nova-compute'):
            return nova_conf(os.path.join(out, host, service, 'nova.conf'))
        return merged

    def test_kolla_merge_configs(self):
        custom = os.path.join(self.tmp, 'kolla')
        os.makedirs(custom)
        # /etc/kolla/config as the operator had it: the generic entry, the
        # NIC's entry and alias and a filter of theirs, in nova.conf.
        with open(os.path.join(custom, 'nova.conf'), 'w') as f:
            f.write(OPERATOR_COMMON)
        self.write_layout('kolla', custom)
        merged = self.kolla_merge(custom)
        self.assert_nova_sees_members(merged, nic=True)
        scheduler = merged(CONTROL, 'nova-scheduler')
        self.assertTrue(scheduler.filter_scheduler.pci_in_placement)
        self.assertEqual(['ComputeFilter', THEIR_FILTER,
                          'PciPassthroughFilter'],
                         scheduler.filter_scheduler.enabled_filters)
        self.assertEqual(1000, scheduler.scheduler.max_placement_results)
        # A control host has no GPU entry of ours: the operator's own.
        self.assertEqual([GENERIC, NIC_SPEC], scheduler.pci.device_spec)
        self.assertTrue(
            merged(CONTROL, 'nova-conductor').filter_scheduler
            .pci_in_placement)
        self.assert_alias(merged(CONTROL, 'nova-api'), h100=H100_ALIAS,
                          x710=X710_ALIAS)
        self.assert_alias(merged('hgx-01'), h100=H100_ALIAS, x710=X710_ALIAS)

    def test_kolla_old_name_passthrough_whitelist(self):
        custom = self.write_layout('kolla')
        # The old name, as kolla-ansible's own template still writes it:
        # merge_configs keeps it beside each host's device_spec, and Nova
        # reads it first: no GPU gets its member traits.
        with open(os.path.join(custom, 'nova.conf'), 'w') as f:
            f.write(OLD_COMMON.replace('device_spec', 'passthrough_whitelist'))
        merged = self.kolla_merge(custom)
        self.assertEqual(GENERIC, merged('hgx-01').pci.device_spec[0])
        self.assertRaises(AssertionError, self.assert_nova_sees_members,
                          merged)
        # So nova-config refuses, naming the file and key, writes nothing.
        before = {n: open(os.path.join(custom, 'nova', n)).read()
                  for n in ('nova-api.conf', 'nova-scheduler.conf')}
        stderr = self.write_layout('kolla', custom, code=1)
        self.assertIn('%s: [pci] passthrough_whitelist: kolla-ansible merges '
                      'keys by name' % 'nova.conf', stderr)
        self.assertEqual(before, {n: open(os.path.join(
            custom, 'nova', n)).read() for n in before})

    def test_openstack_ansible_inventory_and_config_template(self):
        # ansible-config-template 2.1.1 (PyPI's newest) does not load in
        # ansible-core 2.19+, which kolla-ansible needs: it runs from its
        # own virtualenv (.ci/run makes .venv-osa from
        # nova_tests/osa-requirements.txt).
        venv = os.environ.get('NVLINK_OSA_VENV', os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            '.venv-osa'))
        tool = os.path.join(venv, 'bin', 'ansible-playbook')
        plugins = os.path.join(venv, 'share', 'ansible', 'plugins', 'action')
        if not (os.access(tool, os.X_OK) and os.path.isfile(os.path.join(
                plugins, 'config_template.py'))):
            self.skipTest('no %s with ansible-core and '
                          'ansible-config-template (nova_tests/'
                          'osa-requirements.txt; .ci/run makes it)' % venv)
        # /etc/openstack_deploy with the operator's openstack_user_config.
        deploy = os.path.join(self.tmp, 'openstack_deploy')
        os.makedirs(deploy)
        shutil.copy(os.path.join(OSA_FIXTURES, 'openstack_user_config.yml'),
                    deploy)
        self.write_layout('openstack-ansible', deploy)
        inventory, api_container = osa_inventory(deploy)
        listed = json.loads(self.playbook(
            None, deploy, (), plugins, tool=tool,
            inventory=inventory).stdout)['_meta']['hostvars']
        # nova-api, nova-conductor and nova-scheduler in one container
        # all get every setting: one file for nova_all.
        api = listed[api_container]
        self.assertEqual(
            {'report_in_placement': 'True'},
            api['nova_nova_conf_overrides']['pci'])
        self.assertEqual('True', api['nova_nova_conf_overrides'][
            'filter_scheduler']['pci_in_placement'])
        self.assertEqual([NIC_ALIAS, '{"name": "h100", "vendor_id": '
                          '"10de", "product_id": "2330"}'],
                         api['nova_pci_alias'])
        self.assertEqual([THEIR_FILTER, 'PciPassthroughFilter'],
                         api['nova_scheduler_extra_filters'])
        # Each host's entries: its GPUs, then the operator's other ones
        # (hgx-02's own container_vars over the global ones).
        self.assertEqual(NIC_SPEC, listed['hgx-01']['nova_device_spec'][1])
        self.assertEqual([NIC_SPEC, HGX02_NIC],
                         listed['hgx-02']['nova_device_spec'][1:])
        out = os.path.join(self.tmp, 'rendered')
        with open(os.path.join(self.base, 'osa-nova.conf.j2'), 'w') as f:
            f.write(OSA_TEMPLATE)
        self.playbook(OSA_PLAY, deploy, (), plugins, tool=tool,
                      inventory=inventory, base=self.base, out=out,
                      **{k: v for k, v in OSA_DEFAULTS.items()
                         if k == 'osa_default_filters'})
        rendered = {h: nova_conf(os.path.join(out, h, 'nova.conf'))
                    for h in list(fx.HOSTS) + [api_container]}
        self.assert_nova_sees_members(rendered.get, nic=True)
        specs = whitelist.Whitelist(rendered['hgx-02'].pci.device_spec)
        self.assertEqual('physnet2', nova_base.matching_spec(
            specs, dict(NIC, product_id='1572')).tags['physical_network'])
        api = rendered[api_container]
        self.assertTrue(api.filter_scheduler.pci_in_placement)
        self.assertEqual(OSA_DEFAULTS['osa_default_filters'] + [
            THEIR_FILTER, 'PciPassthroughFilter'],
            api.filter_scheduler.enabled_filters)
        self.assert_alias(api, h100=H100_ALIAS, x710=X710_ALIAS)

    def test_config_dir_read_by_oslo_config(self):
        out = self.write_layout('config-dir')
        # The operator's nova.conf, without GPU entries (the rule).
        common = os.path.join(self.base, 'nova.conf')
        with open(common, 'w') as f:
            f.write(TEMPLATE)

        def read(host, conf=common):
            return nova_conf(conf, os.path.join(
                out, 'hosts', host, 'nova-compute.conf.d'))
        self.assert_nova_sees_members(read)
        # The natural layout of before, the generic entry in nova.conf:
        # oslo.config puts it first and no GPU gets its members.
        old = os.path.join(self.base, 'old.conf')
        with open(old, 'w') as f:
            f.write(OLD_COMMON)
        self.assertRaises(AssertionError, self.assert_nova_sees_members,
                          lambda host: read(host, old))
        api = nova_conf(common, os.path.join(out, 'services',
                                             'nova-api.conf.d'))
        self.assertTrue(api.filter_scheduler.pci_in_placement)
        self.assert_alias(api)

    def test_config_dir_as_each_distribution_starts_nova_compute(self):
        out = self.write_layout('config-dir')
        # nova.conf sets report_in_placement = False (TEMPLATE): the
        # drop-in must win it.
        common = os.path.join(self.base, 'nova.conf')
        with open(common, 'w') as f:
            f.write(TEMPLATE)
        compute = os.path.join(self.base, 'nova-compute.conf')
        open(compute, 'w').close()

        def folder(host):
            return os.path.join(out, 'hosts', host, 'nova-compute.conf.d')
        # RDO's openstack-nova-compute: /usr/bin/nova-compute, no
        # arguments: the default file, then the default folders.
        self.assert_nova_sees_members(lambda host: nova_conf(
            None, args=[], default_files=[common],
            default_dirs=[folder(host)]))
        # Debian's and Ubuntu's nova-compute: explicit --config-file, read
        # after the default folders: nova.conf's single value wins.
        debian = ['--config-file', common, '--config-file', compute]
        conf = nova_conf(None, args=debian, default_dirs=[folder('hgx-01')])
        self.assertFalse(conf.pci.report_in_placement)
        # With the --config-dir the operator guide adds to that command
        # line (the same folder): the drop-in wins, read once.
        self.assert_nova_sees_members(lambda host: nova_conf(
            None, args=debian + ['--config-dir', folder(host)],
            default_dirs=[folder(host)]))
        conf = nova_conf(None, args=debian + ['--config-dir', folder(
            'hgx-02')], default_dirs=[folder('hgx-02')])
        # hgx-02: 8 entries by address and the generic one (twice as many
        # if the folder were read twice).
        self.assertEqual(9, len(conf.pci.device_spec))
