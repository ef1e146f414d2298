"""Keep passwords and tokens out of the ``-v`` / ``--debug`` log.

osc_lib logs the whole command line at INFO (``START with options:
...``, ``osc_lib/shell.py``) through ``oslo_utils.strutils.mask_password``,
which masks ``--os-password=X`` but not ``--os-password X`` nor
``--os-token X``: with ``-v`` or ``--debug`` the secret reaches the
terminal and any ``--log-file``. The filter here, installed on that logger
when OSC imports our plugin, masks the value after every option whose
name says password, token, secret or key, and after the ``--os***`` that
``mask_password`` leaves in place of such a name.

Other libraries' debug lines are theirs (keystoneauth does not log its
token request and logs tokens in headers as ``{SHA256}`` digests); see
``doc/source/operator-guide.rst``.
"""

import logging
import re

LOGGER = 'osc_lib.shell'
MASK = '***'
_SECRET_OPTION = re.compile(
    r'(--os\*\*\*|--[A-Za-z0-9_-]*(?:password|token|secret|key)'
    r'[A-Za-z0-9_-]*)(=|\s+)(\S+)', re.IGNORECASE)


def mask(text):
    """``text`` with the value of each secret option replaced by ``***``."""
    return _SECRET_OPTION.sub(lambda m: m.group(1) + m.group(2) + MASK, text)


class SecretMask(logging.Filter):
    """A filter that rewrites each record's message with :func:`mask`."""

    def filter(self, record):
        message = record.getMessage()
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def install(name=LOGGER):
    """Add one :class:`SecretMask` to the logger ``name`` (idempotent)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, SecretMask) for f in logger.filters):
        logger.addFilter(SecretMask())
