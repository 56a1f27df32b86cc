"""linear_cross_entropy's wing: the vocab-parallel cross entropy fused with the LM head.

    api.py            the public function: checks the call once, resolves its route, runs it
    call.py           LceCall, the checked call as one value; LossOptions; the output tuple
    checks.py         every argument's check (SPEC §6), making the LceCall
    routes.py         the route table, "auto"'s choice, impl=, the one autograd Function
    route_plain.py    fused-plain: plain cross entropy on the SPEC §1/§3 operators
    route_cpu_options.py  cpu-options: any option, or float32, in the CPU kernels
    route_device.py   the npu-* routes: device-agnostic torch over the operators
    route_npu_custom.py   their backward on our Ascend C op, with the options CANN lacks
    option_math.py    the options' math on row statistics (SPEC §7), shared by the routes
    logits.py         the head's fp32 logits and the one logit transform, on the device
    statistics.py     row statistics across shards; the one-owner target check
    grad_cache.py, kept_rows.py   the CPU step's logits-gradient cache and kept rows
    float32.py        a plain-torch float32 path (Hugging Face's float32 heads)
    torch_linear_cross_entropy.py torch's F.linear_cross_entropy on these routes

Each file imports only files listed below it in the order of a call (api → routes →
route_* → option_math, logits, statistics → call), never back up.
"""

from .api import linear_cross_entropy
from .call import HIGH_PERFORMANCE, MEMORY_SAVING, LinearCrossEntropyOutput
from .routes import ROUTE_NAMES

__all__ = ["linear_cross_entropy", "LinearCrossEntropyOutput", "MEMORY_SAVING",
           "HIGH_PERFORMANCE", "ROUTE_NAMES"]
