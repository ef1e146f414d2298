"""Configuration of nvlink-partition-hook: an INI file and overrides.

The file (default ``/etc/nvlink-placement/hook.conf``, or the one named by
``NVLINK_HOOK_CONFIG``) has one section ``[hook]``::

    [hook]
    policy = refuse            # or allow
    fm_socket = /run/nvidia-fabricmanager/fm.sock  # or fm_address
    fm_library = /usr/lib/x86_64-linux-gnu/libnvfm.so.1
    fm_timeout = 5             # seconds, FM's connection timeout
    fm_deadline = 30           # seconds the hook may hold up a VM start:
                               # lock wait and FM conversation together
    mapping = /run/nvidia-fabricmanager/gpu-pci-module-mapping.json
    lock_dir = /run/nvlink-placement
    lock_timeout = 60          # seconds to wait for another hook (the
                               # wait also ends at fm_deadline)
    sysfs_root = /sys
    log = auto                 # syslog, stderr, or auto (syslog when
                               # /dev/log exists)

Every key may be overridden by the environment variable ``NVLINK_HOOK_``
plus the key in upper case (``NVLINK_HOOK_POLICY=allow``). libvirt runs
hooks with a fixed environment (``LC_ALL``, ``PATH``, ``HOME``, ``USER``,
``LOGNAME``: libvirt ``docs/hooks.rst``, "Return codes and logging"), so
overrides only reach the hook from a wrapper script that sets them. A
missing default file means all defaults; a missing file named by
``NVLINK_HOOK_CONFIG`` is an error. Unknown sections and keys are errors.
The file, like every file the hook trusts, must be root's and writable by
root only, and so must its directories
(:mod:`nvlink_placement.fabric.trust`). Times are seconds above 0, at
most an hour.

``fm_deadline`` is the one bound on how long the hook holds up a VM
start, counted from when it has read the domain XML: waiting for the
host lock counts against it, and the Fabric Manager conversation gets
what is left. ``lock_timeout`` can only end the lock wait sooner; at or
above ``fm_deadline`` it changes nothing.
"""

import configparser
import dataclasses
import os

from nvlink_placement.discovery import files
from nvlink_placement.discovery import module_ids
from nvlink_placement import documents
from nvlink_placement import errors
from nvlink_placement.fabric import client
from nvlink_placement.fabric import trust

DEFAULT_FILE = '/etc/nvlink-placement/hook.conf'
SECTION = 'hook'
ENV_PREFIX = 'NVLINK_HOOK_'
ENV_FILE = ENV_PREFIX + 'CONFIG'
POLICIES = ('refuse', 'allow')
LOG_DESTINATIONS = ('auto', 'syslog', 'stderr')


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the hook needs to know.

    :ivar policy: ``refuse``: a VM whose partition cannot be activated
        does not start (the hook exits 1); ``allow``: it starts without
        NVLink (the hook logs a warning and exits 0).
    :ivar fm_address: FM's TCP ``HOST[:PORT]`` (default 127.0.0.1:6666),
        or :ivar fm_socket: its Unix socket; at most one of them.
    :ivar fm_library: libnvfm to load (None: the loader's search).
    :ivar fm_timeout: FM connection timeout, seconds (libnvfm's own).
    :ivar fm_deadline: the most seconds the hook holds up a VM start,
        from when it has read the domain XML: the wait for the host lock
        counts against it, and the whole Fabric Manager conversation
        (load libnvfm, connect, read, act, disconnect) gets what is left;
        then it stops and applies the policy.
    :ivar mapping: the BDF -> module id mapping file; its addresses must
        be NVIDIA GPUs of this host.
    :ivar lock_dir: where ``hook.lock`` lives.
    :ivar lock_timeout: seconds to wait for another hook; the wait ends
        at ``fm_deadline`` anyway, so this can only make it shorter.
    :ivar sysfs_root: where sysfs is mounted (tells NVIDIA GPUs from
        other PCI devices).
    :ivar log: ``auto``, ``syslog`` or ``stderr``.
    """

    policy: str = 'refuse'
    fm_address: str | None = None
    fm_socket: str | None = None
    fm_library: str | None = None
    fm_timeout: float = client.DEFAULT_TIMEOUT_MS / 1000.0
    fm_deadline: float = 30.0
    mapping: str = module_ids.DEFAULT_MAPPING_FILE
    lock_dir: str = '/run/nvlink-placement'
    lock_timeout: float = 60.0
    sysfs_root: str = '/sys'
    log: str = 'auto'


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def _choice(options):
    def check(text):
        if text not in options:
            raise ValueError('expected %s, got %r'
                             % (' or '.join(options), text))
        return text
    return check


def _address(text):
    try:
        return client.parse_inet_address(text)
    except errors.NvlinkError as exc:
        raise ValueError(str(exc))


_CONVERT = {'policy': _choice(POLICIES), 'log': _choice(LOG_DESTINATIONS),
            'fm_timeout': files.seconds, 'fm_deadline': files.seconds,
            'lock_timeout': files.seconds,
            'fm_address': _address}


def settings_from(values):
    """Build :class:`Settings` from ``(key, text, where)`` triples.

    Later triples win; an empty text means the default. ``where`` names
    the origin in messages (``/etc/.../hook.conf: [hook] policy``).

    :raises NvlinkError: for an unknown key, an invalid value, or both
        ``fm_address`` and ``fm_socket``.
    """
    chosen, origin = {}, {}
    for key, text, where in values:
        if key not in _FIELDS:
            raise errors.NvlinkError('%s: unknown setting (known: %s)'
                                     % (where, ', '.join(_FIELDS)))
        text = text.strip()
        if not text:
            chosen.pop(key, None)
            continue
        try:
            chosen[key] = _CONVERT.get(key, str)(text)
        except ValueError as exc:
            raise errors.NvlinkError('%s: %s' % (where, exc))
        origin[key] = where
    if 'fm_address' in chosen and 'fm_socket' in chosen:
        raise errors.NvlinkError('%s and %s: give a Fabric Manager address '
                                 'or a Unix socket, not both'
                                 % (origin['fm_address'],
                                    origin['fm_socket']))
    return Settings(**chosen)


def parse_file(text, source):
    """The ``(key, text, where)`` triples of a configuration file.

    :raises NvlinkError: for a file that is not INI, a section other than
        ``[hook]``, or a key given twice.
    """
    # No DEFAULT section: a [DEFAULT] in the file is an unknown section.
    parser = configparser.ConfigParser(interpolation=None,
                                       inline_comment_prefixes=('#', ';'),
                                       default_section='\0')
    try:
        parser.read_string(text, source)
    except configparser.Error as exc:
        raise errors.NvlinkError(documents.clip(' '.join(str(exc).split()),
                                                300))
    extra = [s for s in parser.sections() if s != SECTION]
    if extra:
        raise errors.NvlinkError('%s: unknown section [%s] (expected [%s])'
                                 % (source, extra[0], SECTION))
    if not parser.has_section(SECTION):
        return []
    return [(key, text, '%s: [%s] %s' % (source, SECTION,
                                         documents.clip(key)))
            for key, text in parser.items(SECTION)]


def load(environ):
    """Read the file and apply the environment overrides.

    :param environ: mapping of environment variables (``os.environ``).
    :returns: :class:`Settings`.
    :raises NvlinkError: see :func:`parse_file` and :func:`settings_from`,
        or when the file named by ``NVLINK_HOOK_CONFIG`` cannot be read
        or is not trusted (:func:`trust.check`).
    """
    path = environ.get(ENV_FILE) or DEFAULT_FILE
    values = []
    if path != DEFAULT_FILE or os.path.exists(path):
        trust.check(path, 'configuration file')
        values = parse_file(files.read_text(path, 'configuration file'),
                            path)
    values.extend((name[len(ENV_PREFIX):].lower(), text,
                   'environment %s' % name)
                  for name, text in sorted(environ.items())
                  if name.startswith(ENV_PREFIX) and name != ENV_FILE)
    return settings_from(values)
