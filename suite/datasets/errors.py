"""The error every dataset reader raises for a file it cannot trust."""

from suite.errors import UserError


class DatasetFileError(UserError, RuntimeError):
    """A dataset file is missing, truncated or corrupt; the message names it and says how to rebuild it."""
