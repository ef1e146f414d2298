"""Per-GPU health and exclusion rules.

Rules (``reference/host-formats.md``, "Health rules"), judged per PCI
device:

- unhealthy: ``config`` reads all ones (fell off the bus); fatal AER
  errors; uncorrected ECC errors (volatile counters, nvidia-smi); nvidia-smi
  cannot open it (``Unable to determine the device handle for GPU ...: GPU
  is lost``).
- degraded: non-fatal AER errors; PCIe link narrower or slower than the
  device's maximum; retired pages or row remaps pending (nvidia-smi);
  temperature >= 90 C (nvidia-smi); fewer NVLinks than expected
  (``nvidia-smi topo -m``, or Fabric Manager's available/max counts);
  bound to the nvidia driver but absent from ``nvidia-smi -q``.
- Correctable AER errors alone change nothing.

Exclusion (the GPU must not join an NVLink passthrough group): vGPU in
use (mdev parent, SR-IOV VFs, nvidia-smi ``Host VGPU`` mode) or MIG mode
enabled.
"""

OK = 'ok'
DEGRADED = 'degraded'
UNHEALTHY = 'unhealthy'
HOT_C = 90


def _link_reason(link):
    parts = []
    if link.current_width is not None and link.max_width and \
            link.current_width < link.max_width:
        parts.append('x%d, maximum x%d' % (link.current_width,
                                           link.max_width))
    if link.current_speed and link.max_speed and \
            link.current_speed < link.max_speed:
        parts.append('%g GT/s, maximum %g GT/s'
                     % (link.current_speed, link.max_speed))
    if not parts:
        return None
    return ('PCIe link below its maximum: %s (GPUs may down-train when '
            'idle)' % '; '.join(parts))


def assess(gpu, smi=None, nvlink_reasons=(), lost=None):
    """Judge one GPU.

    :param gpu: :class:`sysfs.PciGpu`.
    :param smi: :class:`nvidia_smi.SmiGpu` for the same address, or None.
    :param nvlink_reasons: degraded reasons found elsewhere (the topology
        matrix, Fabric Manager, a GPU missing from ``nvidia-smi -q``).
    :param lost: why nvidia-smi cannot open the GPU (its message), or None.
    :returns: dict ``{'status': 'ok'|'degraded'|'unhealthy',
        'reasons': [str, ...]}``, unhealthy reasons first.
    """
    unhealthy, degraded = [], []
    if lost:
        unhealthy.append('nvidia-smi cannot open it: %s' % lost)
    if gpu.config_all_ones:
        unhealthy.append('config space reads all ones: the GPU fell off '
                         'the bus')
    if gpu.aer.get('fatal'):
        unhealthy.append('%d fatal AER errors (aer_dev_fatal)'
                         % gpu.aer['fatal'])
    if smi is not None and smi.ecc_uncorrected:
        unhealthy.append('uncorrected ECC errors since the driver loaded: '
                         '%s' % ', '.join('%s %d' % item
                                          for item in smi.ecc_uncorrected))
    if gpu.aer.get('nonfatal'):
        degraded.append('%d non-fatal AER errors (aer_dev_nonfatal)'
                        % gpu.aer['nonfatal'])
    link = _link_reason(gpu.link)
    if link:
        degraded.append(link)
    if smi is not None:
        if smi.pending_retirement:
            degraded.append('retired pages pending: %s'
                            % ', '.join(smi.pending_retirement))
        if smi.temperature_c is not None and smi.temperature_c >= HOT_C:
            degraded.append('temperature %d C (%d C or more)'
                            % (smi.temperature_c, HOT_C))
    degraded.extend(nvlink_reasons)
    status = UNHEALTHY if unhealthy else DEGRADED if degraded else OK
    return {'status': status, 'reasons': unhealthy + degraded}


def exclusion(gpu, smi=None):
    """Why a GPU must stay out of NVLink groups, or None.

    :param gpu: :class:`sysfs.PciGpu`; :param smi: its
        :class:`nvidia_smi.SmiGpu` or None.
    """
    if gpu.vgpu:
        return gpu.vgpu
    if smi is not None and smi.host_vgpu:
        return 'vGPU in use (nvidia-smi: Host VGPU mode)'
    if smi is not None and smi.mig_enabled:
        return 'MIG mode enabled (nvidia-smi)'
    return None
