"""``python -m propertok``: the same command line as the ``propertok`` script."""

from .cli import main

raise SystemExit(main())
