import sys

from videoseek.cli import main

sys.exit(main())
