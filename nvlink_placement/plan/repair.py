"""What repairs each row of ``check``: the command to run, or what to do.

Every drift kind ``check`` reports names its repair (the ``repair``
column), and that command repairs it:

- an action row of a host of the topology: ``openstack nvlink reshape
  --topology FILE --host H``; ``create-trait`` (no host): the same
  without ``--host``, or with check's own ``--host`` options;
- an action row of a host the topology does not describe (``check
  --all``: its tree holds groups of the tool): ``openstack nvlink flatten
  --host H``;
- no command repairs the rest, and the text says so ("not automatic: ...")
  and what to do: ``unknown-gpu``, list the GPU in the topology, then
  reshape; ``member-traits``, set nova-compute's ``[pci] device_spec`` as
  ``nova-config --host H`` prints and restart it; ``excluded-gpu``, the
  same (those entries match no excluded GPU; Nova then deletes its
  provider); ``missing-reservation``
  of an unhealthy GPU in no NVLink group,
  reserve it by hand; ``split-allocation``, migrate or resize the
  instance.

Commands repeat check's ``--no-health`` and ``--os-nvlink-gpus-file-dir``;
cloud options (``--os-cloud`` ...) are the operator's. After ``check
--snapshot FILE`` they act on that file (``--snapshot FILE --save-snapshot
FILE.repaired.json``), so a pasted command never writes to a live cloud.
Pure: texts from the row and what check ran with.
"""

import dataclasses
import shlex

from nvlink_placement.plan import actions as act
from nvlink_placement.topology import pci

#: How a row's repair text starts when no command repairs it.
MANUAL = 'not automatic: '


@dataclasses.dataclass(frozen=True)
class Context:
    """What ``check`` ran with.

    :ivar topology: the topology path as given.
    :ivar topology_hosts: names of the hosts the topology describes.
    :ivar hosts: check's ``--host`` selection (empty: every host).
    :ivar reshape_options: options to repeat for reshape (``--no-health``).
    :ivar global_options: ``openstack`` options to repeat
        (``--os-nvlink-gpus-file-dir DIR``).
    :ivar snapshot: the ``--snapshot`` file check read, or None (a live
        cloud): commands then act on it, writing the repaired state next
        to it (:func:`repaired_path`), never on a live cloud.
    """
    topology: str
    topology_hosts: frozenset
    hosts: tuple = ()
    reshape_options: tuple = ()
    global_options: tuple = ()
    snapshot: str = None

    def command(self, verb, *args):
        if self.snapshot:
            args += ('--snapshot', self.snapshot, '--save-snapshot',
                     repaired_path(self.snapshot))
        return shlex.join(('openstack',) + tuple(self.global_options) +
                          ('nvlink', verb) + args)

    def reshape(self, hosts):
        args = ['--topology', self.topology]
        for host in hosts:
            args += ['--host', host]
        return self.command('reshape', *(args + list(self.reshape_options)))


def repaired_path(path):
    """Where a repair of snapshot ``path`` writes, never ``path`` itself.

    ``prod.json`` -> ``prod.repaired.json``.
    """
    stem, ext = path[:-5], '.json'
    if not path.endswith('.json'):
        stem, ext = path, ''
    return stem + '.repaired' + ext


def text(action, context):
    """The repair of one ``check`` row (:class:`act.Action`)."""
    if action.drift == act.SPLIT_ALLOCATION:
        return (MANUAL + 'move instance %s into one NVLink domain: '
                'openstack server migrate %s (or resize it to a flavor of '
                'this tool); no Placement write can, its allocation stays '
                'where it is' % (action.consumer, action.consumer))
    if action.host and action.host not in context.topology_hosts:
        return context.command('flatten', '--host', action.host)
    if not action.action and action.drift == act.UNKNOWN_GPU:
        address = pci.address_of_provider(action.host, action.provider)
        return (MANUAL + 'list %s under hosts.%s in %s (in an NVLink group, '
                'or excluded), then: %s' % (
                    address, action.host, context.topology,
                    context.reshape([action.host])))
    if not action.action and action.drift == act.MEMBER_TRAITS:
        return (MANUAL + 'nova-compute on %s writes them: set its [pci] '
                'device_spec as %s prints, restart nova-compute, then check '
                'again' % (action.host, context.command(
                    'nova-config', '--topology', context.topology,
                    '--host', action.host, '--alias', 'ALIAS', '--ini')))
    if not action.action and action.drift == act.EXCLUDED_GPU:
        return (MANUAL + 'nova-compute on %s passes the excluded GPU %s '
                'through: set its [pci] device_spec as %s prints (no entry '
                'matches an excluded GPU), restart nova-compute (Nova then '
                'deletes the provider; not while an instance holds it), then '
                'check again' % (
                    action.host, pci.address_of_provider(action.host,
                                                         action.provider),
                    context.command('nova-config', '--topology',
                                    context.topology, '--host', action.host,
                                    '--alias', 'ALIAS', '--ini')))
    if not action.action and action.drift == act.MISSING_RESERVATION:
        return (MANUAL + 'the GPU is in no NVLink group, so reserve it by '
                'hand: reserved = total on the inventory of %s (openstack '
                'resource provider inventory class set)' % action.provider)
    if not action.host:
        return context.reshape(context.hosts)
    return context.reshape([action.host])
