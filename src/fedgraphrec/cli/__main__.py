"""``python -m fedgraphrec.cli``: the same as the ``fedgraphrec`` script."""

from fedgraphrec.cli import main

main()
