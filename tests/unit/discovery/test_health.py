from oslotest import base

from nvlink_placement.discovery import health
from nvlink_placement.discovery import nvidia_smi
from nvlink_placement.discovery import sysfs


def _gpu(**kwargs):
    values = dict(address='0000:18:00.0', vendor_id='10de',
                  device_id='2330', link=sysfs.PciLink(16, 16, 32.0, 32.0),
                  aer={'correctable': 0, 'nonfatal': 0, 'fatal': 0},
                  config_all_ones=False)
    values.update(kwargs)
    return sysfs.PciGpu(**values)


def _smi(**kwargs):
    return nvidia_smi.SmiGpu(address='0000:18:00.0', line=1, **kwargs)


class TestAssess(base.BaseTestCase):

    def test_ok(self):
        self.assertEqual({'status': 'ok', 'reasons': []},
                         health.assess(_gpu(), _smi(temperature_c=89)))

    def test_correctable_aer_alone_is_ok(self):
        gpu = _gpu(aer={'correctable': 12, 'nonfatal': 0, 'fatal': 0})
        self.assertEqual('ok', health.assess(gpu)['status'])

    def test_absent_aer_files_and_unknown_link_are_ok(self):
        gpu = _gpu(aer={'correctable': None, 'nonfatal': None,
                        'fatal': None}, link=sysfs.PciLink(),
                   config_all_ones=None)
        self.assertEqual({'status': 'ok', 'reasons': []}, health.assess(gpu))

    def test_unhealthy_rules(self):
        gpu = _gpu(config_all_ones=True,
                   aer={'correctable': 0, 'nonfatal': 1, 'fatal': 2})
        smi = _smi(ecc_uncorrected=[('dram uncorrectable', 3)])
        self.assertEqual({'status': 'unhealthy', 'reasons': [
            'config space reads all ones: the GPU fell off the bus',
            '2 fatal AER errors (aer_dev_fatal)',
            'uncorrected ECC errors since the driver loaded: dram '
            'uncorrectable 3',
            '1 non-fatal AER errors (aer_dev_nonfatal)']},
            health.assess(gpu, smi))

    def test_lost_gpu_is_unhealthy(self):
        self.assertEqual({'status': 'unhealthy', 'reasons': [
            'nvidia-smi cannot open it: GPU is lost. Reboot the system to '
            'recover this GPU']}, health.assess(
                _gpu(), None, (),
                'GPU is lost. Reboot the system to recover this GPU'))

    def test_degraded_rules(self):
        gpu = _gpu(link=sysfs.PciLink(8, 16, 16.0, 32.0))
        smi = _smi(temperature_c=90,
                   pending_retirement=['remapped rows/pending'])
        self.assertEqual({'status': 'degraded', 'reasons': [
            'PCIe link below its maximum: x8, maximum x16; 16 GT/s, maximum '
            '32 GT/s (GPUs may down-train when idle)',
            'retired pages pending: remapped rows/pending',
            'temperature 90 C (90 C or more)',
            'NVLink to 0000:2a:00.0: NV3 below the expected NV4']},
            health.assess(gpu, smi, ['NVLink to 0000:2a:00.0: NV3 below '
                                     'the expected NV4']))

    def test_slower_link_only(self):
        gpu = _gpu(link=sysfs.PciLink(16, 16, 2.5, 32.0))
        self.assertEqual(['PCIe link below its maximum: 2.5 GT/s, maximum 32 '
                          'GT/s (GPUs may down-train when idle)'],
                         health.assess(gpu)['reasons'])


class TestExclusion(base.BaseTestCase):

    def test_rules(self):
        self.assertIsNone(health.exclusion(_gpu(), _smi()))
        self.assertEqual('vGPU in use (mdev parent, 2 mdev instances)',
                         health.exclusion(_gpu(vgpu='vGPU in use (mdev '
                                               'parent, 2 mdev instances)')))
        self.assertEqual('vGPU in use (nvidia-smi: Host VGPU mode)',
                         health.exclusion(_gpu(), _smi(host_vgpu=True)))
        self.assertEqual('MIG mode enabled (nvidia-smi)',
                         health.exclusion(_gpu(), _smi(mig_enabled=True)))
