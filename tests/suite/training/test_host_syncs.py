"""A training epoch on the GPU path waits for the GPU only where the trainer's docstring says it does.

torch's sync debug mode ("warn") warns at every operation that waits for the GPU through torch (a read back to the
host, a blocking copy, a stream synchronisation).  One epoch of the tiered loader with the fused GPU sampler is
counted: the fused sampler's one read per minibatch (``tiering.sampling.fused``) and a few reads per epoch are allowed,
nothing else; the stage timing's waits (``Trainer._sync``, two per minibatch) are counted apart.
"""

import dataclasses
import warnings

import pytest
import torch

from suite.datasets.reordered import load_reordered
from suite.registry import create_loader
from suite.training.trainer import Trainer

PER_EPOCH = 5  # losses, nodes touched, the loader's counters and its range check, one spare
FANOUTS = (3, 2)


@pytest.mark.gpu
def test_a_gpu_epoch_synchronises_once_per_minibatch_and_a_few_times_per_epoch(tiny):
    reordered = load_reordered("tiny", "wrpr", progress=False)
    splits = {**reordered.splits, "train": reordered.splits["train"][:40]}
    dataset = dataclasses.replace(reordered, splits=splits)
    loader = create_loader("tiered", dataset, 0.3, "cuda", progress=False)
    trainer = Trainer(dataset, loader, FANOUTS, batch_size=4, hidden=16, seed=5, sampling="gpu")
    trainer.train_epoch(0, progress=False)  # the first epoch compiles and allocates: not counted
    trainer.evaluate = lambda split, epoch=0: float("nan")  # evaluation reads its counts per minibatch: not counted
    timing = []

    def timing_sync():
        timing.append(1)
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.current_stream().synchronize()
        torch.cuda.set_sync_debug_mode("warn")

    trainer._sync = timing_sync
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = trainer.train_epoch(1, progress=False)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchronizing CUDA operation" in str(w.message)]
    assert result.batches == 10 and len(timing) == 2 * result.batches
    assert len(syncs) <= result.batches + PER_EPOCH, [f"{w.filename}:{w.lineno}" for w in syncs]
    assert len(result.losses) == 10 and result.loss == sum(result.losses) / 10
    loader.close()
