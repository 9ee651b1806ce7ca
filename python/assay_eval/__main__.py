"""`python -m assay_eval ARGS`: runs the installed `assay` with ARGS."""

from __future__ import annotations

import os
import sys

from assay_eval import find_assay_bin


def _main() -> None:
    try:
        assay = os.fsdecode(find_assay_bin())
    except FileNotFoundError as e:
        # No binary, nothing ran: exit 3, as assay does when infrastructure keeps it from a verdict.
        print(f"error: {e}", file=sys.stderr)
        sys.exit(3)
    args = [assay, *sys.argv[1:]]
    if sys.platform == "win32":
        # No exec on Windows: run it and pass its exit code on.
        import subprocess

        sys.exit(subprocess.run(args, check=False).returncode)
    os.execv(assay, args)


if __name__ == "__main__":
    _main()
