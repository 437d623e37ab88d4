"""``python -m taskqueue``: the same program as the ``taskqueue`` command."""

from .cli import main

if __name__ == "__main__":
    main()
