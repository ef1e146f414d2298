"""A compute API server list over HTTP on 127.0.0.1, in Nova's pages.

Serves only ``GET /servers/detail``, paged as the Nova API reference and
``nova/api/openstack/common.py`` (``get_pagination_params``,
``ViewBuilder._get_collection_links``) define it: ``limit`` capped by
``[api] max_limit``, ``marker`` the id of the last server of the previous
page, and a ``servers_links`` entry with ``rel: next`` when a page is
full. It stands in for the wire format only, so that the reader's paging
is tested in ``tests/``; what Nova itself returns is tested with Nova's
own code in ``nova_tests/test_check_consumers.py``.
"""

import json
import threading
import urllib.parse
import wsgiref.simple_server


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):

    def log_message(self, *args):
        pass


class ComputePages(object):
    """``with ComputePages(servers, max_limit) as pages:`` serves them.

    :param servers: server bodies (dicts with at least ``id``), in the
        order Nova lists them.
    :param max_limit: Nova's ``[api] max_limit`` (1000 by default).
    :ivar url: the endpoint, e.g. ``http://127.0.0.1:40123``.
    :ivar queries: the query of each request served, parsed.
    """

    def __init__(self, servers, max_limit=1000):
        self.servers = list(servers)
        self.max_limit = max_limit
        self.queries = []
        self._httpd = None
        self._thread = None
        self.url = None

    def _app(self, environ, start_response):
        query = urllib.parse.parse_qs(environ.get('QUERY_STRING', ''))
        self.queries.append(query)
        if environ['PATH_INFO'] != '/servers/detail':
            start_response('404 Not Found',
                           [('Content-Type', 'application/json')])
            return [b'{"itemNotFound": {"code": 404}}']
        limit = min(int(query.get('limit', [self.max_limit])[0]),
                    self.max_limit)
        start = 0
        if 'marker' in query:
            ids = [s['id'] for s in self.servers]
            start = ids.index(query['marker'][0]) + 1
        page = self.servers[start:start + limit]
        body = {'servers': page}
        if page and len(page) == limit:
            body['servers_links'] = [{'rel': 'next', 'href': '%s/servers/'
                                      'detail?limit=%d&marker=%s' % (
                                          self.url, limit, page[-1]['id'])}]
        start_response('200 OK', [('Content-Type', 'application/json')])
        return [json.dumps(body).encode()]

    def __enter__(self):
        self._httpd = wsgiref.simple_server.make_server(
            '127.0.0.1', 0, self._app, handler_class=_Quiet)
        self.url = 'http://127.0.0.1:%d' % self._httpd.server_port
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={'poll_interval': 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)
