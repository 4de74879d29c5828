"""torch's decorators that keep the signature of what they decorate, though
torch leaves them untyped: to mypy a forward or function decorated with
one is Any, and its calls went unchecked.  The plugin types each as giving
back the function it is given (plugin/decorators.py).  A table: a new
decorator is a row."""

from __future__ import annotations

from typing import Dict, Tuple

# function -> its parameter that takes the function to decorate.  Called
# without it (`@custom_fwd(device_type="cuda")`), the call makes the
# decorator: typed as one that gives back what it is given.
FUNCTIONS: Dict[str, str] = {
    "torch.amp.autocast_mode.custom_fwd": "fwd",
    "torch.amp.autocast_mode.custom_bwd": "bwd",
    "torch.cuda.amp.autocast_mode.custom_fwd": "fwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "bwd",
    "torch.compiler.disable": "fn",
    "torch.compiler.allow_in_graph": "fn",
    "torch._dynamo.decorators.disable": "fn",
}

# classes whose instances decorate (`@torch.autocast("cuda")`): their
# __call__ takes the function as `func`.
CALLABLE_CLASSES: Tuple[str, ...] = (
    "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast_mode.autocast",
)
CALL_PARAMETER = "func"
