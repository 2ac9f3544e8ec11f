"""Sub-commands of the ``ltr`` command line (see :mod:`ltr.cli`)."""
