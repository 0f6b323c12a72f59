"""`python -m bot.cli`: the `personae` command."""

import sys

from bot.cli import main

sys.exit(main())
