"""`python -m bot`: run the Discord bot (the same as `personae run`)."""

import sys

from bot.cli import main

sys.exit(main(["run", *sys.argv[1:]]))
