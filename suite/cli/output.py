"""What a report command prints when it is done."""


def show(paths) -> None:
    """Print a report's table (its first file) and where every file of it went."""
    print(paths[0].read_text())
    for path in paths:
        print(f"wrote {path}")
