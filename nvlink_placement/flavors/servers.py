"""Nova's servers and the PCI devices their flavors ask for.

``check`` looks for split allocations: consumers holding GPUs of two
NVLink domains. Placement has no listing of consumers, so it learns them
per host (the compute node's allocations); Nova's server list names every
instance, its compute node and its flavor in one paged read, so ``check``
needs Placement only for the servers that can be split: those whose
flavor asks for two PCI devices or more (:func:`read`).

Source of the facts: ``GET /servers/detail`` with ``all_tenants``
(admin), paged by ``limit``/``marker`` with a ``servers_links`` "next"
link while more are left (Nova's ``[api] max_limit``, 1000 by default,
caps a page); from microversion 2.47 each server embeds its flavor with
``extra_specs`` (``nova/api/openstack/compute/views/servers.py``); the
node, ``OS-EXT-SRV-ATTR:hypervisor_hostname``, is the name of its compute
node resource provider in Placement (``nova/compute/resource_tracker.py``
reports one per node under that name).
"""

import contextlib
import dataclasses
import urllib.parse

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc

from nvlink_placement import errors
from nvlink_placement.flavors import generate

#: The microversion of the server list: flavors embedded with extra specs.
MICROVERSION = '2.47'
#: Servers per page asked for (Nova caps it at its ``[api] max_limit``).
PAGE = 1000


@dataclasses.dataclass(frozen=True)
class Server:
    """One instance as ``check`` needs it.

    :ivar uuid: the server id, which is its Placement consumer.
    :ivar node: its compute node (hypervisor hostname), or None (not on a
        host: building, shelved offloaded).
    :ivar devices: PCI devices its flavor asks for, or None when not known
        (extra specs hidden by policy, a value this module cannot read).
    :ivar aliases: tuple of the ``[pci] alias`` names its flavor asks
        devices of (sorted), or None when not known. Which resource class
        an alias gives is Nova's configuration, not in the server list:
        ``check`` learns it from the allocations of a server of that alias.
    :ivar flavor: its flavor's name (``original_name``), or None.
    """
    uuid: str
    node: object
    devices: object
    aliases: object = None
    flavor: object = None


def pci_aliases(extra_specs):
    """PCI devices per alias a flavor's ``pci_passthrough:alias`` asks for.

    ``alias:count`` entries, comma separated (upstream), each optionally
    followed by ``:group`` (the named groups of the MOSK dialect).

    :param extra_specs: dict, or None when the API did not show them.
    :returns: dict alias name -> count (empty without the key), or None
        when ``extra_specs`` is None or the value is not of that form.
    """
    if extra_specs is None:
        return None
    value = extra_specs.get(generate.ALIAS_KEY)
    if value is None:
        return {}
    found = {}
    for entry in str(value).split(','):
        parts = entry.strip().split(':')
        if len(parts) not in (2, 3) or not parts[0] or \
                not parts[1].strip().isdigit():
            return None
        found[parts[0]] = found.get(parts[0], 0) + int(parts[1])
    return found


def pci_devices(extra_specs):
    """PCI devices a flavor asks for, all aliases together.

    :returns: int (0 without the key), or None (see :func:`pci_aliases`).
    """
    found = pci_aliases(extra_specs)
    return None if found is None else sum(found.values())


def from_body(server):
    """A :class:`Server` from one entry of ``GET /servers/detail``."""
    flavor = server.get('flavor')
    specs = flavor.get('extra_specs') if isinstance(flavor, dict) else None
    aliases = pci_aliases(specs)
    return Server(server['id'],
                  server.get('OS-EXT-SRV-ATTR:hypervisor_hostname'),
                  None if aliases is None else sum(aliases.values()),
                  None if aliases is None else tuple(sorted(aliases)),
                  flavor.get('original_name') if isinstance(flavor, dict)
                  else None)


def read(compute):
    """Every server of every project, in pages of :data:`PAGE`.

    :param compute: a keystoneauth adapter on the compute API (an
        openstacksdk connection's ``compute`` proxy).
    :returns: ``(servers, requests)``: :class:`Server` list and the number
        of pages read.
    :raises keystoneauth1.exceptions.ClientException: the API refused or
        did not answer (not an admin: ``all_tenants`` is refused with 403).
    """
    servers, requests, marker = [], 0, None
    while True:
        query = {'all_tenants': 'True', 'limit': PAGE}
        if marker:
            query['marker'] = marker
        response = compute.get('/servers/detail?' +
                               urllib.parse.urlencode(query),
                               microversion=MICROVERSION, raise_exc=True)
        requests += 1
        body = response.json()
        page = body.get('servers', [])
        servers.extend(from_body(s) for s in page)
        more = any(link.get('rel') == 'next'
                   for link in body.get('servers_links', []))
        if not page or not more:
            return servers, requests
        marker = page[-1]['id']


#: Auth types without a service catalog: every service would be asked at
#: the one endpoint they are given (Placement's, for this tool).
NO_CATALOG = ('admin_token', 'token_endpoint', 'none', 'noauth',
              'http_basic')


def has_compute_endpoint(config):
    """Whether an openstacksdk ``CloudRegion`` can name a compute API."""
    return bool(config.get_endpoint('compute')) or \
        config.config.get('auth_type') not in NO_CATALOG


class NotRead(errors.NvlinkError):
    """The compute API's server list was not read.

    ``str()`` says why, on one line; ``detail`` is the error met, or None
    when the cloud names no compute API.
    """

    def __init__(self, message, detail=None):
        super().__init__(message)
        self.detail = detail


def from_compute_api(connect, timeout, only_named=True):
    """Every server of every project, from an OSC session's compute API.

    What ``check --consumers`` and ``simulate defrag`` share.

    :param connect: callable() returning an openstacksdk ``Connection``
        (it authenticates; it may raise ``NvlinkError``: no credentials).
    :param timeout: seconds per request (:func:`bounded`), or None.
    :param only_named: do not ask when the cloud names no compute API
        (:func:`has_compute_endpoint`); False asks anyway.
    :returns: ``(servers, pages)``, as :func:`read`.
    :raises NotRead: no compute API named (``only_named``), no credentials,
        or the API refused or did not answer.
    """
    try:
        sdk = connect()
        if only_named and not has_compute_endpoint(sdk.config):
            raise NotRead(
                'no compute API: auth type %s has no service catalog and no '
                'compute_endpoint_override is set'
                % sdk.config.config.get('auth_type'))
        with bounded(sdk.session, timeout):
            return read(sdk.compute)
    except NotRead:
        raise
    except (ks_exc.ClientException, sdk_exc.SDKException,
            errors.NvlinkError) as exc:
        detail = ' '.join(str(exc).split())
        raise NotRead('the compute API\'s server list was not read: %s'
                      % detail, detail) from None


@contextlib.contextmanager
def bounded(session, timeout):
    """Give each request of keystoneauth ``session`` ``timeout`` seconds.

    The session's own timeout, so that it also bounds the version
    discovery keystoneauth runs when openstacksdk makes its compute proxy
    (before any page is asked for). None or 0 leaves it as it is.
    """
    kept = session.timeout
    if timeout:
        session.timeout = timeout
    try:
        yield
    finally:
        session.timeout = kept


def by_node(servers):
    """``{node: [Server]}`` of the servers on a node."""
    out = {}
    for server in servers:
        if server.node:
            out.setdefault(server.node, []).append(server)
    return out
