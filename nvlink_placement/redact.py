"""Credentials inside URLs, masked wherever a URL is printed.

An endpoint may carry credentials in its user information part
(``--os-endpoint http://user:secret@placement:8778``, RFC 3986 section
3.2.1): keystoneauth sends them as HTTP basic auth, and every message that
names the URL (errors, the ``--debug`` request log) would print them.
:func:`url_credentials` keeps the user name and masks the password
(``http://user:***@placement:8778``); a user information part without a
password is masked whole, since it may be a token
(``https://***@host``).
"""

import re

MASK = '***'
# scheme "://" then userinfo (no "/", "@" or white space) then "@".
_USERINFO = re.compile(
    r'(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@:\'"]*)(:[^\s/@\'"]*)?@')


def url_credentials(text):
    """``text`` with the credentials of every URL in it masked."""
    if '@' not in text or '://' not in text:
        return text

    def masked(match):
        if match.group(3) is None:
            return '%s%s@' % (match.group(1), MASK)
        return '%s%s:%s@' % (match.group(1), match.group(2), MASK)
    return _USERINFO.sub(masked, text)
