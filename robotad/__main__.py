"""``python -m robotad``: the same as the ``robotad`` command."""

from __future__ import annotations

from robotad.cli import main

if __name__ == "__main__":
    main(prog_name="robotad")
