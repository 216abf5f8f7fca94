"""One progress bar over the named steps of a long job (it says what is being done)."""

from __future__ import annotations

import contextlib

from tqdm.auto import tqdm


class Steps:
    """``with steps.step("reordering the graph"): ...`` advances the bar and shows the step's name."""

    def __init__(self, title: str, count: int, progress: bool = True):
        self.bar = tqdm(total=count, desc=title, disable=not progress, unit="step")

    @contextlib.contextmanager
    def step(self, what: str):
        self.bar.set_postfix_str(what)
        yield
        self.bar.update(1)

    def close(self):
        self.bar.set_postfix_str("done")
        self.bar.close()
