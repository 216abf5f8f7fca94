"""What ends a multi-process training run early, named so that the command line reports it in one line."""

from suite.errors import UserError


class PeerLost(UserError, RuntimeError):
    """Another worker of the process group stopped in the middle of a step."""


class WorkersFailed(UserError, RuntimeError):
    """A run launched in several processes ended with a failing status (their own errors are printed above)."""
