"""Progress of a long command, on a terminal only.

The bar is tqdm's; this module only decides when there is one: on a
terminal (so that logs and ``-f json`` output stay clean) and for more
than one host, and imports tqdm only then.
"""

import sys


def bar(total, description, enabled=None):
    """A tqdm progress bar on a terminal (stderr), or None."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 1:
        return None
    import tqdm
    return tqdm.tqdm(total=total, desc=description, unit='host',
                     file=sys.stderr, leave=False)
