"""A real Placement in process: ``openstack-placement`` on SQLite in memory.

Used by every ``--snapshot`` command and by the tests. Each
:class:`EmbeddedPlacement` gets a fresh database. Requests go through
Placement's own WSGI application via wsgi-intercept (what
``placement.direct.PlacementDirect`` does), so the code under test sends
the same HTTP requests as against a live cloud. Two differences from
``PlacementDirect``, both for speed and neither visible in the API: the
application is built once (wsgi-intercept would build it for every
connection, about 20 ms each), and the engine does not yield the thread at
every connection check-in (oslo.db's ``thread_checkin``, meant for
eventlet: a scheduler round trip per query on a busy machine).

Snapshots are bulk-loaded into Placement's tables
(:mod:`nvlink_placement.placement.snapshot_db`) and exported the same
way, and the offline ``check`` and ``reshape`` read and write them
directly (:meth:`EmbeddedPlacement.state`, :meth:`allocations`,
:mod:`nvlink_placement.plan.bulk`); for a schema revision that module
does not know, all of it goes through the API instead, with a warning.

The wide-tree settings from design.rst s6 are on, so allocation
candidate queries over many identical GPUs cannot hang the tool:
``[placement] max_allocation_candidates = 1000``,
``allocation_candidates_generation_strategy = breadth-first`` and
``[workarounds] optimize_for_wide_provider_trees = True``, each where the
installed openstack-placement has it (11.0.1, 2024.1, lacks the last).
"""

import logging
import os
import threading
import uuid

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from oslo_config import cfg
from oslo_db.sqlalchemy import engines
import requests
import sqlalchemy

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import snapshot_api
from nvlink_placement.placement import snapshot_db

LOG = logging.getLogger(__name__)
MAX_ALLOCATION_CANDIDATES = 1000
#: The wide-tree settings (group, option, value), each set where the
#: installed Placement registers it.
WIDE_TREE_OVERRIDES = (
    ('placement', 'max_allocation_candidates', MAX_ALLOCATION_CANDIDATES),
    ('placement', 'allocation_candidates_generation_strategy',
     'breadth-first'),
    ('workarounds', 'optimize_for_wide_provider_trees', True),
)
_CONFIGURED = False


def _config():
    from placement import conf as placement_conf
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_override('connection', 'sqlite://', group='placement_database')
    conf.set_override('sync_on_startup', False, group='placement_database')
    conf.set_override('auth_strategy', 'noauth2', group='api')
    for group, option, value in WIDE_TREE_OVERRIDES:
        # Only what the installed Placement has: openstack-placement
        # 11.0.1 (2024.1) has no [workarounds]
        # optimize_for_wide_provider_trees (13.0.1 and 15.0.0 on have).
        if group in conf and option in conf[group]:
            conf.set_override(option, value, group=group)
    conf([], project='placement', default_config_files=[],
         default_config_dirs=[])
    return conf


def _adopt(dbapi_connection, connection_record, connection_proxy):
    """Mark the connection as this process's (see oslo.db's guard)."""
    connection_record.info['pid'] = os.getpid()


class EmbeddedClient(pc.PlacementClient):
    """The :class:`PlacementClient` of an embedded Placement.

    :ivar placement: its :class:`EmbeddedPlacement` (bulk ``load`` and
        ``export``).
    """

    def __init__(self, adapter, placement):
        super().__init__(adapter, lock=threading.Lock(),
                         description='embedded Placement')
        self.placement = placement


class EmbeddedPlacement(object):
    """Context manager yielding an :class:`EmbeddedClient` on a fresh DB.

    :param document: optional validated snapshot loaded before the first
        request (see :meth:`load`).

    Not re-entrant; one at a time per process (wsgi-intercept and the
    database facade are process-wide). Requests are serialized with a lock
    because the in-memory database is one shared SQLite connection.

    :ivar engine: the SQLAlchemy engine of the database.
    :ivar client: the :class:`EmbeddedClient` (while entered).
    :ivar url: the endpoint wsgi-intercept answers (while entered).
    """

    def __init__(self, document=None):
        self._document = document
        self._stack = []
        self.engine = None
        self.client = None
        self.url = None

    def __enter__(self):
        try:
            return self._enter()
        except BaseException:
            # Undo what was set up (the patched engine above all: left in
            # place, the next EmbeddedPlacement of this process could not
            # patch its own), then let the error through.
            self.__exit__(None, None, None)
            raise

    def _enter(self):
        from placement.db.sqlalchemy import migration
        from placement import db_api
        from placement import deploy
        from placement.objects import resource_class
        from placement.objects import trait
        from wsgi_intercept import interceptor

        logging.getLogger('placement').setLevel(logging.WARNING)
        conf = _config()
        global _CONFIGURED
        if not _CONFIGURED:
            # Once per process (placement.db_api.configure is run_once);
            # each instance then patches in its own engine.
            db_api.configure(conf)
            _CONFIGURED = True
        self.engine = engines.create_engine('sqlite://', thread_checkin=False)
        self._stack.append(self.engine.dispose)
        # oslo.db drops a connection checked out in a forked process; here
        # the database is that connection (in memory): a forked process
        # reading its copy (nvlink_placement.forkmap) keeps it.
        sqlalchemy.event.listen(self.engine, 'checkout', _adopt, insert=True)
        migration.create_schema(self.engine)
        self._stack.append(
            db_api.placement_context_manager.patch_engine(self.engine))
        self._bulk = snapshot_db.unsupported(self.engine)
        if self._document is not None and not self._bulk:
            snapshot_db.load(self.engine, self._document)
        # Placement caches "already synced" per process; the DB is new.
        trait._TRAITS_SYNCED = False
        resource_class._RESOURCE_CLASSES_SYNCED = False
        app = deploy.loadapp(conf)
        self.url = url = ('http://embedded-placement-%s/placement'
                          % uuid.uuid4().hex)
        intercept = interceptor.RequestsInterceptor(app=lambda: app, url=url)
        intercept.__enter__()
        self._stack.append(lambda: intercept.__exit__(None, None, None))
        http = requests.Session()
        http.trust_env = False      # no proxy look-up per request
        session = ks_session.Session(
            auth=None, session=http,
            additional_headers={'X-Auth-Token': 'admin'})
        adapter = ks_adapter.Adapter(session, service_type='placement',
                                     endpoint_override=url)
        self.client = EmbeddedClient(adapter, self)
        if self._document is not None and self._bulk:
            self._load_through_api(self._document)
        return self.client

    def _load_through_api(self, document):
        LOG.warning('%s; loading the snapshot through the Placement API '
                    'instead (one request per object: slower)', self._bulk)
        snapshot_api.load(self.client, document)

    def load(self, document):
        """Add a validated snapshot to the running Placement.

        Bulk into the tables (none of its providers or consumers may exist
        yet), or through the API for an unknown schema.
        """
        if self._bulk:
            self._load_through_api(document)
            return
        with self.client.lock:
            snapshot_db.load(self.engine, document)

    @property
    def writes_tables(self):
        """Whether the tables are read and written directly.

        By :mod:`snapshot_db` and :mod:`nvlink_placement.plan.bulk`: a
        schema revision they know.
        """
        return not self._bulk

    def state(self, traits, trait_prefixes=()):
        """The planning :class:`State`, from the tables.

        :func:`snapshot_db.state`; needs :attr:`writes_tables`.
        """
        with self.client.lock:
            return snapshot_db.state(self.engine, traits, trait_prefixes)

    def provider_roots(self):
        """``{rp uuid: (name, root uuid)}`` of every provider.

        From the tables (:func:`snapshot_db.provider_roots`; needs
        :attr:`writes_tables`).
        """
        with self.client.lock:
            return snapshot_db.provider_roots(self.engine)

    def trait_carriers(self, traits):
        """``{trait: set of rp uuids}`` of the providers with each trait.

        From the tables (:func:`snapshot_db.trait_carriers`; needs
        :attr:`writes_tables`).
        """
        with self.client.lock:
            return snapshot_db.trait_carriers(self.engine, traits)

    def allocations(self, uuids):
        """``{rp uuid: {consumer: {rc: used}}}`` of ``uuids``.

        From the tables (:func:`snapshot_db.allocations`; needs
        :attr:`writes_tables`).
        """
        with self.client.lock:
            return snapshot_db.allocations(self.engine, uuids)

    def export(self, hosts=None, left_out=None):
        """The snapshot of ``hosts``, or of every tree it holds.

        Read from the tables, or through the API for an unknown schema.
        With ``hosts``, ``left_out`` (a dict) is filled with the trees not
        exported and the consumers whose allocations were cut
        (:func:`snapshot.left_out`).
        """
        if self._bulk:
            return snapshot_api.export(self.client, hosts, every_tree=True,
                                       left_out=left_out)
        with self.client.lock:
            return snapshot_db.export(self.engine, hosts, every_tree=True,
                                      left_out=left_out)

    def __exit__(self, *exc):
        while self._stack:
            self._stack.pop()()
        self.client = None
        return False
