"""A real Placement in process: ``openstack-placement`` on SQLite in memory.

Used by every ``--snapshot`` command and by the tests. Each
:class:`EmbeddedPlacement` gets a fresh database. Requests go through
``placement.direct.PlacementDirect`` (wsgi-intercept), so the code under
test sends the same HTTP requests as against a live cloud.

The wide-tree settings from DESIGN.md section 5 are on, so allocation
candidate queries over many identical GPUs cannot hang the tool:
``[placement] max_allocation_candidates = 1000``,
``allocation_candidates_generation_strategy = breadth-first`` and
``[workarounds] optimize_for_wide_provider_trees = True``.
"""

import logging
import threading

from oslo_config import cfg
from oslo_db.sqlalchemy import engines

from nvlink_placement.placement import client as pc

MAX_ALLOCATION_CANDIDATES = 1000
_CONFIGURED = False


def _config():
    from placement import conf as placement_conf
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_override('connection', 'sqlite://', group='placement_database')
    conf.set_override('sync_on_startup', False, group='placement_database')
    conf.set_override('max_allocation_candidates', MAX_ALLOCATION_CANDIDATES,
                      group='placement')
    conf.set_override('allocation_candidates_generation_strategy',
                      'breadth-first', group='placement')
    conf.set_override('optimize_for_wide_provider_trees', True,
                      group='workarounds')
    conf([], project='placement', default_config_files=[],
         default_config_dirs=[])
    return conf


class EmbeddedPlacement(object):
    """Context manager yielding a :class:`PlacementClient` on a fresh DB.

    Not re-entrant; one at a time per process (wsgi-intercept and the
    database facade are process-wide). Requests are serialized with a lock
    because the in-memory database is one shared SQLite connection.
    """

    def __init__(self):
        self._stack = []

    def __enter__(self):
        from placement.db.sqlalchemy import migration
        from placement import db_api
        from placement import direct
        from placement.objects import resource_class
        from placement.objects import trait

        logging.getLogger('placement').setLevel(logging.WARNING)
        conf = _config()
        global _CONFIGURED
        if not _CONFIGURED:
            # Once per process (placement.db_api.configure is run_once);
            # each instance then patches in its own engine.
            db_api.configure(conf)
            _CONFIGURED = True
        engine = engines.create_engine('sqlite://')
        migration.create_schema(engine)
        reset = db_api.placement_context_manager.patch_engine(engine)
        self._stack.append(reset)
        self._stack.append(engine.dispose)
        # Placement caches "already synced" per process; the DB is new.
        trait._TRAITS_SYNCED = False
        resource_class._RESOURCE_CLASSES_SYNCED = False
        self._direct = direct.PlacementDirect(conf)
        adapter = self._direct.__enter__()
        return pc.PlacementClient(adapter, lock=threading.Lock(),
                                  description='embedded Placement')

    def __exit__(self, *exc):
        self._direct.__exit__(*exc)
        while self._stack:
            self._stack.pop()()
        return False
