"""Everything that touches Tidemark's store files.

``storeadapter.engine`` is the store itself (no Django); the modules beside it are
the one door the Django console uses.
"""
