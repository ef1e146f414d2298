"""The hook's configuration file and environment overrides."""

import os

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.hook import config


class TestLoad(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.hook.config.DEFAULT_FILE',
            os.path.join(self.tmp, 'absent.conf')))

    def write(self, text):
        path = os.path.join(self.tmp, 'hook.conf')
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def test_defaults(self):
        self.assertEqual(config.Settings(
            policy='refuse', fm_address=None, fm_socket=None,
            fm_library=None, fm_timeout=5.0, fm_deadline=30.0,
            mapping='/run/nvidia-fabricmanager/gpu-pci-module-mapping.json',
            lock_dir='/run/nvlink-placement', lock_timeout=60.0,
            sysfs_root='/sys', log='auto'), config.load({}))

    def test_file_and_environment(self):
        path = self.write(
            '# nvlink-partition-hook\n'
            '[hook]\n'
            'policy = allow            # boot without NVLink\n'
            'fm_socket = /run/nvidia-fabricmanager/fm.sock\n'
            'fm_timeout = 2.5\n'
            'mapping = /etc/nvlink-placement/map.json\n'
            'LOCK_DIR = /run/lock/nvlink\n'
            'log = syslog\n')
        settings = config.load({
            'NVLINK_HOOK_CONFIG': path, 'NVLINK_HOOK_POLICY': 'refuse',
            'NVLINK_HOOK_LOCK_TIMEOUT': '5', 'NVLINK_HOOK_MAPPING': '',
            'PATH': '/usr/bin'})
        self.assertEqual(config.Settings(
            policy='refuse', fm_socket='/run/nvidia-fabricmanager/fm.sock',
            fm_timeout=2.5, lock_dir='/run/lock/nvlink', lock_timeout=5.0,
            log='syslog'), settings)

    def test_default_file_is_read_when_present(self):
        path = self.write('[hook]\nfm_address = 10.0.0.5\n')
        self.useFixture(fixtures.MonkeyPatch(
            'nvlink_placement.hook.config.DEFAULT_FILE', path))
        self.assertEqual('10.0.0.5:6666', config.load({}).fm_address)

    def test_errors(self):
        for text, environ, message in (
                ('[hook]\npolicy = deny\n', {},
                 '{f}: [hook] policy: expected refuse or allow, got '
                 "'deny'"),
                ('[hook]\nfm_timeout = 0\n', {},
                 "{f}: [hook] fm_timeout: expected a number of seconds above "
                 "0 and at most 3600, got '0'"),
                ('[hook]\nfm_address = ::1\n', {},
                 "{f}: [hook] fm_address: Fabric Manager address '::1': "
                 "expected HOST[:PORT] (IPv4)"),
                ('[hook]\nfm_address = 10.0.0.5\n',
                 {'NVLINK_HOOK_FM_SOCKET': '/run/fm.sock'},
                 '{f}: [hook] fm_address and environment '
                 'NVLINK_HOOK_FM_SOCKET: give a Fabric Manager address or a '
                 'Unix socket, not both'),
                ('[hook]\npolcy = allow\n', {},
                 '{f}: [hook] polcy: unknown setting (known: policy, '
                 'fm_address, fm_socket, fm_library, fm_timeout, '
                 'fm_deadline, mapping, lock_dir, lock_timeout, sysfs_root, '
                 'log)'),
                ('', {'NVLINK_HOOK_LOG': 'journal'},
                 "environment NVLINK_HOOK_LOG: expected auto or syslog or "
                 "stderr, got 'journal'"),
                ('[DEFAULT]\npolicy = allow\n', {},
                 '{f}: unknown section [DEFAULT] (expected [hook])'),
                ('[hook]\npolicy = allow\npolicy = refuse\n', {},
                 "While reading from '{f}' [line 3]: option 'policy' in "
                 "section 'hook' already exists"),
                ('policy = allow\n', {},
                 "File contains no section headers. file: '{f}', line: 1 "
                 "'policy = allow\\n'")):
            path = self.write(text)
            exc = self.assertRaises(errors.NvlinkError, config.load,
                                    dict(environ, NVLINK_HOOK_CONFIG=path))
            self.assertEqual(message.format(f=path), str(exc))

    def test_named_file_must_exist(self):
        path = os.path.join(self.tmp, 'missing.conf')
        exc = self.assertRaises(errors.NvlinkError, config.load,
                                {'NVLINK_HOOK_CONFIG': path})
        self.assertEqual('cannot read configuration file %s: No such file or '
                         'directory' % path, str(exc))
