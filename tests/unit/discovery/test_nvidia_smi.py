import os
import stat
import textwrap

import fixtures
from oslotest import base

from nvlink_placement.discovery import nvidia_smi
from nvlink_placement import errors
from tests.unit.discovery import helpers


def _query(name):
    path = helpers.fixture_path('nvidia-smi', name)
    return nvidia_smi.parse_query(helpers.read_fixture('nvidia-smi', name),
                                  path)


class TestParseQuery(base.BaseTestCase):

    def test_a100_driver555_top_level_module_id(self):
        report = _query('q-a100-sxm4-x4-driver555.txt')
        self.assertEqual([nvidia_smi.SmiGpu(
            address='0000:68:00.0', line=10, module_id=3,
            mig_enabled=False, host_vgpu=False, ecc_uncorrected=[],
            pending_retirement=[], temperature_c=25)], report.gpus)
        self.assertEqual({'0000:68:00.0': 3}, report.module_ids().ids)

    def test_h100_driver565_platform_info_module_id(self):
        report = _query('q-h100-sxm-x8-driver565.txt')
        self.assertEqual([nvidia_smi.SmiGpu(
            address='0000:18:00.0', line=10, module_id=2,
            mig_enabled=False, host_vgpu=False, ecc_uncorrected=[],
            pending_retirement=[], temperature_c=30)], report.gpus)

    def test_all_eight_h100_gpus_in_index_order(self):
        report = nvidia_smi.parse_query(helpers.h100_query_all_gpus(), 'q')
        self.assertEqual(helpers.BOARD2, report.module_ids().ids)
        self.assertEqual(list(helpers.BOARD2),
                         [g.address for g in report.gpus])

    def test_eight_digit_and_wide_domains(self):
        """Bus Ids of ``data/misc/bdf-domain-quirks.txt``."""
        quirks = helpers.read_fixture('misc', 'bdf-domain-quirks.txt')
        start = quirks.index('    PCI\n')
        block = quirks[start:quirks.index('# Title of that issue')]
        text = 'GPU 03F8CFDD:00:00.0\n' + block
        text += 'GPU 00000001:00:00.0\n    PCI\n'
        text += '        Bus Id            : 00000001:00:00.0\n'
        report = nvidia_smi.parse_query(text, 'q')
        self.assertEqual(['3f8cfdd:00:00.0', '0001:00:00.0'],
                         [g.address for g in report.gpus])

    def test_health_fields(self):
        text = textwrap.dedent('''\
            GPU 00000000:18:00.0
                MIG Mode
                    Current                           : Enabled
                    Pending                           : Enabled
                GPU Virtualization Mode
                    Virtualization Mode               : Host VGPU
                ECC Errors
                    Volatile
                        SRAM Correctable              : 4
                        SRAM Uncorrectable Parity     : 0
                        SRAM Uncorrectable SEC-DED    : 1
                        DRAM Correctable              : 0
                        DRAM Uncorrectable            : 2
                    Aggregate
                        DRAM Uncorrectable            : 9
                Retired Pages
                    Single Bit ECC                    : N/A
                    Double Bit ECC                    : N/A
                    Pending Page Blacklist            : Yes
                Remapped Rows
                    Correctable Error                 : 0
                    Uncorrectable Error               : 0
                    Pending                           : Yes
                Temperature
                    GPU Current Temp                  : 91 C
            GPU 00000000:2A:00.0
                ECC Errors
                    Volatile
                        Double Bit
                            Device Memory             : 3
                            Total                     : 3
                    Aggregate
                        Double Bit
                            Total                     : 7
            ''')
        first, second = nvidia_smi.parse_query(text, 'q').gpus
        self.assertTrue(first.mig_enabled)
        self.assertTrue(first.host_vgpu)
        self.assertEqual([('sram uncorrectable sec-ded', 1),
                          ('dram uncorrectable', 2)], first.ecc_uncorrected)
        self.assertEqual(['retired pages/pending page blacklist',
                          'remapped rows/pending'], first.pending_retirement)
        self.assertEqual(91, first.temperature_c)
        self.assertEqual([('double bit/device memory', 3),
                          ('double bit/total', 3)], second.ecc_uncorrected)
        self.assertIsNone(second.module_id)

    def test_not_query_output(self):
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                'No devices were found\n', 'q.txt')
        self.assertEqual('q.txt: no GPU block ("GPU 00000000:18:00.0") '
                         'found: is this `nvidia-smi -q` output?', str(exc))

    def test_bad_module_id_names_line(self):
        text = ('GPU 00000000:18:00.0\n    Platform Info\n'
                '        Module Id                         : two\n')
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                text, 'q.txt')
        self.assertEqual("q.txt: line 3: module id 'two' is not a number",
                         str(exc))

    def test_bad_bus_id_names_line(self):
        text = ('GPU 00000000:18:00.0\n    PCI\n'
                '        Bus Id                            : 18:00\n')
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                text, 'q.txt')
        self.assertIn('q.txt: line 3: ', str(exc))

    def test_repeated_gpu(self):
        text = 'GPU 00000000:18:00.0\nGPU 0000:18:00.0\n'
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                text, 'q.txt')
        self.assertEqual('q.txt: line 2: GPU 0000:18:00.0 was already '
                         'listed at line 1', str(exc))


class TestLostGpus(base.BaseTestCase):

    def test_lost_gpu_capture(self):
        name = 'q-hgx-a100-4gpu-lost-gpu.txt'
        report = nvidia_smi.parse_query(
            helpers.read_fixture('nvidia-smi', name), name)
        self.assertEqual(['0000:01:00.0', '0000:41:00.0', '0000:81:00.0'],
                         [g.address for g in report.gpus])
        self.assertEqual([1, 2, 3], [g.module_id for g in report.gpus])
        self.assertEqual(4, report.attached)
        self.assertEqual({'0000:c1:00.0': (
            663, 'GPU is lost. Reboot the system to recover this GPU')},
            report.lost)
        self.assertEqual(0, report.unaccounted())

    def test_wordings_and_unaccounted(self):
        text = ('Attached GPUs                             : 3\n'
                'Unable to determine the device handle for GPU0000:07:00.0: '
                'Unknown Error\n'
                'GPU 00000000:18:00.0\n'
                '    Module ID                             : 1\n')
        report = nvidia_smi.parse_query(text, 'q.txt')
        self.assertEqual({'0000:07:00.0': (2, 'Unknown Error')}, report.lost)
        self.assertEqual(['0000:18:00.0'], [g.address for g in report.gpus])
        self.assertEqual(1, report.unaccounted())

    def test_every_gpu_lost(self):
        report = nvidia_smi.parse_query(
            'Unable to determine the device handle for GPU 0000:C1:00.0: GPU '
            'is lost. Reboot the system to recover this GPU\n', 'q.txt')
        self.assertEqual([], report.gpus)
        self.assertEqual(['0000:c1:00.0'], list(report.lost))
        self.assertIsNone(report.attached)
        self.assertEqual(0, report.unaccounted())

    def test_lost_and_described(self):
        text = ('GPU 00000000:C1:00.0\n'
                'Unable to determine the device handle for GPU 0000:c1:00.0:'
                ' GPU is lost\n')
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                text, 'q.txt')
        self.assertEqual('q.txt: line 2: GPU 0000:c1:00.0 is reported lost, '
                         'but line 1 describes it', str(exc))

    def test_bad_attached_count(self):
        exc = self.assertRaises(errors.NvlinkError, nvidia_smi.parse_query,
                                'Attached GPUs : many\n', 'q.txt')
        self.assertEqual("q.txt: line 1: Attached GPUs 'many' is not a "
                         "number", str(exc))


class TestRun(base.BaseTestCase):
    """nvidia-smi as a program on PATH (a shell script standing in)."""

    def _install(self, body):
        bindir = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(bindir, 'nvidia-smi')
        with open(path, 'w') as handle:
            handle.write('#!/bin/sh\n' + body)
        os.chmod(path, stat.S_IRWXU)
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', bindir + os.pathsep + os.environ.get('PATH', '')))

    def test_not_installed(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', self.useFixture(fixtures.TempDir()).path))
        self.assertEqual((None, None), nvidia_smi.run(['-q']))

    def test_output(self):
        self._install('echo "args: $*"\n')
        self.assertEqual(('args: topo -m\n', None),
                         nvidia_smi.run(['topo', '-m']))

    def test_no_devices(self):
        self._install('echo "No devices were found"\nexit 6\n')
        self.assertEqual((None, '`nvidia-smi -q` exited with 6 (No devices '
                          'were found) and was not used'),
                         nvidia_smi.run(['-q']))

    def test_lost_gpu_output_is_kept_for_query(self):
        self._install('echo "GPU 00000000:18:00.0"\n'
                      'echo "Unable to determine the device handle for GPU '
                      '0000:C1:00.0: GPU is lost. Reboot the system to '
                      'recover this GPU" >&2\nexit 15\n')
        text, note = nvidia_smi.run(['-q'], keep_failed=True)
        self.assertEqual('GPU 00000000:18:00.0\n\nUnable to determine the '
                         'device handle for GPU 0000:C1:00.0: GPU is lost. '
                         'Reboot the system to recover this GPU\n', text)
        self.assertEqual('`nvidia-smi -q` exited with 15 (GPU '
                         '00000000:18:00.0); its output was read', note)
        self.assertIsNone(nvidia_smi.run(['-q'])[0])

    def test_timeout(self):
        self._install('exec sleep 10\n')
        self.assertEqual((None, '`nvidia-smi topo -m` timed out after 0.2 s '
                          'and was not used'),
                         nvidia_smi.run(['topo', '-m'], timeout=0.2))
