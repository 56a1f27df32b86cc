"""Public path of ascend_ops.training.integrations.transformers (its docstring says what it does).

The module replaces itself with the real one, so `import ascend_ops.integrations.transformers
as aot` gives that module object itself (one copy of its state, monkeypatching reaches it).
Run as a program (`python -m ascend_ops.integrations.transformers --check MODEL`) it is the
checker's command line.
"""

import sys

from ..training.integrations import transformers as _module

if __name__ == "__main__":
    from ..training.integrations._hf_check import main

    sys.exit(main())
sys.modules[__name__] = _module
