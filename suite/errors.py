"""What the ``tierbench`` command reports in one line, ``tierbench: error: ...`` and exit status 2, not a traceback.

A ``UserError`` says that something the user gave cannot be used: an option's value, a dataset, loader or
experiment name, a file the user pointed at or the dataset cache holds.  Its message says what is wrong and how to
fix it.  Any other exception is a bug, and the command shows its traceback.  ``BadValue`` and ``UnknownName`` are
also a ``ValueError`` and a ``KeyError``, so that a library caller catching those still catches them.

The arrows go suite -> baselines -> tiering, so tiering and baselines never raise a ``UserError``: their
``ValueError`` is about an argument their caller passed, whoever chose it.  The suite checks a user's values before
they reach them (the option types of ``suite.cli.options``, a sweep's settings), and where only the library can
tell that a user's value is wrong (the shared-memory directory of a multi-GPU run, a partition buffer's capacity),
the suite catches the library's ``ValueError`` at the one call that passes that value and raises ``BadValue``.
Running out of memory (``MemoryError``, and tiering's ``HotTierTooLarge`` and ``PlacementTooLarge`` with it;
``torch.OutOfMemoryError``) is reported in one line as well, but is no ``UserError``: the same command may run on a
larger machine.
"""


class UserError(Exception):
    """Something the user gave (an option, a name, a file) cannot be used; the message says what and how to fix it."""


class BadValue(UserError, ValueError):
    """A value the user gave, or a file the user pointed at, that tierbench cannot use."""


class UnknownName(UserError, KeyError):
    """A name (a dataset, a loader) that is not in its registry; the message lists the known ones."""

    def __str__(self) -> str:  # the message as written, not quoted as a KeyError quotes its key
        return str(self.args[0]) if self.args else ""
