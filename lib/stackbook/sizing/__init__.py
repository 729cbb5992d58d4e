"""Memory arithmetic (does the model fit, how many sequences live at once), the hardware it is
done for, and each engine's own accounting of the cache pool."""
from stackbook.sizing.engine_pools import (SGLANG_STATE_SLOTS, balanced_mamba_ratio,  # noqa: F401
                                           sglang_kv_accounting, vllm_kv_accounting)
from stackbook.sizing.hardware import Accelerator, accelerator, accelerator_catalog, this_cpu  # noqa: F401
from stackbook.sizing.memory import *  # noqa: F401,F403  the arithmetic itself
from stackbook.sizing.memory import GB, GiB  # noqa: F401
