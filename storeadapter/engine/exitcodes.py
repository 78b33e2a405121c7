"""The store's command line's exit codes, which the console's `tidemark` command shares."""

EXIT_OK, EXIT_CORRUPT, EXIT_USAGE, EXIT_STORE_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

__all__ = ["EXIT_CORRUPT", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_STORE_ERROR", "EXIT_USAGE"]
