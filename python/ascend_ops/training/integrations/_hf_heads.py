"""Which Transformers models the loss patch can take, read from the source of their forward.

The patch keeps a model's own forward and replaces only what follows its head, so it can take
a model whose forward, after `logits = self.<head>(hidden)` (the head being
`get_output_embeddings()`, a torch.nn.Linear, called once), does to the logits no more than

    logits = logits * s  /  logits / s           # a scale: Granite, Cohere, Falcon-H1 ...
    logits = cap * tanh(logits / cap)            # a soft-cap: Gemma 2/3, PaliGemma ...
    logits = logits.float()  /  .contiguous()    # an upcast, a layout

with every value read from the model's configuration (or a plain number the model keeps),
each possibly under an `if` on the configuration, then

    if labels is not None:
        loss = self.loss_function(logits, labels, vocab_size, **kwargs)   # ForCausalLMLoss

and, for a mixture of experts, `loss += coef * aux_loss` with the router's load-balancing loss
computed by the forward itself. The scale and the soft-cap are linear_cross_entropy's
`logit_scale` and `softcap` (SPEC §7: the scale first, then the cap; the head's bias is
`linear_bias`), so a forward that scales after capping is refused, as is everything else a
forward may do: another loss, a z-loss, writing into or cutting the logits, labels read
before the head, the head called twice. A vision-language model whose head is its language
model's (Llama 4: `language_model.lm_head`) is read through both forwards: the language
model's, called without labels, up to the logits it returns; the outer one from there.
`head_rule(model)` reads the forward with the
model's own configuration (a branch whose condition is false is not taken) and returns the
HeadRule or raises NotPatchable, whose message names the statement it cannot take.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import math
import textwrap
from dataclasses import dataclass

import torch

# ForCausalLMLoss's own keywords: a forward passing one of them itself changes the loss.
_LOSS_KEYWORDS = ("num_items_in_batch", "ignore_index", "shift_labels")
_TANH = {"torch.tanh", "nn.functional.tanh", "torch.nn.functional.tanh", "F.tanh"}
_FLOAT32 = {"torch.float32", "torch.float"}
# Methods of a configuration that a forward calls to reach its text part.
_CONFIG_METHODS = {"get_text_config"}


class NotPatchable(ValueError):
    """The forward does something between its head and its loss that the patch cannot
    reproduce; the message names it."""


@dataclass(frozen=True)
class HeadRule:
    """What the model does between its head and its loss, as linear_cross_entropy's options."""

    head: str                             # path of the head module on the model
    logit_scale: float = 1.0
    softcap: float | None = None
    aux_loss_coef: float | None = None    # `loss += coef * aux_loss` (MoE), None without
    key: str = ""                         # code_key of the forwards read for it

    def options(self) -> dict:
        """linear_cross_entropy's logit options, each left out when neutral."""
        opts = {}
        if self.logit_scale != 1.0:
            opts["logit_scale"] = self.logit_scale
        if self.softcap is not None:
            opts["softcap"] = self.softcap
        return opts

    def describe(self, bias: bool = False) -> str:
        """The options, e.g. "logit_scale=0.25, aux_loss_coef=0.001"; "plain" without any;
        `bias`: the head has one (linear_bias)."""
        parts = [f"{k}={v:g}" for k, v in self.options().items()]
        if bias:
            parts.append("linear_bias")
        if self.aux_loss_coef is not None:
            parts.append(f"aux_loss_coef={self.aux_loss_coef:g}")
        return ", ".join(parts) or "plain"


def forward_owner(model: torch.nn.Module) -> type:
    """The class in model's MRO that defines the forward it runs."""
    for cls in type(model).__mro__:
        if "forward" in cls.__dict__:
            return cls
    raise NotPatchable(f"{type(model).__name__} has no forward")


@functools.lru_cache(maxsize=None)
def forward_source(cls: type) -> str:
    return textwrap.dedent(inspect.getsource(cls.__dict__["forward"]))


def code_key(classes: list[type]) -> str:
    """Names the exact code a verdict was reached on: the source of each class's forward
    (the model's, and any other the reading looked into) and of the loss they call. A
    verdict is reused only where all of it is unchanged."""
    from transformers.loss import loss_utils

    text = "\n".join([forward_source(c) for c in classes]
                     + [inspect.getsource(loss_utils.ForCausalLMLoss),
                        inspect.getsource(loss_utils.fixed_cross_entropy)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def class_key(cls: type) -> str:
    """code_key of a class's own forward: what a verdict names when no reading was made."""
    return code_key([next(c for c in cls.__mro__ if "forward" in c.__dict__)])


def head_path(model: torch.nn.Module) -> list[str]:
    """The attribute names leading from `model` to its head (get_output_embeddings()): one
    for a head of its own, two for a language model's head inside it (Llama 4's
    language_model.lm_head)."""
    name = type(model).__name__
    head = model.get_output_embeddings()
    if head is None:
        raise NotPatchable(f"{name} has no output embeddings (get_output_embeddings() is None)")
    if not isinstance(head, torch.nn.Linear):
        raise NotPatchable(f"{name}'s head must be a torch.nn.Linear, got {type(head).__name__}")
    if type(head).forward is not torch.nn.Linear.forward:
        raise NotPatchable(f"{name}'s head {type(head).__name__} is a torch.nn.Linear with a "
                           f"forward of its own")
    path = next((p for p, m in model.named_modules() if m is head), None)
    if path is None:
        raise NotPatchable(f"{name}'s head is not one of its modules")
    parts = path.split(".")
    inner = getattr(model, parts[0]) if len(parts) == 2 else None
    if inner is not None and getattr(inner, "get_output_embeddings", lambda: None)() is head:
        return parts
    if len(parts) != 1:
        raise NotPatchable(f"{name}'s head is {path}, inside a module whose forward the "
                           f"patch does not read")
    return parts


def head_rule(model: torch.nn.Module, vocab_parallel: bool = False) -> HeadRule:
    """The HeadRule of `model`'s forward under its configuration, or NotPatchable.
    vocab_parallel: the head is this rank's rows of the vocabulary, so the loss's vocab_size
    (the whole vocabulary's) is not its width."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    if model.loss_function is not ForCausalLMLoss:  # a loss_type of its configuration
        raise NotPatchable(f"{type(model).__name__}.loss_function is "
                           f"{getattr(model.loss_function, '__name__', model.loss_function)}, "
                           f"the patch reproduces ForCausalLMLoss only")
    path = head_path(model)
    read: list[type] = []
    if len(path) == 1:
        reading = _ForwardReader(model, path[0], read, vocab_parallel=vocab_parallel).read()
    else:
        # The head is the language model's: the outer forward calls it for its logits (no
        # labels), whose forward transforms them as any causal LM's would.
        inner = _ForwardReader(getattr(model, path[0]), path[1], read,
                               returns_logits=True).read()
        reading = _ForwardReader(model, path[0], read, inner_ops=inner.ops,
                                 vocab_parallel=vocab_parallel).read()
    return HeadRule(head=".".join(path), logit_scale=reading.logit_scale,
                    softcap=reading.softcap, aux_loss_coef=reading.aux_loss_coef,
                    key=code_key(read))


def _parse_forward(model: torch.nn.Module, read: list[type]) -> tuple[str, ast.FunctionDef]:
    """The name of the class whose forward `model` runs and that forward's syntax tree; the
    class is added to `read`."""
    cls = forward_owner(model)
    try:
        source = forward_source(cls)
    except (OSError, TypeError) as e:
        raise NotPatchable(f"the source of {cls.__name__}.forward cannot be read ({e})") from e
    if cls not in read:
        read.append(cls)
    return cls.__name__, ast.parse(source).body[0]


def _ignores_labels(module: torch.nn.Module, read: list[type]) -> bool:
    """Whether `module`'s forward takes `labels` by name and never reads it (Gemma 3's
    multimodal model is handed the labels and ignores them)."""
    try:
        _, func = _parse_forward(module, read)
    except NotPatchable:
        return False
    params = [a.arg for a in func.args.args + func.args.kwonlyargs]
    return "labels" in params and not any(_reads_name(s, "labels") for s in func.body)


class _Dynamic(Exception):
    """An expression that is not a value of the configuration."""


@dataclass(frozen=True)
class _Reading:
    ops: list
    logit_scale: float
    softcap: float | None
    aux_loss_coef: float | None


class _ForwardReader:
    """Reads one forward. `head` is the attribute the forward calls: the head itself, or
    (with inner_ops, the language model's own reading) the language model returning the
    logits. returns_logits: a language model's forward called without labels, whose
    output's `logits` the outer forward takes."""

    def __init__(self, model, head: str, read: list[type], *, returns_logits: bool = False,
                 inner_ops: list | None = None, vocab_parallel: bool = False):
        self.model, self.head, self.read_classes = model, head, read
        self.vocab_parallel = vocab_parallel
        self.owner, self.func = _parse_forward(model, read)
        self.returns_logits = returns_logits
        self.inner_ops = inner_ops
        self.inner_output = None     # the name of the language model's output (inner_ops)
        self.logits = None           # the name the head's output is bound to
        self.env = {"self": model}   # names bound from the configuration
        self.ops: list[tuple] = []   # ("mul", v) / ("div", v) / ("tanh",) on the logits
        self.loss_called = False
        self.aux_loss_coef = None

    def refuse_dynamic(self, cause: _Dynamic, what: str, node=None) -> NotPatchable:
        error = self.refuse(what, node)
        return NotPatchable(f"{error} ({cause})") if str(cause) else error

    def refuse(self, what: str, node=None) -> NotPatchable:
        where = f": `{_line(node)}`" if node is not None else ""
        return NotPatchable(f"{self.owner}.forward {what}{where}")

    def read(self) -> _Reading:
        calls = [n for n in ast.walk(self.func) if self._is_head_call(n)]
        what = "its language model" if self.inner_ops is not None else "its head"
        if len(calls) != 1:
            raise self.refuse(f"calls {what} self.{self.head} {len(calls)} times "
                              f"(the patch takes one call)" if calls else
                              f"does not call {what} self.{self.head}")
        body = [s for s in self.func.body if not _is_docstring(s)]
        at = next((i for i, s in enumerate(body) if self._holds_head_call(s)), None)
        if at is None:
            raise self.refuse(f"calls {what} self.{self.head} inside a block")
        for stmt in body[:at]:
            self._before_head(stmt)
        if self.inner_ops is None:
            self._head_statement(body[at])
        else:
            self._language_model_statement(body[at])
        self._statements(body[at + 1:])
        if self.logits is None:
            raise self.refuse(f"does not take the logits from {what}")
        if not self.loss_called and not self.returns_logits:
            raise self.refuse("does not compute its loss with self.loss_function")
        if self.inner_ops is not None:
            self.ops = list(self.inner_ops) + self.ops
        scale, softcap = self._logit_options()
        return _Reading(ops=self.ops, logit_scale=scale, softcap=softcap,
                        aux_loss_coef=self.aux_loss_coef)

    def _before_head(self, stmt):
        """The decoder's part: anything, except reading the labels (the patched forward runs
        it without them), unless a submodule is handed them and ignores them."""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == "labels":
                break
        else:
            return
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "labels" and isinstance(kw.value, ast.Name) \
                        and kw.value.id == "labels" and isinstance(node.func, ast.Attribute) \
                        and _is_self(node.func.value) \
                        and isinstance(getattr(self.model, node.func.attr, None), torch.nn.Module) \
                        and _ignores_labels(getattr(self.model, node.func.attr), self.read_classes):
                    kw.value = ast.Constant(None)  # what that submodule gets when patched
        if _reads_name(stmt, "labels"):
            handed = [n.func.attr for n in ast.walk(stmt) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Attribute) and _is_self(n.func.value)
                      and any(kw.arg == "labels" for kw in n.keywords)]
            if handed:
                raise self.refuse(f"hands the labels to self.{handed[0]}, whose forward does "
                                  f"not show that it ignores them (the patched forward runs "
                                  f"without labels)", stmt)
            raise self.refuse("reads the labels before its head", stmt)

    def _language_model_statement(self, stmt):
        """`outputs = self.language_model(...)` (no labels): its output holds the logits."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and self._is_head_call(stmt.value)):
            raise self.refuse("does not bind its language model's output to a name", stmt)
        if any(kw.arg == "labels" for kw in stmt.value.keywords):
            raise self.refuse("hands the labels to its language model", stmt)
        self.inner_output = stmt.targets[0].id

    def _is_inner_logits(self, node) -> bool:
        """`outputs[0]` or `outputs.logits` of the language model's output."""
        if self.inner_output is None:
            return False
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id == self.inner_output and isinstance(node.slice, ast.Constant) \
                and node.slice.value == 0:
            return True
        return isinstance(node, ast.Attribute) and node.attr == "logits" \
            and isinstance(node.value, ast.Name) and node.value.id == self.inner_output

    # the head and what follows it

    def _is_head_call(self, node) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == self.head and _is_self(node.func.value))

    def _holds_head_call(self, stmt) -> bool:
        return any(self._is_head_call(n) for n in ast.walk(stmt))

    def _head_statement(self, stmt):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            raise self.refuse("does not bind its head's output to a name", stmt)
        head_call = next(n for n in ast.walk(stmt.value) if self._is_head_call(n))
        if len(head_call.args) != 1 or head_call.keywords:
            raise self.refuse("calls its head with more than the hidden states", stmt)
        self.logits = stmt.targets[0].id
        self.ops += self._logit_ops(stmt.value, stmt)

    def _statements(self, stmts):
        for stmt in stmts:
            if isinstance(stmt, ast.Return):
                self._return(stmt)
                return
            self._statement(stmt)

    def _statement(self, stmt):
        if isinstance(stmt, (ast.Pass,)) or (isinstance(stmt, ast.Expr)
                                            and isinstance(stmt.value, ast.Constant)):
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if self.logits is None and self._is_inner_logits(stmt.value):
                self.logits = name
            elif name == self.logits:
                self.ops += self._logit_ops(stmt.value, stmt)
            elif _reads_name(stmt.value, self.logits):
                raise self.refuse("uses the logits for more than the loss", stmt)
            elif name in ("loss", "aux_loss") and _is_none(stmt.value):
                pass
            else:
                self.env[name] = self._value_or_dynamic(stmt.value)
            return
        if isinstance(stmt, ast.If):
            self._if(stmt, self._statement)
            return
        if _reads_name(stmt, self.logits):
            raise self.refuse("changes the logits in a way the patch cannot reproduce", stmt)
        raise self.refuse("does what the patch cannot reproduce after its head", stmt)

    def _if(self, stmt: ast.If, handle):
        test = stmt.test
        if _is_labels_given(test):
            if stmt.orelse:
                raise self.refuse("does something when no labels are given", stmt.orelse[0])
            if self.returns_logits:
                return  # a language model called without labels
            for s in stmt.body:
                self._loss_statement(s)
            return
        if _reads_name(test, "return_dict"):
            return  # the tuple branch: the patch always runs the forward with return_dict=True
        if isinstance(test, ast.Name) and test.id == "output_router_logits":
            if stmt.orelse:
                raise self.refuse("does something without router logits", stmt.orelse[0])
            self._aux_loss_block(stmt.body)
            return
        try:
            taken = self._value(test)
        except _Dynamic as e:
            raise self.refuse_dynamic(e, "branches on what is not its configuration", stmt) from None
        for s in (stmt.body if taken else stmt.orelse):
            handle(s)

    def _loss_statement(self, stmt):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "loss" \
                and isinstance(stmt.value, ast.Call) and _is_self_attr(stmt.value.func,
                                                                       "loss_function"):
            self._loss_call(stmt.value, stmt)
            return
        if isinstance(stmt, ast.If) and not _is_labels_given(stmt.test):
            self._if(stmt, self._loss_statement)
            return
        if not self.loss_called and not any(
                isinstance(n, ast.Attribute) and n.attr == "loss_function" for n in ast.walk(stmt)):
            raise self.refuse("computes its loss without self.loss_function", stmt)
        if _reads_name(stmt, self.logits):
            raise self.refuse("uses the logits for more than the loss", stmt)
        raise self.refuse("computes its loss in a way the patch cannot reproduce", stmt)

    def _loss_call(self, call: ast.Call, stmt):
        names = ("logits", "labels", "vocab_size")
        if len(call.args) > len(names):
            raise self.refuse("passes more than (logits, labels, vocab_size) to its loss", stmt)
        args = dict(zip(names, call.args))
        spread = False
        for kw in call.keywords:
            if kw.arg is None:
                spread = spread or (isinstance(kw.value, ast.Name) and kw.value.id == "kwargs")
            elif kw.arg in names:
                args[kw.arg] = kw.value
            elif kw.arg in _LOSS_KEYWORDS:
                raise self.refuse(f"passes its own {kw.arg} to its loss", stmt)
            # any other keyword reaches fixed_cross_entropy's **kwargs, which drops it
        if not (isinstance(args.get("logits"), ast.Name) and args["logits"].id == self.logits):
            raise self.refuse("gives its loss something other than its logits", stmt)
        if not (isinstance(args.get("labels"), ast.Name) and args["labels"].id == "labels"):
            raise self.refuse("gives its loss something other than its labels", stmt)
        if not spread:
            raise self.refuse("does not pass its keyword arguments (num_items_in_batch, "
                              "ignore_index, shift_labels) to its loss", stmt)
        if "vocab_size" not in args:
            raise self.refuse("gives its loss no vocab_size", stmt)
        try:
            vocab = self._value(args["vocab_size"])
        except _Dynamic as e:
            raise self.refuse_dynamic(e, "gives its loss a vocab_size that is not its configuration's",
                              stmt) from None
        out = self.model.get_output_embeddings().out_features
        if vocab != out and not self.vocab_parallel:
            raise self.refuse(f"gives its loss vocab_size={vocab} for a head of "
                              f"{out} outputs", stmt)
        self.loss_called = True

    def _aux_loss_block(self, stmts):
        """`aux_loss = load_balancing_loss_func(...)`, then `if labels is not None: loss +=
        coef * aux_loss.to(...)`."""
        for stmt in stmts:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id == "aux_loss" \
                    and not _reads_name(stmt.value, self.logits):
                continue
            if isinstance(stmt, ast.If) and _is_labels_given(stmt.test) and not stmt.orelse \
                    and len(stmt.body) == 1 and self._aux_term(stmt.body[0]):
                continue
            raise self.refuse("adds an auxiliary loss in a way the patch cannot reproduce", stmt)

    def _aux_term(self, stmt) -> bool:
        if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add)
                and isinstance(stmt.target, ast.Name) and stmt.target.id == "loss"
                and isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Mult)):
            return False
        coef, term = stmt.value.left, stmt.value.right
        if _reads_name(coef, "aux_loss"):
            coef, term = term, coef
        if not _is_aux_loss(term):
            return False
        try:
            value = self._value(coef)
        except _Dynamic as e:
            raise self.refuse_dynamic(e, "weighs its auxiliary loss by what is not its configuration",
                              stmt) from None
        self.aux_loss_coef = self._number(value, "an auxiliary loss coefficient", stmt, coef)
        return True

    def _return(self, stmt: ast.Return):
        call = stmt.value
        if not isinstance(call, ast.Call):
            raise self.refuse("does not return a model output", stmt)
        fields = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        if self.returns_logits:
            if not (isinstance(fields.get("logits"), ast.Name)
                    and fields["logits"].id == self.logits):
                raise self.refuse("does not return its logits as the output's `logits`", stmt)
            return
        if not (isinstance(fields.get("loss"), ast.Name) and fields["loss"].id == "loss"):
            raise self.refuse("does not return its loss as the output's `loss`", stmt)
        if self.aux_loss_coef is not None and not (
                isinstance(fields.get("aux_loss"), ast.Name) and fields["aux_loss"].id == "aux_loss"):
            raise self.refuse("does not return its auxiliary loss as the output's "
                              "`aux_loss`", stmt)

    # what is done to the logits

    def _logit_ops(self, node, stmt) -> list[tuple]:
        """The operations `node` applies to the head's output (or to the logits name)."""
        if self._is_head_call(node) or (isinstance(node, ast.Name) and node.id == self.logits) \
                or self._is_inner_logits(node):
            return []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, inner = node.func.attr, node.func.value
            if method in ("float", "contiguous") and not node.args and not node.keywords:
                return self._logit_ops(inner, stmt)
            if method == "to" and self._is_float32_cast(node):
                return self._logit_ops(inner, stmt)
        if isinstance(node, ast.Call) and _dotted(node.func) in _TANH and len(node.args) == 1 \
                and not node.keywords:
            return self._logit_ops(node.args[0], stmt) + [("tanh",)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            left_has = _reads_logits(node.left, self)
            right_has = _reads_logits(node.right, self)
            if left_has and not right_has:
                inner, factor = node.left, node.right
            elif right_has and not left_has and isinstance(node.op, ast.Mult):
                inner, factor = node.right, node.left
            else:
                raise self.refuse("computes its logits in a way the patch cannot reproduce",
                                  stmt)
            try:
                value = self._value(factor)
            except _Dynamic as e:
                raise self.refuse_dynamic(e, "scales its logits by what is not its configuration",
                                  stmt) from None
            value = self._number(value, "a logit scale", stmt, factor)
            op = "mul" if isinstance(node.op, ast.Mult) else "div"
            return self._logit_ops(inner, stmt) + [(op, value)]
        raise self.refuse("does to its logits what the patch cannot reproduce", stmt)

    def _is_float32_cast(self, call: ast.Call) -> bool:
        args = list(call.args) + [kw.value for kw in call.keywords if kw.arg == "dtype"]
        return len(args) == 1 and _dotted(args[0]) in _FLOAT32 and \
            all(kw.arg == "dtype" for kw in call.keywords)

    def _logit_options(self) -> tuple[float, float | None]:
        """The ops as linear_cross_entropy's `softcap(scale * logits)`: a soft-cap is
        `/ c, tanh, * c`; every other factor before it is the scale."""
        scale, softcap, ops, i = 1.0, None, self.ops, 0
        while i < len(ops):
            op = ops[i]
            if op[0] == "div" and i + 2 < len(ops) and ops[i + 1] == ("tanh",) \
                    and ops[i + 2][0] == "mul" and ops[i + 2][1] == op[1]:
                if softcap is not None:
                    raise self.refuse("soft-caps its logits twice")
                softcap, i = op[1], i + 3
                continue
            if op[0] == "tanh":
                raise self.refuse("applies tanh to its logits other than as "
                                  "cap * tanh(logits / cap)")
            if softcap is not None:
                raise self.refuse("scales its logits after soft-capping them "
                                  "(linear_cross_entropy scales first)")
            scale = scale * op[1] if op[0] == "mul" else scale / op[1]
            i += 1
        return scale, softcap

    # values of the configuration

    def _number(self, value, what: str, stmt, node) -> float:
        if isinstance(value, torch.Tensor):
            raise self.refuse(f"uses the tensor {ast.unparse(node)} as {what} (a learned or "
                              f"computed value; the patch takes a number from the "
                              f"configuration)", stmt)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise self.refuse(f"uses {ast.unparse(node)} = {value!r} as {what} (a positive "
                              f"number is needed)", stmt)
        return float(value)

    def _value_or_dynamic(self, node):
        try:
            return self._value(node)
        except _Dynamic:
            return _DYNAMIC

    def _value(self, node):
        """Evaluates `node` from the model and its configuration only."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            value = self.env.get(node.id, _DYNAMIC)
            if value is _DYNAMIC:
                raise _Dynamic
            return value
        if isinstance(node, ast.NamedExpr):
            value = self._value(node.value)
            self.env[node.target.id] = value
            return value
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise _Dynamic
            if isinstance(node.value, ast.Name) and node.value.id == self.logits:
                raise _Dynamic
            base = self._value(node.value)
            if isinstance(base, torch.Tensor):
                raise _Dynamic
            if not hasattr(base, node.attr):
                raise _Dynamic(f"{ast.unparse(node.value)} has no {node.attr}")
            return getattr(base, node.attr)
        if isinstance(node, ast.Subscript) and self._is_logits_width(node):
            return self.model.get_output_embeddings().out_features
        if isinstance(node, ast.Call):
            return self._call_value(node)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = self._value(node.left), self._value(node.comparators[0])
            op = type(node.ops[0])
            if op in (ast.Is, ast.IsNot):
                return (a is b) == (op is ast.Is)
            try:
                return _COMPARE[op](a, b)
            except (KeyError, TypeError):
                raise _Dynamic from None
        if isinstance(node, ast.BoolOp):
            values = (self._value(v) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            value = self._value(node.operand)
            return (not value) if isinstance(node.op, ast.Not) else -value
        raise _Dynamic

    def _call_value(self, node: ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and 2 <= len(node.args) <= 3 and not node.keywords:
            base, name = self._value(node.args[0]), self._value(node.args[1])
            if not isinstance(name, str) or name.startswith("_"):
                raise _Dynamic
            if len(node.args) == 3:
                return getattr(base, name, self._value(node.args[2]))
            if not hasattr(base, name):
                raise _Dynamic
            return getattr(base, name)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _CONFIG_METHODS \
                and not node.args and not node.keywords:
            return getattr(self._value(node.func.value), node.func.attr)()
        if self._is_logits_width(node):
            return self.model.get_output_embeddings().out_features
        raise _Dynamic

    def _is_logits_width(self, node) -> bool:
        """`logits.shape[-1]` or `logits.size(-1)`: the head's out_features."""
        minus_one = lambda n: isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) \
            and isinstance(n.operand, ast.Constant) and n.operand.value == 1  # noqa: E731
        if isinstance(node, ast.Subscript) and minus_one(node.slice):
            base = node.value
            return isinstance(base, ast.Attribute) and base.attr == "shape" \
                and isinstance(base.value, ast.Name) and base.value.id == self.logits
        if isinstance(node, ast.Call) and len(node.args) == 1 and minus_one(node.args[0]):
            return isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == self.logits
        return False


_DYNAMIC = object()
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
            ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
            ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _line(node) -> str:
    text = ast.unparse(node[0] if isinstance(node, list) else node)
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 120 else first[:117] + "..."


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _is_self(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _is_self_attr(node, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and _is_self(node.value)


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _reads_name(node, name: str | None) -> bool:
    return name is not None and any(isinstance(n, ast.Name) and n.id == name
                                    for n in ast.walk(node))


def _reads_logits(node, reader: _ForwardReader) -> bool:
    return _reads_name(node, reader.logits) or any(
        reader._is_head_call(n) or reader._is_inner_logits(n) for n in ast.walk(node))


def _is_labels_given(test) -> bool:
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) \
        and test.left.id == "labels" and len(test.ops) == 1 \
        and isinstance(test.ops[0], ast.IsNot) and _is_none(test.comparators[0])


def _is_aux_loss(node) -> bool:
    """`aux_loss` or `aux_loss.to(...)`."""
    if isinstance(node, ast.Name):
        return node.id == "aux_loss"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "to" and isinstance(node.func.value, ast.Name) \
        and node.func.value.id == "aux_loss"
