"""Progress of a long command, on a terminal only."""

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
