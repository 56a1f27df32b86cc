"""Public path of ascend_ops.training.integrations.megatron (its docstring says what it does).

The module replaces itself with the real one, so `import ascend_ops.integrations.megatron as
aom` gives that module object itself.
"""

import sys

from ..training.integrations import megatron as _module

sys.modules[__name__] = _module
