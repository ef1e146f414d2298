"""nvlink-partition-hook: libvirt qemu hook for Fabric Manager partitions.

libvirt runs ``/etc/libvirt/hooks/qemu GUEST OPERATION SUB-OPERATION EXTRA``
with the guest's domain XML on standard input (libvirt ``docs/hooks.rst``).
This script acts on two of those calls and exits 0 at once on the others,
without reading its input:

``GUEST prepare begin -``
    before libvirt sets up the guest: activate the Fabric Manager
    partition made of exactly the guest's baseboard GPUs. With policy
    ``refuse`` a failure exits 1 and libvirt does not start the guest
    (it logs what the hook wrote on standard error).
``GUEST release end REASON``
    after libvirt released the guest's resources: deactivate it.

Standard output stays empty: for ``migrate begin`` and ``restore begin``
(and for every script in ``/etc/libvirt/hooks/qemu.d/``) libvirt reads it
as a replacement domain XML, and empty output keeps the XML unchanged.
Settings: ``/etc/nvlink-placement/hook.conf`` (see the partition hook
chapter of the documentation). Exit status: 0 done or nothing to do,
1 failure (refused start), 3 wrong arguments (the usage error status of
every nvlink-placement command; libvirt only tells zero from non-zero).
Every failure, domain XML that cannot be read included, is one line and
follows the policy. fm_deadline bounds how long the hook holds up a
start: waiting for another hook's lock counts against it.

Runs on a compute node with nothing but Python 3.10+: it imports no
OpenStack library.
"""

import logging
import logging.handlers
import os
import sys
import time

from nvlink_placement import errors
from nvlink_placement import helptext
from nvlink_placement.hook import activation
from nvlink_placement.hook import config
from nvlink_placement.hook import domain

PROG = 'nvlink-partition-hook'
SYSLOG_SOCKET = '/dev/log'
# (operation, sub-operation) -> what to do; libvirt docs/hooks.rst.
ACTIONS = {('prepare', 'begin'): activation.START,
           ('release', 'end'): activation.STOP}
USAGE = ('usage: %s GUEST OPERATION SUB-OPERATION [EXTRA] < DOMAIN-XML\n'
         % PROG)
# Domain XML of the largest guests is a few hundred KB.
MAX_XML = 16 * 1024 * 1024


def make_logger(destination, stream):
    """The hook's logger, writing to syslog and/or ``stream``.

    With syslog (``syslog``, or ``auto``, when ``/dev/log`` exists):
    everything to syslog (facility daemon), warnings and errors also to
    ``stream``, since libvirt logs a failing hook's standard error.
    Otherwise (``stderr``, or no ``/dev/log``) everything to ``stream``;
    ``syslog`` without ``/dev/log`` says so first.
    """
    log = logging.getLogger(PROG)
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    log.propagate = False
    log.setLevel(logging.INFO)
    to_stream = logging.StreamHandler(stream)
    to_stream.setFormatter(logging.Formatter(
        PROG + ': %(levelname)s: %(message)s'))
    log.addHandler(to_stream)
    if destination == 'stderr':
        return log
    if not os.path.exists(SYSLOG_SOCKET):
        if destination == 'syslog':
            log.warning('log = syslog, but %s does not exist: logging to '
                        'standard error' % SYSLOG_SOCKET)
        return log
    try:
        to_syslog = logging.handlers.SysLogHandler(
            SYSLOG_SOCKET, logging.handlers.SysLogHandler.LOG_DAEMON)
    except OSError as exc:
        log.warning('cannot log to %s (%s): logging to standard error'
                    % (SYSLOG_SOCKET, exc.strerror or exc))
        return log
    to_syslog.setFormatter(logging.Formatter(
        PROG + '[%(process)d]: %(message)s'))
    log.addHandler(to_syslog)
    to_stream.setLevel(logging.WARNING)
    return log


def _read_xml(stream):
    """Up to :data:`MAX_XML` bytes of the domain XML from ``stream``."""
    data = getattr(stream, 'buffer', stream).read(MAX_XML + 1)
    if len(data) > MAX_XML:
        raise errors.NvlinkError('the domain XML is larger than %d bytes'
                                 % MAX_XML)
    return data


def _guest(argv):
    """The guest and the problem reading its XML (None when there is none).

    Whatever the reason the XML cannot be read, the problem is an
    ``NvlinkError`` and the guest has no devices.
    """
    name = domain.printable(argv[0])
    source = 'domain XML of guest %s' % name
    try:
        guest = domain.parse(_read_xml(sys.stdin), source)
    except Exception as exc:
        return domain.Domain(name, ()), (
            exc if isinstance(exc, errors.NvlinkError) else
            errors.NvlinkError('%s: %s' % (source, activation.describe(exc))))
    return guest._replace(name=guest.name or name), None


def main(argv=None):
    """Console script entry point; returns the exit status.

    Once the configuration is read every failure, expected or not, takes
    the policy path with a one-line message; before that (no policy
    known) it exits 1 with a one-line message. A domain XML that cannot
    be read is such a failure, found first and applied once the policy is
    known.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (['-h'], ['--help']):
        sys.stdout.write(USAGE + '\n' +
                         helptext.plain(__doc__.split('\n\n', 1)[1]))
        return 0
    if len(argv) < 3:
        sys.stderr.write(USAGE)
        return errors.USAGE_ERROR
    action = ACTIONS.get((argv[1], argv[2]))
    if action is None:
        return 0
    try:
        guest, problem = _guest(argv)
        # fm_deadline counts from here: libvirt has written the XML.
        started = time.monotonic()
        if problem is None and not guest.pci_addresses:
            return 0
        settings = config.load(os.environ)
    except Exception as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, activation.describe(exc)))
        return 1
    log = make_logger(settings.log, sys.stderr)
    if problem is not None:
        return activation.failed(settings, action, guest.name, problem, log)
    return activation.run(settings, action, guest, log, started)
