"""The real-Nova suite: Nova's own code and functional framework.

Nova's services run here under eventlet, and the monkey patching must come
before anything imports oslo.db, as ``nova/tests/functional/__init__.py``
does for Nova's own tests: oslo.db keeps each request context's open
transaction in a thread-local class made when it is imported. Made before
the patch, that is one slot shared by every green thread, and two green
threads using copies of one context (a build and its resource claim) see
each other's transactions: the claim then fails with "Can't upgrade a
READER transaction to a WRITER mid-transaction" and the boot is
rescheduled, now and then, on a busy machine.

Nova 33 and 34 patch in ``nova.monkey_patch.patch()``; Nova 31 and 29
patch when ``nova/monkey_patch.py`` is imported (its module-level
``_monkey_patch()`` call) and have no ``patch``.
"""

from nova import monkey_patch

if hasattr(monkey_patch, 'patch'):
    monkey_patch.patch()
