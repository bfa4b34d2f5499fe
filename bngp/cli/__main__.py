import sys

from bngp.cli import main

sys.exit(main())
