"""``python -m ukdpack``."""

from ukdpack.cli import main

raise SystemExit(main())
