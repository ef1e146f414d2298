"""The base classes of the plugin's commands.

osc-lib's Command, Lister and ShowOne with plain-text ``--help`` and usage
errors that exit 3 (:mod:`.usage`), lists printed flat in ``-f value``,
``csv`` and ``shell`` (:mod:`.display`), and two mixins: text output by
default (:class:`TextByDefault`) and options that print text of their own
(:class:`OwnOutput`).
"""

from osc_lib.command import command

from nvlink_placement.osc import display
from nvlink_placement.osc import usage


class Command(usage.UsageErrors, usage.PlainHelp, command.Command):
    """osc-lib's Command: plain-text help, usage errors exit 3."""


class Lister(usage.UsageErrors, usage.PlainHelp, command.Lister):
    """osc-lib's Lister: plain-text help, lists flat in value and csv."""

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.formatter in display.FLAT_FORMATS:
            shell = parsed_args.formatter == 'shell'
            data = [[display.flat(v, shell) for v in row] for row in data]
        return super().produce_output(parsed_args, column_names, data)


class ShowOne(usage.UsageErrors, usage.PlainHelp, command.ShowOne):
    """osc-lib's ShowOne: plain-text help, lists flat in value and csv."""

    def produce_output(self, parsed_args, column_names, data):
        if parsed_args.formatter in display.FLAT_FORMATS:
            shell = parsed_args.formatter == 'shell'
            data = [display.flat(v, shell) for v in data]
        return super().produce_output(parsed_args, column_names, data)


class TextByDefault(object):
    """A Lister or ShowOne whose default output is text.

    Put before the cliff base. Without ``-f`` and ``-c`` the command
    prints text itself (it checks :attr:`as_text` in ``produce_output``);
    ``-f table|json|yaml|csv|value`` or ``-c`` give cliff's formatters.
    """

    as_text = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.set_defaults(formatter=None)
        for action in parser._actions:
            if action.dest == 'formatter':
                action.help = ('the output format (default: text as '
                               'described above; -c alone gives a table)')
        return parser

    def run(self, parsed_args):
        self.as_text = (parsed_args.formatter is None and
                        not parsed_args.columns)
        if parsed_args.formatter is None:
            parsed_args.formatter = 'table'
        return super().run(parsed_args)


class OwnOutput(object):
    """A Lister or ShowOne with options that print text of their own.

    Put first, before :class:`TextByDefault` and the cliff base.
    :attr:`own_output` maps the dest of each such option (``--ini``,
    ``--dot``) to what it prints; ``-f`` or ``-c`` given with one of them
    is a usage error instead of being ignored.
    """

    own_output = {}

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self._formatter_default = parser.get_default('formatter')
        parser.set_defaults(formatter=None)
        return parser

    def run(self, parsed_args):
        given = [(dest, what) for dest, what in self.own_output.items()
                 if getattr(parsed_args, dest, None)]
        explicit = (['-f %s' % parsed_args.formatter]
                    if parsed_args.formatter is not None else [])
        explicit += ['-c %s' % c for c in parsed_args.columns or ()]
        if given and explicit:
            dest, what = given[0]
            option = '--' + dest.replace('_', '-')
            self._usage_parser.error(
                '%s does not go with %s, which prints %s, not rows: leave '
                'out -f/-c, or leave out %s to get rows'
                % (' '.join(explicit), option, what, option))
        if parsed_args.formatter is None:
            parsed_args.formatter = self._formatter_default
        return super().run(parsed_args)
