"""What :mod:`openprogram.runtime` needs from the tool layer beyond its public face: the
``exec(choices=...)`` menu, deferred loading, and the context variables an exec sets for
the code it runs.

The runtime reaches the tool layer through public modules only (a test pins it), so these
hooks have public names here; applications have no use for them.
"""

from openprogram.tools._choices import Menu, PickError
from openprogram.tools._context import current_runtime_var
from openprogram.tools._deferred import Deferral, current_loaded_var

__all__ = ["Deferral", "Menu", "PickError", "current_loaded_var", "current_runtime_var"]

for _value in (Deferral, Menu, PickError):
    _value.__module__ = __name__  # reported from here, not from the private modules
del _value
