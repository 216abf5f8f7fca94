"""GPU microbenchmarks of the gather, each a ratio against a peer measured in the same run (issue 5).

``tierbench gpubench --out results/gpu`` (needs a CUDA GPU) writes
``microbench.md`` / ``.csv`` and ``alignment.png``:

* **cold rows**: zero-copy gather bandwidth (useful bytes / s) of the aligned
  kernel over random rows of a host table, against pinned ``cudaMemcpy``
  host-to-device bandwidth of a buffer of the same size (target >= 0.9 for
  rows of 512 B and more; seeds/004 reports 88-93%);
* **hot rows**: the same gather with every row in the GPU tier, against
  ``torch.index_select`` on a device tensor (target >= 1.0);
* **alignment** (seeds/004 Fig. 8): aligned and naive zero-copy for rows of
  1024 to 1044 bytes, as fractions of the memcpy bandwidth;
* **model check**: NVML's measured PCIe receive bytes around a cold gather
  against the modelled payload (agree within 10%), or "unavailable".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from tiering.combined import CombinedTensor

from .pcie import PCIeCounter
from .plotting import pyplot, write_table_and_figure
from .provenance import caption, provenance

TABLE_BYTES = 4 << 30  # host table: large enough that rows are not served from any cache
GATHER_ROWS = 1 << 20
REPEAT = 5


def _time(fn, repeat: int = REPEAT) -> float:
    """Best-of-``repeat`` GPU time of ``fn`` in seconds, by CUDA events."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def memcpy_bandwidth(nbytes: int, device) -> float:
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return nbytes / _time(lambda: target.copy_(host, non_blocking=True))


def _ids(num_rows: int, count: int, device) -> torch.Tensor:
    return torch.randint(0, num_rows, (count,), device=device, generator=torch.Generator(device=device).manual_seed(0))


def gather_bandwidth(row_bytes: int, hot: bool, aligned: bool, device) -> tuple[float, float]:
    """``(ours, peer)`` in useful bytes/s: the combined gather and its same-run peer."""
    dim = row_bytes // 4
    num_rows = TABLE_BYTES // row_bytes
    features = torch.empty((num_rows, dim), dtype=torch.float32)
    features.view(-1)[:: max(1, dim)] = 1.0  # touch the pages so the OS has them before pinning
    loader = CombinedTensor(features, num_rows if hot else 0, device, aligned=aligned)
    ids = _ids(num_rows, GATHER_ROWS, device)
    useful = GATHER_ROWS * row_bytes
    try:
        ours = useful / _time(lambda: loader.gather(ids))
        if hot:
            peer = useful / _time(lambda: torch.index_select(loader.hot, 0, ids))
        else:
            peer = memcpy_bandwidth(useful, device)
    finally:
        loader.close()
    return ours, peer


def model_check(device) -> dict:
    row_bytes = 516
    num_rows = TABLE_BYTES // row_bytes
    features = torch.zeros((num_rows, row_bytes // 4))
    loader = CombinedTensor(features, 0, device, aligned=True)
    counter = PCIeCounter(device.index or 0)
    ids = _ids(num_rows, GATHER_ROWS, device)
    loader.gather(ids)
    torch.cuda.synchronize(device)
    loader.reset_stats()
    counter.start()
    loader.gather(ids)
    torch.cuda.synchronize(device)
    measured = counter.delta()
    model = loader.stats().pcie_payload_bytes
    loader.close()
    if measured is None:
        return {"modelled payload (B)": model, "measured RX (B)": "unavailable", "measured / model": counter.reason}
    return {"modelled payload (B)": model, "measured RX (B)": measured["rx_bytes"], "measured / model": measured["rx_bytes"] / model}


def run_gpu_benchmarks(out_dir, device="cuda") -> list[Path]:
    if not torch.cuda.is_available():
        raise RuntimeError("tierbench gpubench needs a CUDA GPU and none is visible here; no GPU numbers were made")
    plt, sns = pyplot()
    device = torch.device(device)
    record = provenance(device)
    rows = []
    for row_bytes in (512, 1024, 4096):
        ours, peer = gather_bandwidth(row_bytes, hot=False, aligned=True, device=device)
        rows.append(("cold rows, aligned zero-copy", row_bytes, ours, "pinned cudaMemcpy H2D", peer, 0.9))
        ours, peer = gather_bandwidth(row_bytes, hot=True, aligned=True, device=device)
        rows.append(("hot rows, combined gather", row_bytes, ours, "torch.index_select on GPU", peer, 1.0))
    alignment = []
    for row_bytes in range(1024, 1048, 4):
        for aligned in (True, False):
            ours, peer = gather_bandwidth(row_bytes, hot=False, aligned=aligned, device=device)
            label = "aligned zero-copy" if aligned else "naive zero-copy"
            rows.append((label, row_bytes, ours, "pinned cudaMemcpy H2D", peer, None))
            alignment.append({"row bytes": row_bytes, "variant": label, "share of memcpy bandwidth": ours / peer})
    table = pd.DataFrame(rows, columns=["ours", "row bytes", "ours (GB/s)", "peer (same run)", "peer (GB/s)", "target ratio"])
    table["ours (GB/s)"] /= 1e9
    table["peer (GB/s)"] /= 1e9
    table["ratio"] = table["ours (GB/s)"] / table["peer (GB/s)"]
    check = model_check(device)

    markdown = (
        f"# Gather microbenchmarks\n\nMade by `tierbench gpubench --out {out_dir}`; {caption(record)}.\n"
        f"Random rows of a {TABLE_BYTES >> 30} GiB host table, {GATHER_ROWS} rows per gather, best of {REPEAT}.\n\n"
        + table.to_markdown(index=False, floatfmt=".3g")
        + "\n\n## Measured vs modelled PCIe bytes\n\n"
        + pd.DataFrame([check]).to_markdown(index=False)
        + "\n"
    )
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    sns.lineplot(data=pd.DataFrame(alignment), x="row bytes", y="share of memcpy bandwidth", hue="variant", marker="o", ax=ax)
    ax.set(title="Zero-copy efficiency vs row size (seeds/004 Fig. 8)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return write_table_and_figure(out_dir, "microbench", markdown, table.assign(**record), fig, record,
                                  figure_stem="alignment", index=False)
