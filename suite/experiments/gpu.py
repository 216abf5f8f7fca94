"""GPU microbenchmarks of the gather kernel, each speed a ratio against a peer measured in the same run (PyTorch-Direct §3).

``tierbench gpubench --out DIR`` (needs a CUDA GPU; ``tox -e gpubench``, and a step of ``tierbench gpu-suite``)
measures (records: ``microbench.csv`` with its sidecar, the ceilings and settings of the run, ``pcie-check.csv`` and
``reach.csv``; ``suite.figures.gpu`` draws ``microbench.md``, ``ratios.png``, ``alignment.png`` and ``reach.png``
from them):

* **cold rows**: the gather kernel alone (``CombinedTensor.launch_kernel`` into a preallocated output) over random
  rows of a host table, in useful bytes/s, against pinned ``cudaMemcpy`` host-to-device of the same bytes (goal
  >= 0.90 for rows of 512 B and more) and against the sequential zero-copy read ceiling of ``suite.measure.ceilings``
  (goal >= 0.95); rows of 128 to 4096 B, fp32 and fp16, every kernel variant (``tiering.features.addressing.VARIANTS``);
* **hot rows**: the same kernel with every row in GPU memory against ``torch.index_select`` on the device tensor
  into a preallocated output (goal >= 1.0), and as a share of the device-to-device copy bandwidth;
* **full gather**: ``loader.gather`` (host range check, traffic model, statistics) of the default variant, in rows
  of its own against the same peers, so the cost of the bookkeeping is visible and never mixed into the kernel's;
* **alignment** (PyTorch-Direct Fig. 8): every variant over rows of 1024 to 1044 B as a share of memcpy, beside the
  paper's 88-93% (aligned) and 78-82% (naive);
* **reach**: the cold gather kernel (default variant, fp32) of random rows drawn from the first 128 MiB, the first
  1 GiB or the whole host table, for rows of 128 to 4096 B: the bytes read are the same, only how far apart the rows
  are changes (PyTorch-Direct §3.2 reads at the link's speed; the first visit's cold rows did not, and this is why);
* **PCIe model check**: NVML's measured receive bytes over a stream of gathers as large as a ``papers-s`` UVA epoch
  against the modelled payload (goal: within 10%), with the measured / copied bytes of a ``cudaMemcpy`` of the same
  size as the reference for the link's protocol overhead, and measured transmit bytes per modelled 128-byte request.

It prints the fastest variant per case and the one ``tiering.features.zero_copy.DEFAULT_VARIANT`` should be.

Every host table is a view of one page-aligned buffer (``suite.datasets.host_copy.page_aligned_empty``), registered once, so
row 0 of every table starts a 128-byte line and "1024 B rows" really are line-aligned; one model-check table starts
64 B into the buffer to check the traffic model at a real offset.

Runtime: the 4 GiB buffer is filled and registered once (~2 s).  Each cold configuration moves 512 MiB six times
for the gather and six for its memcpy peer, ~6 GiB, ~0.25 s at 25 GB/s; 30 cold, 18 alignment and 10 full-gather
configurations: ~15 s.  Each hot one copies its 1 GiB table to the GPU once (~0.05 s) and gathers 1 GiB twelve times
at HBM speed (~0.01 s): 40 configurations, ~3 s.  The model check streams 4 x 2 GiB plus one 2 GiB memcpy, ~0.5 s.  The reach study gathers 512 MiB six times in
each of 12 configurations, ~36 GiB, 1-4 s at 10-50 GB/s.
With NVRTC compiling each variant once, the whole run is well under 2 minutes on an H100 at 25-50 GB/s.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from suite.datasets.host_copy import PAGE_BYTES, page_aligned_empty
from suite.errors import BadValue
from suite.io import atomic, records
from suite.io.provenance import provenance
from suite.measure.ceilings import measure_ceilings
from suite.measure.pcie import PCIeCounter
from suite.measure.timing import best_cuda_seconds
from tiering.features.addressing import VARIANTS
from tiering.features.combined import CombinedTensor
from tiering.features.zero_copy import DEFAULT_VARIANT, register_host_memory, unregister_host_memory

TABLE_BYTES = 4 << 30  # host tables: far larger than any cache on the way (H100 L2: 50 MB)
HOT_TABLE_BYTES = 1 << 30  # the GPU tier of the hot-row study
COLD_GATHER_BYTES = 512 << 20  # useful bytes per timed cold gather
HOT_GATHER_BYTES = 1 << 30  # useful bytes per timed hot gather
REPEAT = 5
ROW_BYTES = (128, 256, 512, 1024, 4096)
DTYPES = (torch.float32, torch.float16)
ALIGNMENT_ROW_BYTES = tuple(range(1024, 1048, 4))  # PyTorch-Direct Fig. 8
PAPER_ALIGNMENT = {"aligned": "88-93%", "naive": "78-82%"}  # PyTorch-Direct: share of cudaMemcpy bandwidth
COLD_GOAL, CEILING_GOAL, HOT_GOAL, MODEL_TOLERANCE = 0.90, 0.95, 1.0, 0.10
MODEL_CHECK_BYTES = 2 << 30  # about the modelled payload of one papers-s UVA epoch (1.7 GB, results/runs/fig8.csv)
MODEL_CHECK_BATCH_ROWS = 1 << 18
MODEL_CHECK_CASES = ((512, 0, "aligned"), (512, 64, "aligned"), (516, 0, "aligned"), (516, 0, "naive"))
"""(row bytes, byte offset of row 0 from a page, variant): papers-s rows, the same 64 B into a line, and a row size
whose lines straddle, where the aligned and naive access patterns differ."""

PEERS = {
    "cold": ("pinned cudaMemcpy H2D", "sequential zero-copy read"),
    "alignment": ("pinned cudaMemcpy H2D", "sequential zero-copy read"),
    "hot": ("torch.index_select on the GPU", "device-to-device copy"),
}
REACH_ROW_BYTES = (128, 512, 1024, 4096)
REACH_WINDOWS = (128 << 20, 1 << 30)
"""The reach study draws random rows from the table's first 128 MiB, its first 1 GiB, and all of it."""
STEM, CHECKS, REACH = "microbench", "pcie-check", "reach"
FACTS = ("command", "ceilings", "table_bytes", "repeat", "default_variant")
CEILINGS_SHOWN = ("h2d_memcpy_bytes_per_s", "zero_copy_read_bytes_per_s", "d2d_copy_bytes_per_s")
TEXT_COLUMNS = ("goal", "meets goal", "ceiling goal", "meets ceiling goal", "paper")
"""The speed table's columns of words, empty where a row has none."""
CEILING_KEYS = {"cold": "zero_copy_read_bytes_per_s", "alignment": "zero_copy_read_bytes_per_s",
                "hot": "d2d_copy_bytes_per_s"}


@dataclasses.dataclass(frozen=True)
class Config:
    """One measurement: ``study`` cold / hot / alignment, ``path`` "kernel" (launch only) or "full gather"."""

    study: str
    row_bytes: int
    dtype: torch.dtype
    variant: str
    path: str = "kernel"

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def describe(self) -> str:
        return f"{self.study} {self.row_bytes} B {self.dtype_name} {self.variant} {self.path}"


def configurations(variants=VARIANTS, default: str = DEFAULT_VARIANT) -> list[Config]:
    """Every measurement of a run, in the order it runs."""
    out = []
    for dtype in DTYPES:
        for row_bytes in ROW_BYTES:
            for study in ("cold", "hot"):
                out += [Config(study, row_bytes, dtype, variant) for variant in variants]
                out.append(Config(study, row_bytes, dtype, default, "full gather"))
    out += [Config("alignment", row_bytes, torch.float32, v) for row_bytes in ALIGNMENT_ROW_BYTES for v in variants]
    return out


def table_view(buffer: torch.Tensor, row_bytes: int, dtype: torch.dtype, *, offset: int = 0,
               max_bytes: int | None = None) -> torch.Tensor:
    """The largest (N, row_bytes / itemsize) ``dtype`` table inside ``buffer[offset:offset + max_bytes]``, no copy."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    if row_bytes % itemsize or offset % itemsize:
        raise ValueError(f"{row_bytes} B rows at offset {offset} do not hold whole {dtype} elements")
    available = len(buffer) - offset if max_bytes is None else min(max_bytes, len(buffer) - offset)
    rows = available // row_bytes
    if rows < 1:
        raise ValueError(f"a {len(buffer)} B buffer holds no {row_bytes} B row at offset {offset}")
    return buffer[offset:offset + rows * row_bytes].view(dtype).view(rows, row_bytes // itemsize)


def _goal(config: Config) -> float | None:
    if config.path != "kernel":
        return None
    if config.study == "cold":
        return COLD_GOAL if config.row_bytes >= 512 else None
    return HOT_GOAL if config.study == "hot" else None


SPEED_COLUMNS = ("study", "path", "dtype", "row bytes", "variant", "ours (GB/s)", "peer", "peer (GB/s)", "ours / peer",
                 "ceiling", "ours / ceiling", *TEXT_COLUMNS)
"""The speed table's columns (``speed_table``), which its readers check a file for."""


def speed_table(results: list[tuple[Config, float, float]], ceilings: dict) -> pd.DataFrame:
    """One row per measurement ``(config, ours B/s, peer B/s)``: both speeds, their ratio, the ceiling share, goals."""
    rows = []
    for config, ours, peer in results:
        peer_name, ceiling_name = PEERS[config.study]
        ceiling = ceilings[CEILING_KEYS[config.study]]
        goal = _goal(config)
        ceiling_goal = CEILING_GOAL if config.study == "cold" and config.path == "kernel" else None
        rows.append({
            "study": config.study, "path": config.path, "dtype": config.dtype_name, "row bytes": config.row_bytes,
            "variant": config.variant, "ours (GB/s)": ours / 1e9, "peer": peer_name, "peer (GB/s)": peer / 1e9,
            "ours / peer": ours / peer, "goal": _goal_text(goal), "meets goal": _verdict(ours / peer, goal),
            "ceiling": ceiling_name, "ours / ceiling": ours / ceiling, "ceiling goal": _goal_text(ceiling_goal),
            "meets ceiling goal": _verdict(ours / ceiling, ceiling_goal),
            "paper": PAPER_ALIGNMENT.get(config.variant, "") if config.study == "alignment" else "",
        })
    return pd.DataFrame(rows)


def _goal_text(goal: float | None) -> str:
    return "" if goal is None else f">= {goal:.2f}"


def _verdict(ratio: float, goal: float | None) -> str:
    return "" if goal is None else ("yes" if ratio >= goal else "no")


def fastest_variants(table: pd.DataFrame) -> pd.DataFrame:
    """Per cold / hot case (dtype, row bytes) of the kernel: the fastest variant and each variant's share of it."""
    kernel = table[(table["path"] == "kernel") & table["study"].isin(["cold", "hot"])]
    wide = kernel.pivot(index=["study", "dtype", "row bytes"], columns="variant", values="ours (GB/s)")
    shares = wide.div(wide.max(axis=1), axis=0)
    out = pd.DataFrame({"fastest": wide.idxmax(axis=1), "GB/s": wide.max(axis=1)})
    for variant in wide.columns:
        out[f"{variant} / fastest"] = shares[variant]
    return out.reset_index()


def recommend_default(fastest: pd.DataFrame) -> tuple[str, str]:
    """``(variant, why)``: the variant with the highest geometric-mean share of the fastest over every case."""
    columns = [c for c in fastest.columns if c.endswith(" / fastest")]
    scores = {c.removesuffix(" / fastest"): math.exp(fastest[c].map(math.log).mean()) for c in columns}
    best = max(scores, key=scores.get)
    wins = int((fastest["fastest"] == best).sum())
    return best, (f"fastest in {wins} of {len(fastest)} cold and hot cases, {scores[best]:.3f} of the fastest "
                  f"on geometric mean (" + ", ".join(f"{v} {s:.3f}" for v, s in scores.items()) + ")")


def model_check_table(checks: list[dict], memcpy: dict | None) -> pd.DataFrame:
    """Measured / modelled PCIe bytes per case, and cudaMemcpy's measured / copied bytes as the overhead reference.

    Each check: row bytes, host offset, variant, gathered rows, modelled payload and requests, measured RX and TX
    (``None`` where NVML gave nothing, with ``reason``).
    """
    rows = []
    for check in checks:
        rx, tx = check["measured rx"], check["measured tx"]
        ratio = rx / check["modelled payload"] if rx is not None else None
        rows.append({
            "case": f"gather {check['variant']}, {check['row bytes']} B rows, row 0 at byte {check['offset']} of a line",
            "bytes (model)": check["modelled payload"], "measured RX": rx if rx is not None else "unavailable",
            "measured / model": ratio, "goal": f"1 +- {MODEL_TOLERANCE:.0%}",
            "within goal": "" if ratio is None else ("yes" if abs(ratio - 1) <= MODEL_TOLERANCE else "no"),
            "measured TX per modelled request": tx / check["modelled requests"] if tx is not None else None,
            "note": check.get("reason") or "",
        })
    if memcpy is not None:
        rx = memcpy["measured rx"]
        rows.append({
            "case": "pinned cudaMemcpy H2D (reference: protocol overhead)", "bytes (model)": memcpy["bytes"],
            "measured RX": rx if rx is not None else "unavailable",
            "measured / model": rx / memcpy["bytes"] if rx is not None else None, "goal": "", "within goal": "",
            "measured TX per modelled request": None, "note": memcpy.get("reason") or "",
        })
    return pd.DataFrame(rows)


def _ids(num_rows: int, count: int, device, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, num_rows, (count,), device=device, generator=generator)


def _check_rows(out: torch.Tensor, table: torch.Tensor, ids: torch.Tensor, what: str) -> None:
    """Refuse to time a gather that returns wrong bytes: compare the first rows with the host table's."""
    sample = ids[:256].cpu()
    if not torch.equal(out[: len(sample)].cpu().view(torch.uint8), table[sample].view(torch.uint8)):
        raise RuntimeError(f"the gather returned wrong rows for {what}; no numbers were written")


def measure_config(config: Config, buffer: torch.Tensor, device, repeat: int) -> tuple[float, float]:
    """``(ours, peer)`` in useful bytes/s for one configuration."""
    hot = config.study == "hot"
    table = table_view(buffer, config.row_bytes, config.dtype, max_bytes=HOT_TABLE_BYTES if hot else None)
    count = min(HOT_GATHER_BYTES if hot else COLD_GATHER_BYTES, len(buffer)) // config.row_bytes  # memcpy's source
    useful = count * config.row_bytes
    loader = CombinedTensor(table, len(table) if hot else 0, device, variant=config.variant)
    try:
        ids = _ids(len(table), count, device)
        out = torch.empty((count, table.shape[1]), dtype=table.dtype, device=device)
        if config.path == "kernel":
            loader.launch_kernel(ids, out)
            _check_rows(out, table, ids, config.describe())
            ours = useful / best_cuda_seconds(lambda: loader.launch_kernel(ids, out), device, repeat)
        else:
            _check_rows(loader.gather(ids), table, ids, config.describe())
            ours = useful / best_cuda_seconds(lambda: loader.gather(ids), device, repeat)
        if hot:
            peer = useful / best_cuda_seconds(lambda: torch.index_select(loader.hot, 0, ids, out=out), device, repeat)
        else:
            target, source = out.view(-1).view(torch.uint8), buffer[:useful]
            peer = useful / best_cuda_seconds(lambda: target.copy_(source, non_blocking=True), device, repeat)
    finally:
        loader.close()
    return ours, peer


def reach_windows(table_bytes: int) -> list[int]:
    """The reach study's windows in bytes: ``REACH_WINDOWS`` smaller than the table, then the whole table."""
    return [window for window in REACH_WINDOWS if window < table_bytes] + [table_bytes]


def cold_gather_rate(buffer: torch.Tensor, row_bytes: int, window: int, device, repeat: int, *,
                     gather_bytes: int = COLD_GATHER_BYTES, max_blocks: int | None = None) -> float:
    """Useful bytes/s of the cold gather kernel (default variant, fp32 rows) over ``gather_bytes`` of random rows of
    the table in ``buffer[:window]``, checked first; ``max_blocks`` caps its grid."""
    table = table_view(buffer, row_bytes, torch.float32, max_bytes=window)
    count = gather_bytes // row_bytes
    loader = CombinedTensor(table, 0, device, max_blocks=max_blocks)
    try:
        ids = _ids(len(table), count, device)
        out = torch.empty((count, table.shape[1]), dtype=table.dtype, device=device)
        loader.launch_kernel(ids, out)
        _check_rows(out, table, ids, f"{row_bytes} B rows in a {window} B window")
        return count * row_bytes / best_cuda_seconds(lambda: loader.launch_kernel(ids, out), device, repeat)
    finally:
        loader.close()


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:g} GiB" if nbytes >= 1 << 30 else f"{nbytes / 2**20:g} MiB"


def reach_table(rates: list[tuple[int, int, float]], table_bytes: int, ceilings: dict) -> pd.DataFrame:
    """One row per ``(row bytes, window bytes, B/s)``: the window in words, GB/s, its share of the sequential
    zero-copy read ceiling, and its speed over the whole table's for the same rows."""
    whole = {row_bytes: rate for row_bytes, window, rate in rates if window == table_bytes}
    ceiling = ceilings[CEILING_KEYS["cold"]]
    return pd.DataFrame([{
        "row bytes": row_bytes,
        "window": "whole table" if window == table_bytes else f"first {_size(window)}",
        "window bytes": window, "ours (GB/s)": rate / 1e9, "ours / ceiling": rate / ceiling,
        "over the whole table": rate / whole[row_bytes] if row_bytes in whole else None,
    } for row_bytes, window, rate in rates])


def reach(buffer: torch.Tensor, table_bytes: int, device, repeat: int) -> list[tuple[int, int, float]]:
    """``(row bytes, window bytes, B/s)`` of the cold gather for every row size and window of the reach study."""
    return [(row_bytes, window, cold_gather_rate(buffer, row_bytes, window, device, repeat))
            for row_bytes in REACH_ROW_BYTES for window in reach_windows(table_bytes)]


def model_check(buffer: torch.Tensor, device) -> tuple[list[dict], dict]:
    """NVML's PCIe bytes around streams of UVA gathers and around one memcpy of the same size (module docstring)."""
    checks = []
    for row_bytes, offset, variant in MODEL_CHECK_CASES:
        table = table_view(buffer, row_bytes, torch.float32, offset=offset)
        loader = CombinedTensor(table, 0, device, variant=variant)
        batches = [_ids(len(table), MODEL_CHECK_BATCH_ROWS, device, seed)
                   for seed in range(max(1, MODEL_CHECK_BYTES // (row_bytes * MODEL_CHECK_BATCH_ROWS)))]
        counter = PCIeCounter(device)
        try:
            loader.gather(batches[0])
            torch.cuda.synchronize(device)
            loader.reset_stats()
            counter.start()
            for ids in batches:
                loader.gather(ids)
            torch.cuda.synchronize(device)
            measured = counter.delta()
            stats = loader.stats()
        finally:
            counter.close()
            loader.close()
        checks.append({
            "row bytes": row_bytes, "offset": loader.host_offset, "variant": variant,
            "modelled payload": stats.pcie_payload_bytes, "modelled requests": stats.pcie_requests,
            "measured rx": measured["rx_bytes"] if measured else None,
            "measured tx": measured["tx_bytes"] if measured else None, "reason": counter.reason,
        })
    nbytes = min(MODEL_CHECK_BYTES, len(buffer))
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    counter = PCIeCounter(device)
    try:
        counter.start()
        target.copy_(buffer[:nbytes], non_blocking=True)
        torch.cuda.synchronize(device)
        measured = counter.delta()
    finally:
        counter.close()
    memcpy = {"bytes": nbytes, "measured rx": measured["rx_bytes"] if measured else None, "reason": counter.reason}
    return checks, memcpy


def _fill(buffer: torch.Tensor) -> None:
    """Random bytes in every page (a 1 MiB random block repeated), so wrong rows cannot pass the spot check."""
    block = torch.randint(0, 256, (1 << 20,), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    whole = len(buffer) // len(block) * len(block)
    buffer[:whole].view(-1, len(block)).copy_(block)
    buffer[whole:] = block[: len(buffer) - whole]


def measure(records_dir, device="cuda", *, table_bytes: int = TABLE_BYTES, repeat: int = REPEAT,
            progress: bool = True) -> Path:
    """Measure everything the module docstring lists on ``device`` and write the records into ``records_dir``; their
    path."""
    if not torch.cuda.is_available():
        raise BadValue("gpubench needs a CUDA GPU and none is visible here; no GPU numbers were made")
    device = torch.device(device)
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if table_bytes < max(HOT_TABLE_BYTES, COLD_GATHER_BYTES, MODEL_CHECK_BYTES):
        raise BadValue(f"--table-gib must be at least {max(HOT_TABLE_BYTES, MODEL_CHECK_BYTES) / 2**30:g}")
    record = provenance(device)
    ceilings = measure_ceilings(device)
    buffer = page_aligned_empty((table_bytes + PAGE_BYTES,), torch.uint8)  # a page more: the offset-64 table keeps its full size
    _fill(buffer)
    register_host_memory(buffer)
    try:
        results = []
        bar = tqdm(configurations(), desc="gpubench", unit="config", disable=not progress)
        for config in bar:
            bar.set_postfix_str(config.describe())
            results.append((config, *measure_config(config, buffer, device, repeat)))
        bar.close()
        rates = reach(buffer, table_bytes, device, repeat)
        checks, memcpy = model_check(buffer, device)
    finally:
        unregister_host_memory(buffer)
    size = "" if table_bytes == TABLE_BYTES else f" --table-gib {table_bytes / 2**30:g}"
    facts = {"command": f"tierbench gpubench{size} --out {records_dir}", "ceilings": ceilings, "table_bytes": table_bytes,
             "repeat": repeat, "default_variant": DEFAULT_VARIANT}
    return write_records(records_dir, speed_table(results, ceilings), model_check_table(checks, memcpy),
                         reach_table(rates, table_bytes, ceilings), record, facts)


def write_records(records_dir, table: pd.DataFrame, checks: pd.DataFrame, reached: pd.DataFrame, record: dict,
                  facts: dict) -> Path:
    """The speed table with its sidecar (``facts``: the command, the ceilings, the settings), the model check and the
    reach study, each row with ``record``; the speed table's path."""
    atomic.write_csv(Path(records_dir) / f"{CHECKS}.csv", checks.assign(**record), index=False)
    atomic.write_csv(Path(records_dir) / f"{REACH}.csv", reached.assign(**record), index=False)
    return records.write_records(Path(records_dir) / f"{STEM}.csv", table.assign(**record), record, facts, index=False)


def read_records(path) -> tuple[records.Records, records.Records, records.Records | None]:
    """The speed table in ``path`` (the records' folder or ``microbench.csv``), the model check and the reach study
    beside it, without their provenance columns; the reach study is ``None`` in records made before gpubench measured
    it (the first visit's)."""
    path = Path(path)
    speeds = records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS)
    missing = [column for column in SPEED_COLUMNS if column not in speeds.table]
    if missing:
        raise BadValue(f"{speeds.path} lacks the speed table's columns {', '.join(missing)}: not gpubench's records")
    kept = list(records.PROVENANCE_COLUMNS)
    table = speeds.table.drop(columns=kept, errors="ignore")
    table[list(TEXT_COLUMNS)] = table[list(TEXT_COLUMNS)].fillna("")

    def beside(name: str) -> records.Records:
        at = speeds.path.with_name(f"{name}.csv")
        return records.Records(records.read_table(at).drop(columns=kept, errors="ignore"), speeds.provenance, {}, at)

    reached = speeds.path.with_name(f"{REACH}.csv")
    return dataclasses.replace(speeds, table=table), beside(CHECKS), beside(REACH) if reached.exists() else None


def summary(table: pd.DataFrame) -> str:
    """The fastest variant per case, and the one the default should be, to print."""
    fastest = fastest_variants(table)
    default, why = recommend_default(fastest)
    return (fastest.to_string(index=False, float_format=lambda v: f"{v:.3g}") + f"\nthe default should be: "
            f"{default} ({why}); tiering.features.zero_copy.DEFAULT_VARIANT is {DEFAULT_VARIANT}")
