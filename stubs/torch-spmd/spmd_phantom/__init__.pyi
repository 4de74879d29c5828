# The carrier of SPMD types inside mypy (type-check time only; nothing imports
# this at runtime).
#
# The mypy plugin represents "a Tensor whose SPMD type is T" as
# SpmdTensor[Literal["<canonical form of T>"]], e.g.
# SpmdTensor[Literal["dp=R, tp=S(1)"]].  A generic subclass of Tensor with a
# Literal argument survives inference, containers, unions, the incremental
# cache and the daemon; equality of types is equality of the canonical
# strings (spmd_mypy.vocab.spec).  SpmdTensor[Any] is a tensor of unknown
# SPMD type.  Pyright and other checkers without plugins see a plain Tensor.

from typing import Any, Callable, Generic, ItemsView, Iterator, NamedTuple, Self, TypeVar, ValuesView, overload

from torch import Tensor
from torch.nn import Module, ModuleDict, ModuleList, Sequential
from torch.distributed import ProcessGroup

_S_co = TypeVar("_S_co", covariant=True)
_T = TypeVar("_T")

_W = TypeVar("_W", bound=Tensor)

class SpmdTensor(Tensor, Generic[_S_co]):
    # Its own constructor, never called: mypy types an alias of a carrier
    # (`Act = Annotated[Tensor, Spmd(tp=V)]`) as its class object applied to
    # the Literal argument, which over Tensor's overloaded __init__ cost about
    # 100K instructions per alias (bench/HISTORY.md).
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    # funcol's collectives return an AsyncCollectiveTensor, whose wait() is
    # the value itself: a typed funcol result keeps that method (the plugin
    # types it as the receiver).  A plain tensor has no wait() at runtime; a
    # call of it on one is not caught in files that use spmd (README).
    def wait(self: _W) -> _W: ...
    # torch binds __rtruediv__ by assignment (`__rtruediv__ = __rdiv__`), and
    # mypy calls no hook for such a method on a Union receiver (`x / v`, v
    # from two branches, is tried as v.__rtruediv__(x) first): declared here,
    # the call is named "__rtruediv__ of SpmdTensor" and typed like the others.
    def __rtruediv__(self, other: Tensor | int | float | bool | complex) -> Tensor: ...

_M_co = TypeVar("_M_co", bound=Module, covariant=True)

# nn.ModuleList of one module class (given at construction or appended, in
# files that use spmd; see spmd_mypy/plugin/modules.py): iteration and int
# indexing give that class.
class ModuleListOf(ModuleList, Generic[_M_co]):
    def __iter__(self) -> Iterator[_M_co]: ...
    @overload
    def __getitem__(self, idx: slice) -> ModuleListOf[_M_co]: ...
    @overload
    def __getitem__(self, idx: int) -> _M_co: ...
# nn.ModuleDict of one module class (given at construction or written as
# `d[key] = Block(...)`, in files that use spmd): its values are that class.
class ModuleDictOf(ModuleDict, Generic[_M_co]):
    def __getitem__(self, key: str) -> _M_co: ...
    def pop(self, key: str) -> _M_co: ...
    def items(self) -> ItemsView[str, _M_co]: ...
    def values(self) -> ValuesView[_M_co]: ...
# nn.Sequential(m1, m2, ...) of module instances, in files that use spmd (see
# spmd_mypy/plugin/modules.py): SequentialOf[Tuple[M1, M2, ...]], whose call
# runs M1's forward, then M2's on its result, and so on.
class SequentialOf(Sequential, Generic[_S_co]): ...
# `Annotated[AliasValue[X], Spmd(...)]`: the rewrite of an alias's value whose
# Spmd(...) sits beside a name X other than Tensor (plugin/_mypy/alias_values.py);
# its type-analyze hook gives the carrier or X itself, never this class.
class AliasValue(Generic[_T]): ...
# A ProcessGroup that stands for a mesh axis: AxisGroup[Literal["tp"]] for
# `Annotated[ProcessGroup, spmd.Axis("tp")]` (axes of a flattened group joined
# by commas, "dp,tp").  The plugin reads the axis of a collective's group
# argument from it (spmd_mypy/plugin/groups.py).
class AxisGroup(ProcessGroup, Generic[_S_co]): ...
# A rank number, whose value differs on a mesh axis: `dist.get_rank(g)` of a
# group g that names the axis, `g.rank()`, `mesh.get_local_rank("tp")`, and
# arithmetic on them (`rank * n`, `(rank + 1) * n`).  RankOf[Literal[
# "<canonical>"]] holds the SPMD type it has as an operand ("*=R, tp=V,
# nograd"); a tensor indexed, sliced, offset or built with it differs by
# rank (spmd_mypy/plugin/ranks.py).
class RankOf(int, Generic[_S_co]):
    def __add__(self, other: int) -> Self: ...
    def __radd__(self, other: int) -> Self: ...
    def __sub__(self, other: int) -> Self: ...
    def __rsub__(self, other: int) -> Self: ...
    def __mul__(self, other: int) -> Self: ...
    def __rmul__(self, other: int) -> Self: ...
    def __floordiv__(self, other: int) -> Self: ...
    def __rfloordiv__(self, other: int) -> Self: ...
    def __mod__(self, other: int) -> Self: ...
    def __rmod__(self, other: int) -> Self: ...
    def __neg__(self) -> Self: ...

# The plugin routes `return e` and `y: Annotated[...] = e` of files that use
# spmd through these two (see spmd_mypy/plugin/declared.py): their hooks check
# the value against the declared type per axis.  Never called at runtime.
def returned(value: object) -> Any: ...
def assigned(value: object) -> Any: ...
# `ys = xs` with ys a local or parameter declared a list or dict (declared.py).
def reassigned(value: object) -> Any: ...
# `Batch(tokens=xs)`: a name given to a keyword of a call that may build a
# TypedDict; `callee` is the call's callee again, `key` the keyword (declared.py).
def keyword_item(value: object, callee: object, key: str) -> Any: ...
# `@spmd.trusted(in_types=..., out_types=...)` above an autograd Function: the
# rewrite ends its body with `apply = trusted_apply(<the decorator's callee>,
# in_types=..., out_types=...)`, whose hook types apply by the declaration
# (spmd_mypy/plugin/_mypy/trusted_classes.py, local_map.py).
def trusted_apply(decorator: object, *, in_types: object = ..., out_types: object = ...) -> Callable[..., Any]: ...

# torch.special, torch.linalg and torch.fft are untyped (Any) in torch's own
# stubs.  In files that use spmd the plugin wraps each call that may reach them
# in untyped(...) (spmd_mypy/plugin/untyped.py), whose hook types the call from
# the op tables.  Never called at runtime.
def untyped(value: _T) -> _T: ...

# The named tuples torch.linalg returns (torch.return_types.linalg_*), generic
# in the tensor type: every field of one result has the same SPMD type.

class linalg_cholesky_ex(NamedTuple, Generic[_T]):
    L: _T
    info: _T

class linalg_eig(NamedTuple, Generic[_T]):
    eigenvalues: _T
    eigenvectors: _T

class linalg_eigh(NamedTuple, Generic[_T]):
    eigenvalues: _T
    eigenvectors: _T

class linalg_inv_ex(NamedTuple, Generic[_T]):
    inverse: _T
    info: _T

class linalg_ldl_factor(NamedTuple, Generic[_T]):
    LD: _T
    pivots: _T

class linalg_ldl_factor_ex(NamedTuple, Generic[_T]):
    LD: _T
    pivots: _T
    info: _T

class linalg_lstsq(NamedTuple, Generic[_T]):
    solution: _T
    residuals: _T
    rank: _T
    singular_values: _T

class linalg_lu(NamedTuple, Generic[_T]):
    P: _T
    L: _T
    U: _T

class linalg_lu_factor(NamedTuple, Generic[_T]):
    LU: _T
    pivots: _T

class linalg_lu_factor_ex(NamedTuple, Generic[_T]):
    LU: _T
    pivots: _T
    info: _T

class linalg_qr(NamedTuple, Generic[_T]):
    Q: _T
    R: _T

class linalg_slogdet(NamedTuple, Generic[_T]):
    sign: _T
    logabsdet: _T

class linalg_solve_ex(NamedTuple, Generic[_T]):
    result: _T
    info: _T

class linalg_svd(NamedTuple, Generic[_T]):
    U: _T
    S: _T
    Vh: _T

# A statement that is a raw torch.distributed collective writing a tensor held
# in a name becomes `name = raw_write(name, <the call>)` in files that use spmd
# (spmd_mypy/plugin/_mypy/raw_writes.py), so that the name gets the type of
# what the collective wrote (spmd_mypy/plugin/raw_collectives.py).  Never
# called at runtime.
def raw_write(value: _T, call: object) -> _T: ...

# The marker of a function declared with @spmd.configurations (see
# spmd_mypy/plugin/configurations.py): the rewrite puts
# `__spmd_configuration__: Configuration = configuration()` first in its body;
# the annotation becomes the variable whose values are the configurations.
# Never called at runtime.
class Configuration: ...
def configuration() -> Any: ...
