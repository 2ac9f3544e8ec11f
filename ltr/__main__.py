import sys

from ltr.cli import main

sys.exit(main())
