"""The ``attune`` distribution's own import name: inspect_ai names a package's tasks after it.

It holds only the inspect entry point (``attune.inspect_registry``); the benchmark is in ``attunebench``.
"""
