"""Why the GPU numbers miss their goals: four diagnostics that `tierbench gpubench` and the sweeps do not make.

Each part prints a JSON line with the provenance (device, revision, source digest, time), then JSON lines or a
profiler table, to stdout; ``report`` turns a folder of their outputs into ``diagnostics.md`` and ``reach.png``.

* ``reach``: gpubench's reach study (``suite.experiments.gpu.cold_gather_rate``: the cold zero-copy gather,
  PyTorch-Direct §3.2, of random rows drawn from the first 128 MiB, 1 GiB or 4 GiB of one registered 4 GiB host
  table, for 128 B to 4 KiB rows) on 4 KiB pages and on transparent huge pages (``MADV_HUGEPAGE``), and with the
  grid capped at 1 to 64 blocks per multiprocessor.  The gather reads the same bytes in every case; only how far
  apart the rows are changes.
* ``sampler``: sampled edges per second of one hop (fanout 12 over 100,000 frontier nodes) and the time of one
  three-layer minibatch (1024 seeds, fanouts 12,12,12; Data Tiering §2.2) on papers-s, with the CSR in host memory
  (numba, every core), in GPU memory (the torch sampler) and in pinned host memory read from the GPU (UVA).
* ``gather-profile``: one papers-s minibatch's input nodes (batch 1024) gathered through
  ``CombinedTensor.gather`` at 10% hot, the public call taken apart into its range check, the copy of the ids to
  the GPU, and the kernel with and without counting the traffic (beside the torch traffic model it replaced, the
  CPU's reference), beside the bandwidth bound; then a torch profile of five gathers.
* ``sampler-profile``: a torch profile of five GPU one-hop samples (kernel launches against GPU time).

Run on a GPU machine, in the checkout::

    python -m benchmarks.gpu_diagnostics reach > OUT/reach.jsonl
    python -m benchmarks.gpu_diagnostics sampler > OUT/sampler.jsonl
    python -m benchmarks.gpu_diagnostics gather-profile > OUT/gather-profile.txt
    python -m benchmarks.gpu_diagnostics sampler-profile > OUT/sampler-profile.txt
    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
        --section LaunchStats -k regex:gather -c 2 python -m benchmarks.gpu_diagnostics ncu-target > OUT/ncu.txt
    python -m benchmarks.gpu_diagnostics report OUT      # anywhere: diagnostics.md and reach.png
"""

from __future__ import annotations

import argparse
import json
import mmap
from pathlib import Path

import torch

from suite.datasets.host_copy import page_aligned_empty
from suite.experiments.gpu import REACH_ROW_BYTES, cold_gather_rate, reach_windows

GIB = 1 << 30
TABLE_BYTES = 4 * GIB
GATHER_BYTES = 256 << 20  # read per timed gather
HUGE_PAGE = 2 << 20
ROW_BYTES = REACH_ROW_BYTES
WINDOWS = tuple(reach_windows(TABLE_BYTES))
GRID_CAPS = (132, 528, 2112, 8448, None)  # 1, 4, 16, 64 blocks per multiprocessor of an H100, and no cap


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def host_table(pages: str) -> tuple[torch.Tensor, object]:
    """A ``TABLE_BYTES`` uint8 CPU buffer, page-aligned, on 4 KiB pages (``4k``) or transparent huge pages
    (``thp``); returns it and the object that owns its memory."""
    if pages == "4k":
        table = page_aligned_empty((TABLE_BYTES,), torch.uint8)
        return table, table
    owner = mmap.mmap(-1, TABLE_BYTES + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    owner.madvise(mmap.MADV_HUGEPAGE)
    whole = torch.frombuffer(owner, dtype=torch.uint8)
    start = -whole.data_ptr() % HUGE_PAGE
    return whole[start:start + TABLE_BYTES], owner


def gather_rate(buffer: torch.Tensor, row_bytes: int, window: int, device, max_blocks=None) -> float:
    """GB/s of the cold gather kernel over random rows of the table in ``buffer[:window]`` (checked first)."""
    return cold_gather_rate(buffer, row_bytes, window, device, 5, gather_bytes=GATHER_BYTES, max_blocks=max_blocks) / 1e9


def reach(device) -> None:
    from suite.experiments.gpu import _fill
    from tiering.features.zero_copy import register_host_memory, unregister_host_memory

    emit(transparent_hugepage=Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip())
    for pages in ("4k", "thp"):
        buffer, owner = host_table(pages)
        _fill(buffer)
        huge = next(line for line in open("/proc/meminfo") if line.startswith("AnonHugePages")).split()[1]
        emit(pages=pages, anon_huge_kib=int(huge))
        register_host_memory(buffer)
        try:
            for row_bytes in ROW_BYTES:
                for window in WINDOWS:
                    emit(study="reach", pages=pages, row_bytes=row_bytes, window_mib=window >> 20,
                         gbps=round(gather_rate(buffer, row_bytes, window, device), 2))
            for cap in GRID_CAPS:
                emit(study="grid", pages=pages, row_bytes=512, max_blocks=cap,
                     gbps=round(gather_rate(buffer, 512, TABLE_BYTES, device, max_blocks=cap), 2))
        finally:
            unregister_host_memory(buffer)
        del buffer, owner


def papers_s_graph():
    from benchmarks.workloads import papers_like_graph
    from suite.datasets import PRESETS

    return papers_like_graph(PRESETS["papers-s"].num_nodes)


def sampler(device) -> None:
    import numba

    from suite.measure.timing import best_wall_seconds
    from tiering.features.zero_copy import mapped_graph
    from tiering.graph.csr import CSRGraph
    from tiering.sampling.neighbors import NeighborSampler, sample_neighbors

    graph = papers_s_graph()
    n = graph.num_nodes
    emit(graph="papers-s", nodes=n, edges=len(graph.indices), numba_threads=numba.get_num_threads())
    cases = {"cpu (numba)": (graph, "cpu", "cpu"),
             "gpu (CSR in GPU memory)": (CSRGraph(graph.indptr.to(device), graph.indices.to(device)), "torch", "cuda"),
             "uva (CSR in pinned host memory)": (mapped_graph(graph, device), "torch", "cuda")}
    frontier = torch.randint(0, n, (100_000,), generator=torch.Generator().manual_seed(0))
    seeds = torch.randperm(n, generator=torch.Generator().manual_seed(2))[:1024]
    for name, (on, backend, where) in cases.items():
        nodes = frontier.to(where)

        def hop():
            counts, _ = sample_neighbors(on, nodes, 12, torch.Generator().manual_seed(1), backend)
            torch.cuda.synchronize()
            return counts

        edges = int(hop().sum())
        _, seconds = best_wall_seconds(hop)
        emit(study="one hop", case=name, fanout=12, frontier=len(nodes), edges=edges, seconds=seconds,
             edges_per_s=edges / seconds)
        layers = NeighborSampler(on, (12, 12, 12), backend)
        batch_seeds = seeds.to(where)

        def minibatch():
            batch = layers.sample(batch_seeds, torch.Generator().manual_seed(1))
            torch.cuda.synchronize()
            return batch

        batch = minibatch()
        edges = batch.num_sampled_edges
        _, seconds = best_wall_seconds(minibatch)
        emit(study="minibatch", case=name, fanouts="12,12,12", seeds=1024, input_nodes=len(batch.input_nodes),
             edges=edges, seconds=seconds, edges_per_s=edges / seconds)


def gather_profile(device) -> None:
    from torch.profiler import ProfilerActivity, profile

    from suite.measure.timing import best_wall_seconds
    from tiering.features.combined import CombinedTensor
    from tiering.features.traffic import zero_copy_traffic_tensors
    from tiering.sampling.neighbors import NeighborSampler

    graph = papers_s_graph()
    n = graph.num_nodes
    features = page_aligned_empty((n, 128), torch.float32)
    features.normal_()
    seeds = torch.randperm(n, generator=torch.Generator().manual_seed(2))[:1024]
    ids = NeighborSampler(graph, (12, 12, 12)).sample(seeds, torch.Generator().manual_seed(3)).input_nodes
    hot_rows = n // 10
    loader = CombinedTensor(features, hot_rows, device)
    on_device = ids.to(device)
    out = torch.empty((len(ids), 128), device=device)
    counters = torch.zeros(3, dtype=torch.int64, device=device)

    def synchronised(run):
        def timed():
            result = run()
            torch.cuda.synchronize()
            return result
        return timed

    parts = {
        "gather (public: check, ids H2D, kernel counting its traffic)": lambda: loader.gather(ids),
        "range check on CPU ids": lambda: loader._in_range(ids),
        "ids H2D (pageable)": lambda: ids.to(device, non_blocking=True),
        "traffic model tensors (the CPU's reference)": lambda: zero_copy_traffic_tensors(
            on_device, 512, loader.host_offset, loader.variant, counted=on_device >= hot_rows),
        "kernel alone": lambda: loader.launch_kernel(on_device, out),
        "kernel counting its traffic": lambda: loader.launch_kernel(on_device, out, counters=counters),
    }
    for name, run in parts.items():
        _, seconds = best_wall_seconds(synchronised(run), repeat=10)
        emit(study="gather parts", case=name, ids=len(ids), ms=round(seconds * 1e3, 3))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
        for _ in range(5):
            loader.gather(ids)
        torch.cuda.synchronize()
    print(trace.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), flush=True)
    loader.close()


def sampler_profile(device) -> None:
    from torch.profiler import ProfilerActivity, profile

    from tiering.graph.csr import CSRGraph
    from tiering.sampling.neighbors import sample_neighbors

    graph = papers_s_graph()
    on_gpu = CSRGraph(graph.indptr.to(device), graph.indices.to(device))
    frontier = torch.randint(0, graph.num_nodes, (100_000,), generator=torch.Generator().manual_seed(0)).to(device)
    for _ in range(3):
        sample_neighbors(on_gpu, frontier, 12, torch.Generator().manual_seed(1), "torch")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
        for _ in range(5):
            sample_neighbors(on_gpu, frontier, 12, torch.Generator().manual_seed(1), "torch")
        torch.cuda.synchronize()
    print(trace.key_averages().table(sort_by="cuda_time_total", row_limit=14), flush=True)
    print(trace.key_averages().table(sort_by="self_cpu_time_total", row_limit=10), flush=True)


def ncu_target(device) -> None:
    """One gather of 512 B and one of 4 KiB rows over the whole 4 GiB table, for ``ncu`` to profile."""
    from suite.experiments.gpu import _fill, _ids, table_view
    from tiering.features.combined import CombinedTensor
    from tiering.features.zero_copy import register_host_memory

    buffer, _ = host_table("4k")
    _fill(buffer)
    register_host_memory(buffer)
    for row_bytes in (512, 4096):
        table = table_view(buffer, row_bytes, torch.float32)
        loader = CombinedTensor(table, 0, device)
        ids = _ids(len(table), GATHER_BYTES // row_bytes, device)
        out = torch.empty((len(ids), table.shape[1]), device=device)
        loader.launch_kernel(ids, out)
        torch.cuda.synchronize()
        loader.close()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def report(folder: Path) -> list[Path]:
    """``diagnostics.md`` and ``reach.png`` in ``folder`` from its ``reach.jsonl`` and ``sampler.jsonl``; the
    provenance is ``provenance.json``'s there, else the first line of ``reach.jsonl``."""
    import pandas as pd

    from suite.io import atomic
    from suite.io.plotting import pyplot, save_figure
    from suite.io.provenance import caption

    reach_rows = read_jsonl(folder / "reach.jsonl")
    record = json.loads((folder / "provenance.json").read_text()) if (folder / "provenance.json").exists() \
        else reach_rows[0]
    measured = pd.DataFrame([r for r in reach_rows if r.get("study") == "reach"])
    grid = pd.DataFrame([r for r in reach_rows if r.get("study") == "grid"])
    samplers = pd.DataFrame([r for r in read_jsonl(folder / "sampler.jsonl") if "study" in r])
    wide = measured.pivot_table(index=["pages", "row_bytes"], columns="window_mib", values="gbps").reset_index()
    wide.columns = [f"{c} MiB window (GB/s)" if isinstance(c, int) else c for c in wide.columns]
    grid["max_blocks"] = [f"{cap:.0f}" if cap == cap else "none (one warp per row)" for cap in grid["max_blocks"]]
    rates = samplers.assign(edges_per_s=samplers["edges_per_s"] / 1e6, ms=samplers["seconds"] * 1e3)
    rates = rates[["study", "case", "edges", "ms", "edges_per_s"]].rename(columns={"edges_per_s": "M edges/s"})
    cpu = rates[rates["case"].str.startswith("cpu")].set_index("study")["ms"]
    rates["CPU time / this"] = [cpu[study] / ms for study, ms in zip(rates["study"], rates["ms"])]
    markdown = "\n\n".join([
        "# GPU diagnostics", f"Made by `python -m benchmarks.gpu_diagnostics` (module docstring); {caption(record)}.",
        "## Cold gather against the reach of its rows",
        "Random rows of one registered 4 GiB table, drawn from its first 128 MiB, 1 GiB or all 4 GiB; 256 MiB read "
        "per gather, best of 5 by CUDA events.", wide.to_markdown(index=False, floatfmt=".3g"),
        "## Cold gather against the grid cap (512 B rows, 4 GiB window)",
        grid[["pages", "max_blocks", "gbps"]].to_markdown(index=False, floatfmt=".3g"),
        "## Sampling on papers-s: CPU (numba, every core) against the GPU",
        rates.to_markdown(index=False, floatfmt=".3g"),
    ])
    plt, sns = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4))
    sns.lineplot(measured.assign(rows=measured["row_bytes"].astype(str) + " B"), x="window_mib", y="gbps", hue="rows",
                 style="pages", markers=True, ax=axis)
    axis.set(xscale="log", xlabel="random rows drawn from the table's first", ylabel="cold gather GB/s",
             title="Zero-copy gather of random rows: bandwidth against their reach")
    axis.set_xticks([w >> 20 for w in WINDOWS], ["128 MiB", "1 GiB", "4 GiB"])
    axis.minorticks_off()
    figure.tight_layout()
    paths = [folder / "diagnostics.md", folder / "reach.png"]
    atomic.write_text(paths[0], markdown + "\n")
    save_figure(figure, paths[1], record)
    return paths


def main(argv=None) -> None:
    parts = {"reach": reach, "sampler": sampler, "gather-profile": gather_profile, "sampler-profile": sampler_profile,
             "ncu-target": ncu_target}
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_diagnostics", description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=[*parts, "report"])
    parser.add_argument("folder", nargs="?", type=Path, help="for report: the folder of the parts' outputs")
    args = parser.parse_args(argv)
    if args.part == "report":
        for path in report(args.folder):
            print(f"wrote {path}")
        return
    from suite.io.provenance import provenance

    device = torch.device("cuda", 0)
    emit(**provenance(device))
    parts[args.part](device)


if __name__ == "__main__":
    main()
