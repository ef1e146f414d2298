"""A real Placement served over HTTP by gunicorn on 127.0.0.1.

Used by the end-to-end tests and the benchmarks. Placement runs with
``[api] auth_strategy = noauth2`` (the token ``admin`` is an admin) on a
SQLite file, one worker (two would lock the file), as in
``shared/reference/openstack.md``.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import requests

CONFIG = """[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///{db}
sync_on_startup = True
"""
#: The wide-tree settings ``openstack nvlink nova-config`` prints; the
#: server's default. ``settings={}`` runs Placement with its own defaults.
TUNED = {
    'placement': {'max_allocation_candidates': 1000,
                  'allocation_candidates_generation_strategy':
                      'breadth-first'},
    'workarounds': {'optimize_for_wide_provider_trees': True},
}


def settings_text(settings):
    """``{section: {option: value}}`` as placement.conf lines."""
    return ''.join('[%s]\n%s' % (section, ''.join(
        '%s = %s\n' % item for item in options.items()))
        for section, options in settings.items())


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class PlacementServer(object):
    """Start/stop gunicorn serving ``placement.wsgi.api:application``.

    One thread by default: with SQLite, concurrent writers get "database is
    locked" (HTTP 500) from Placement; a real deployment uses MySQL.

    :param snapshot: optional validated snapshot dict bulk-loaded into the
        SQLite file before the server starts
        (:mod:`nvlink_placement.placement.snapshot_db`): a big state in
        seconds instead of a request per object.
    :param settings: placement.conf options, ``{section: {option:
        value}}`` (default :data:`TUNED`; ``{}``: Placement's defaults).
    :param worker_timeout: gunicorn ``--timeout`` in seconds (gunicorn
        kills a worker silent for longer: 30 s by default).
    :ivar url: base URL, e.g. ``http://127.0.0.1:38291``.
    """

    def __init__(self, threads=1, connection=None, workers=1, snapshot=None,
                 settings=None, worker_timeout=None):
        self.threads = threads
        self.settings = TUNED if settings is None else settings
        self.worker_timeout = worker_timeout
        self.workers = workers
        self.connection = connection
        self.snapshot = snapshot
        self.dir = None
        self.process = None
        self.url = None

    def start(self, timeout=60):
        # SQLite on tmpfs where there is one: no fsync per commit, so the
        # numbers measure Placement, not the disk.
        shm = '/dev/shm' if os.path.isdir('/dev/shm') else None
        self.dir = tempfile.mkdtemp(prefix='placement-', dir=shm)
        config = CONFIG.format(db=os.path.join(self.dir, 'placement.db'))
        config += settings_text(self.settings)
        if self.connection:
            config = config.replace(
                'connection = sqlite:///%s' % os.path.join(
                    self.dir, 'placement.db'),
                'connection = %s' % self.connection)
        presync = self.workers > 1 or self.snapshot is not None
        if presync:
            # Workers would race to create the schema, and a snapshot needs
            # it: do it once first.
            config = config.replace('sync_on_startup = True',
                                    'sync_on_startup = False')
        conf_path = os.path.join(self.dir, 'placement.conf')
        with open(conf_path, 'w') as f:
            f.write(config)
        if presync:
            subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                         'placement-manage'),
                            '--config-file', conf_path, 'db', 'sync'],
                           check=True, capture_output=True)
        if self.snapshot is not None:
            self._preload()
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self.dir)
        gunicorn = os.path.join(os.path.dirname(sys.executable), 'gunicorn')
        if not os.path.exists(gunicorn):
            gunicorn = shutil.which('gunicorn')
        self.log = open(os.path.join(self.dir, 'gunicorn.log'), 'w')
        silent = (['--timeout', str(self.worker_timeout)]
                  if self.worker_timeout else [])
        # The socket is bound here and handed to gunicorn (fd://): a port
        # only chosen here (free_port) could be taken by another test
        # process's server before gunicorn binds it, and that server would
        # then answer the readiness check below in this one's place.
        with socket.socket() as listener:
            listener.bind(('127.0.0.1', 0))
            self.url = 'http://127.0.0.1:%d' % listener.getsockname()[1]
            self.process = subprocess.Popen(
                [gunicorn, '-w', str(self.workers), '--threads',
                 str(self.threads), '-b', 'fd://%d' % listener.fileno(),
                 '--log-level', 'warning'] + silent +
                ['placement.wsgi.api:application'],
                env=env, stdout=self.log, stderr=subprocess.STDOUT,
                pass_fds=(listener.fileno(),), start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('gunicorn exited: %s' % self.logs())
            try:
                if requests.get(self.url + '/', timeout=2).status_code == 200:
                    return self
            except (requests.ConnectionError, requests.Timeout):
                pass        # not listening yet, or still syncing the schema
            time.sleep(0.2)
        self.stop()
        raise RuntimeError('Placement did not answer in %ds' % timeout)

    def _preload(self):
        import sqlalchemy

        from nvlink_placement.placement import snapshot_db
        engine = sqlalchemy.create_engine(
            self.connection or 'sqlite:///%s' % os.path.join(
                self.dir, 'placement.db'))
        try:
            snapshot_db.load(engine, self.snapshot)
        finally:
            engine.dispose()

    def logs(self):
        with open(os.path.join(self.dir, 'gunicorn.log')) as f:
            return f.read()[-4000:]

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            # gunicorn's master and worker share a session of their own.
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.dir:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def adapter(self):
        """A keystoneauth Adapter onto this server (admin token)."""
        from keystoneauth1 import adapter
        from keystoneauth1 import session
        from keystoneauth1 import token_endpoint
        auth = token_endpoint.Token(self.url, 'admin')
        return adapter.Adapter(session.Session(auth=auth),
                               service_type='placement')

    def cli_auth(self):
        """``openstack`` CLI options for this server."""
        return ['--os-auth-type', 'admin_token', '--os-token', 'admin',
                '--os-endpoint', self.url]
