"""``nova-config --output-dir`` merged by the deployment tools, read by Nova.

Each layout is written through the CLI, then merged as its tool merges it:

- kolla: kolla-ansible's own ``merge_configs`` action plugin (the
  kolla-ansible package's ``share/kolla-ansible/ansible/action_plugins``),
  run by ansible-core over a local connection, with the sources and order
  of its nova-cell and nova roles (``roles/nova-cell/tasks/config.yml``)
  and an operator's old common ``nova.conf`` holding the generic entry;
- openstack-ansible: the ``config_template`` action plugin
  (``ansible-config-template``, what OpenStack-Ansible renders
  ``nova_nova_conf_overrides`` with), the written ``host_vars`` and
  ``group_vars`` read by Ansible from beside the inventory;
- config-dir: oslo.config itself, ``--config-file nova.conf`` then
  ``--config-dir`` the host's ``nova-compute.conf.d``, as nova-compute
  reads its default locations.

Each resulting nova.conf is parsed with Nova 34's option registry and its
``[pci] device_spec`` given to ``nova.pci.whitelist.Whitelist``: every
usable GPU of every host must match an entry whose tags make exactly its
member traits (``pci_placement_translator._get_traits_for_dev``), every
excluded GPU none, and Nova must refuse nothing. Expected traits are
written out by hand (:mod:`tests.deploy_fixture`).
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
OLD_COMMON = ('[pci]\ndevice_spec = {"vendor_id": "10de", '
              '"product_id": "2330"}\n')

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
OSA_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: The config directory
      ansible.builtin.file:
        path: "{{ out }}/{{ inventory_hostname }}"
        state: directory
        mode: "0700"
    - name: nova.conf as OpenStack-Ansible renders it
      config_template:
        src: "{{ base }}/nova.conf.j2"
        dest: "{{ out }}/{{ inventory_hostname }}/nova.conf"
        config_type: ini
        config_overrides: "{{ nova_nova_conf_overrides }}"
        mode: "0600"
"""


def nova_conf(path, config_dir=None):
    """``path`` (and ``config_dir``) parsed with Nova 34's option registry.

    Unknown options are ignored by oslo.config as by Nova; the ones read
    here are Nova's own.
    """
    conf = cfg.ConfigOpts()
    for group, opts in nova.conf.opts.list_opts():
        name = getattr(group, 'name', group)
        if name in ('pci', 'filter_scheduler', 'scheduler'):
            conf.register_group(cfg.OptGroup(name))
            conf.register_opts(opts, group=name)
    args = ['--config-file', path]
    if config_dir:
        args += ['--config-dir', config_dir]
    conf(args, project='nova', default_config_files=[],
         default_config_dirs=[])
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

    def write_layout(self, layout):
        out = os.path.join(self.tmp, layout)
        result = cli.run(self, 'nvlink', 'nova-config', '--topology',
                         fx.TOPOLOGY, '--alias', 'h100', '--output-dir', out,
                         '--layout', layout)
        self.assertEqual(0, result.code, result.stderr)
        return out

    def playbook(self, play, inventory_dir, hosts, plugins, tool=None,
                 **extra):
        """Run ``play`` on ``hosts`` over a local connection."""
        if tool is None:
            tool = os.path.join(BIN, 'ansible-playbook')
            if not os.access(tool, os.X_OK):
                tool = shutil.which('ansible-playbook')
        self.assertIsNotNone(tool, 'ansible-playbook (ansible-core)')
        path = os.path.join(self.tmp, 'play.yml')
        with open(path, 'w') as f:
            f.write(play)
        inventory = os.path.join(inventory_dir, 'inventory.yml')
        with open(inventory, 'w') as f:
            yaml.safe_dump({'all': {'hosts': {h: {
                'ansible_connection': 'local',
                'ansible_python_interpreter': sys.executable}
                for h in hosts}}}, f)
        env = dict(os.environ, ANSIBLE_HOME=os.path.join(self.tmp, 'ah'),
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.tmp, 'at'),
                   ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
                   ANSIBLE_CONFIG=os.path.join(self.tmp, 'none.cfg'),
                   ANSIBLE_ACTION_PLUGINS=plugins)
        args = [tool, '-i', inventory, path, '-e', json.dumps(extra)]
        result = subprocess.run(args, capture_output=True, text=True,
                                env=env, cwd=self.tmp, timeout=300)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        return result

    def assert_nova_sees_members(self, conf_of):
        """``conf_of(host)``: the host's nova-compute config, parsed."""
        for host in fx.HOSTS:
            conf = conf_of(host)
            self.assertTrue(conf.pci.report_in_placement, host)
            # Nova refuses a bad entry here (PciConfigInvalidSpec).
            specs = whitelist.Whitelist(conf.pci.device_spec)
            gpus = dict(fx.MEMBER_TRAITS[host])
            gpus.update({a: None for a in fx.EXCLUDED.get(host, ())})
            for address, traits in gpus.items():
                spec = base.matching_spec(specs, {
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

    def assert_alias(self, conf):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.request.CONF', conf))
        self.assertEqual(
            {'h100': ('legacy', [{'vendor_id': fx.VENDOR_ID,
                                  'product_id': fx.PRODUCT_ID}])},
            base.alias_from_config(self))

    def test_kolla_merge_configs(self):
        custom = self.write_layout('kolla')
        with open(os.path.join(custom, 'nova.conf'), 'w') as f:
            f.write(OLD_COMMON)
        out = os.path.join(self.tmp, 'merged')
        self.playbook(KOLLA_PLAY, self.tmp, list(fx.HOSTS) + [CONTROL],
                      KOLLA_PLUGINS, base=self.base, custom=custom, out=out,
                      services=['nova-compute', 'nova-api', 'nova-scheduler',
                                'nova-conductor'])

        def merged(host, service='nova-compute'):
            return nova_conf(os.path.join(out, host, service, 'nova.conf'))
        self.assert_nova_sees_members(merged)
        scheduler = merged(CONTROL, 'nova-scheduler')
        self.assertTrue(scheduler.filter_scheduler.pci_in_placement)
        self.assertIn('PciPassthroughFilter',
                      scheduler.filter_scheduler.enabled_filters)
        self.assertEqual(1000, scheduler.scheduler.max_placement_results)
        # A control host has no GPU entry of ours: the old common one.
        self.assertEqual([OLD_COMMON.split(' = ')[1].strip()],
                         scheduler.pci.device_spec)
        self.assertTrue(
            merged(CONTROL, 'nova-conductor').filter_scheduler
            .pci_in_placement)
        self.assert_alias(merged(CONTROL, 'nova-api'))

    def test_openstack_ansible_config_template(self):
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
        out_dir = self.write_layout('openstack-ansible')
        out = os.path.join(self.tmp, 'rendered')
        self.playbook(OSA_PLAY, out_dir, fx.HOSTS, plugins, tool=tool,
                      base=self.base, out=out)
        self.assert_nova_sees_members(
            lambda host: nova_conf(os.path.join(out, host, 'nova.conf')))
        self.assert_alias(nova_conf(os.path.join(out, 'hgx-01',
                                                 'nova.conf')))
        with open(os.path.join(out_dir, 'group_vars',
                               'nova_scheduler.yml')) as f:
            scheduler = yaml.safe_load(f)['nova_nova_conf_overrides']
        self.assertEqual('True',
                         scheduler['filter_scheduler']['pci_in_placement'])

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
