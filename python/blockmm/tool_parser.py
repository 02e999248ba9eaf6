"""The command-line parser of the Python tools, in the C++ tools' style: help that reads like
theirs ("Usage: TOOL [OPTIONS] IN OUT", "Positionals:", "Options:", the exit codes last), so that
their man pages (help2man) and bash completion, both made from --help, come out alike; and a usage
error of one line, "TOOL: error: <what> (see TOOL --help)", exit 2, as every blockmm tool.
"""
import argparse
import sys

from .errors import QUOTED_VALUE_BYTES, quoted, say

USAGE = 2


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog):
        super().__init__(prog, max_help_position=30, width=100)

    def add_usage(self, usage, actions, groups, prefix=None):
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


class ToolParser(argparse.ArgumentParser):
    """argparse with the C++ tools' help layout and one-line usage errors. `operands` is the
    usage line's tail, e.g. "IN OUT"."""

    def __init__(self, prog, operands, **kwargs):
        super().__init__(prog=prog, usage=f"{prog} [OPTIONS] {operands}", formatter_class=_Formatter, **kwargs)
        self._positionals.title = "Positionals"
        self._optionals.title = "Options"

    def format_help(self):
        # As CLI11 lays out the C++ tools' help: what the tool does, then the usage line.
        formatter = self._get_formatter()
        formatter.add_text(f"{self.prog}: {self.description}")
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        for group in self._action_groups:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()

    def error(self, message):
        # argparse's message quotes the value given: cut as every quoted value is.
        say(f"{self.prog}: error: {quoted(message, 2 * QUOTED_VALUE_BYTES)} (see {self.prog} --help)")
        sys.exit(USAGE)
