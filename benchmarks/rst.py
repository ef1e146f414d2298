"""The tables the benchmarks print: reStructuredText simple tables.

So that a run's output pastes into ``doc/source/performance.rst`` as it is.
"""


def table(header, rows):
    """The lines of a simple table, each column as wide as its widest cell.

    :param header: tuple of column titles (str).
    :param rows: list of tuples of str, each as long as ``header``.
    :returns: list of str, without line ends; trailing blanks stripped.
    """
    widths = [max([len(title)] + [len(row[i]) for row in rows])
              for i, title in enumerate(header)]
    rule = '  '.join('=' * width for width in widths)

    def line(cells):
        return '  '.join(cell.ljust(width)
                         for cell, width in zip(cells, widths)).rstrip()
    return [rule, line(header), rule] + [line(row) for row in rows] + [rule]
