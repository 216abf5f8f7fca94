"""``python -m suite.cli``: the ``tierbench`` command, as torchrun and the child processes of a sweep launch it."""

import sys

from suite.cli import main

sys.exit(main())
