"""``tierbench profile``: measured reuse drawn as Figure 7 or 9, by the figure's number.

``tierbench profile --dataset NAME --figure 7|9`` measures it
(``suite.experiments.reuse``; ``tox -e fig7``, ``tox -e fig9``) and draws it
(``suite.figures.fig7``, ``fig9``); ``tierbench report --figure 7|9
--dataset NAME`` draws it again from its records.  What both figures' tables
open with is ``intro``.
"""

from __future__ import annotations

from suite.datasets import regime as regimes
from suite.experiments.reuse import ReuseRecords
from suite.io.provenance import caption


def intro(records: ReuseRecords) -> str:
    """The table's opening: the command, the provenance, and what was sampled at each of the fanouts counted."""
    facts = records.facts
    fetched = ", ".join(
        f"{100 * per_batch:.3g}% per minibatch and {100 * seen:.3g}% over the "
        f"{'epoch' if facts['epochs'] == 1 else 'epochs'} at {fanouts}"
        for fanouts, per_batch, seen in facts["footprint"]
    )
    return (
        f"Made by {facts['command']}; {caption(facts)}.\n{facts['dataset']}: {facts['num_nodes']:,} nodes, "
        f"{facts['train_seeds']:,} training seeds; "
        f"{regimes.describe(facts['dataset'], facts['batch_size'], facts['regime'])}; "
        f"{facts['batches']} minibatches over {facts['epochs']} epoch(s). Shares are of measured feature fetches (each "
        f"node once per minibatch). Footprint: the minibatches fetched on average {fetched} of the nodes.\n\n"
    )
