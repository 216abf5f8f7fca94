"""Per-epoch training records as a table (markdown and CSV), with provenance: ``tierbench train --out DIR``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.io import atomic
from suite.io.provenance import caption, provenance


def write_training_report(results, settings: dict, out_dir, device) -> list[Path]:
    out_dir = Path(out_dir)
    record = provenance(device)
    table = pd.DataFrame([r.as_record() for r in results]).set_index("epoch")
    name = f"train-{settings['dataset']}" + (f"-{settings['scorer']}" if settings["scorer"] != "none" else "")
    if settings["loader"] != "in-memory":
        name += f"-{settings['loader']}"
    md, csv = out_dir / f"{name}.md", out_dir / f"{name}.csv"
    described = ", ".join(f"{k} {v}" for k, v in settings.items()
                          if k != "majority_valid_accuracy" and v is not None)  # batch_limit None: whole epochs
    atomic.write_text(
        md,
        f"# GraphSAGE training, {settings['dataset']}\n\n{caption(record)}.\n{described}.\n"
        f"Majority-class accuracy on the validation split: {settings['majority_valid_accuracy']:.3f}.\n\n"
        + table.to_markdown(floatfmt=".3f") + "\n",
    )
    atomic.write_csv(csv, table.assign(**settings, **record))
    return [md, csv]
