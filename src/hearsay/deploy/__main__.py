"""`python -m hearsay.deploy CLIPS_DIR ...`: hearsay-score (the console script) run as a module."""

import sys

from hearsay.deploy import main

if __name__ == "__main__":
    sys.exit(main())
