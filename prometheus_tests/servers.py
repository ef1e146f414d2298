"""A real Prometheus and node exporter on loopback ports, for the tests.

Each runs from its own temporary directory (configuration, TSDB,
textfile directory) on a free 127.0.0.1 port, in a session of its own,
and is killed at cleanup. Prometheus scrapes the node exporter and
evaluates its rules every second, so an alert with ``for: 2s`` fires a
few seconds after the metric changes. Debian's ``prometheus`` and
``prometheus-node-exporter`` packages (``.ci/run`` installs them);
upstream's ``node_exporter`` name is found too.
"""

import os
import shutil
import signal
import subprocess
import time

import fixtures
import requests
import yaml

from tests import placement_server

#: Seconds a server may take to answer after it starts.
START_TIMEOUT = 30


def binary(*names):
    """The first of ``names`` on PATH, or None."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


NODE_EXPORTER = ('prometheus-node-exporter', 'node_exporter')


class _Server(fixtures.Fixture):
    """A process answering HTTP on ``url``; its log in ``log_path``."""

    name = None

    def argv(self, port):
        raise NotImplementedError

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.log_path = os.path.join(self.dir, 'log')
        port = placement_server.free_port()
        self.url = 'http://127.0.0.1:%d' % port
        with open(self.log_path, 'w') as log:
            self.process = subprocess.Popen(
                self.argv(port), stdout=log, stderr=subprocess.STDOUT,
                cwd=self.dir, start_new_session=True)
        self.addCleanup(self._stop)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('%s exited: %s' % (self.name, self.logs()))
            try:
                if requests.get(self.ready_url(), timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError('%s did not answer in %ds: %s' % (
            self.name, START_TIMEOUT, self.logs()))

    def ready_url(self):
        return self.url + '/'

    def logs(self):
        with open(self.log_path, errors='replace') as f:
            return f.read()[-4000:]

    def _stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class NodeExporter(_Server):
    """The node exporter with only its textfile collector.

    :ivar textfile_dir: the directory it reads ``*.prom`` files from.
    """

    name = 'node exporter'

    def argv(self, port):
        self.textfile_dir = os.path.join(self.dir, 'textfile')
        os.mkdir(self.textfile_dir)
        return [binary(*NODE_EXPORTER), '--collector.disable-defaults',
                '--collector.textfile',
                '--collector.textfile.directory=%s' % self.textfile_dir,
                '--web.listen-address=127.0.0.1:%d' % port]


class Prometheus(_Server):
    """Prometheus scraping ``target`` (host:port), with ``rules``.

    :param rules: a rule file document (dict), written as its one rule
        file.
    :param interval: scrape and evaluation interval, e.g. ``'1s'``.
    """

    name = 'prometheus'

    def __init__(self, target, rules, interval='1s'):
        super().__init__()
        self.target = target
        self.rules = rules
        self.interval = interval

    def argv(self, port):
        rules = os.path.join(self.dir, 'rules.yml')
        with open(rules, 'w') as f:
            yaml.safe_dump(self.rules, f)
        config = os.path.join(self.dir, 'prometheus.yml')
        with open(config, 'w') as f:
            yaml.safe_dump({
                'global': {'scrape_interval': self.interval,
                           'evaluation_interval': self.interval},
                'rule_files': [rules],
                'scrape_configs': [{'job_name': 'node', 'static_configs': [
                    {'targets': [self.target]}]}]}, f)
        return [binary('prometheus'), '--config.file=%s' % config,
                '--storage.tsdb.path=%s' % os.path.join(self.dir, 'data'),
                '--web.listen-address=127.0.0.1:%d' % port]

    def ready_url(self):
        return self.url + '/-/ready'

    def api(self, path, **params):
        """``data`` of a ``GET /api/v1/<path>`` that succeeded."""
        response = requests.get(self.url + '/api/v1/' + path, params=params,
                                timeout=10)
        body = response.json()
        if body.get('status') != 'success':
            raise AssertionError('%s %s: %s' % (path, params, body))
        return body['data']

    def alerts(self):
        """``{(alertname, frozenset of other labels): (state, value)}``."""
        return {(a['labels']['alertname'], frozenset(
            (k, v) for k, v in a['labels'].items() if k != 'alertname')):
            (a['state'], float(a['value']))
            for a in self.api('alerts')['alerts']}
