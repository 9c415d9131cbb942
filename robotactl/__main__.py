"""``python -m robotactl``: the same CLI as the installed ``robotactl`` script."""

from __future__ import annotations

from robotactl.entry import main

if __name__ == "__main__":
    main()
