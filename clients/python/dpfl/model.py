"""A job's trained global model, as GET /v1/jobs/{id}/model gives it.

The server sends the parameters as one flat float32 vector of
``num_params`` values and names the architecture (``"logreg"``,
``"mlp"`` or ``"cnn"``); it does not send per-layer shapes. Package
``fl/model`` of the Go code documents the layout of the flat vector, which
:meth:`Model.layer_shapes` and :meth:`Model.layers` follow: dense layers
y = x·Wᵀ + b with W stored out×in row-major (PyTorch's ``nn.Linear``
convention), each layer as W then b, back to back.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["Model", "Layer", "have_numpy"]

try:  # numpy is optional (Debian: python3-numpy)
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None


def have_numpy() -> bool:
    """Whether numpy is importable, so that :meth:`dpfl.Client.model` gives
    a ``numpy.ndarray`` by default."""
    return _np is not None


#: The hidden layers of "mlp" (McMahan et al. 2017's 2NN).
MLP_HIDDEN = (200, 200)
#: The CNN's conv1 and conv2 filters and its dense hidden units.
CNN_C1, CNN_C2, CNN_HIDDEN = 32, 64, 128


class Layer(NamedTuple):
    """One parameter tensor of a model.

    Attributes:
        name: ``"W1"``, ``"b1"``, … in the order of the flat vector.
        shape: the tensor's shape (see :meth:`Model.layer_shapes`).
        values: a ``numpy.ndarray`` of that shape (a view into
            ``Model.params``) when the model's params are a numpy array,
            else the flat list of its floats in row-major order.
    """

    name: str
    shape: Tuple[int, ...]
    values: Any


@dataclass(frozen=True)
class Model:
    """A job's latest global model.

    Attributes:
        job_id: the job it belongs to.
        model: the architecture: ``"logreg"``, ``"mlp"`` or ``"cnn"``.
        round: the round after which it was released (the last committed).
        num_params: the model dimension d, the number of parameters.
        params: the flat parameter vector, d float32 values: a
            ``numpy.ndarray`` of dtype float32 and shape (d,) when numpy is
            used, else a ``list`` of Python floats (each exactly a float32).
        certificate: the server's model certificate (ε, δ, adjacency,
            accountant, the model's SHA-256, the release leaf with its
            inclusion proof and the signed checkpoint), or ``None`` when
            the server does not sign its log. ``dpfl-client verify`` checks
            it fully; :meth:`matches_certificate` checks only the hash.
    """

    job_id: str
    model: str
    round: int
    num_params: int
    params: Any = field(repr=False)
    certificate: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @property
    def shape(self) -> Tuple[int]:
        """The shape of :attr:`params`: ``(num_params,)``."""
        return (self.num_params,)

    def sha256(self) -> str:
        """The lower-case hex SHA-256 of the parameters as little-endian
        IEEE-754 binary32, in order: the server's model hash
        (``audit.ModelHash``)."""
        if _np is not None and isinstance(self.params, _np.ndarray):
            data = _np.asarray(self.params, dtype="<f4").tobytes()
        else:
            data = struct.pack("<%df" % len(self.params), *self.params)
        return hashlib.sha256(data).hexdigest()

    def matches_certificate(self) -> bool:
        """Whether the parameters hash to the certificate's
        ``model_sha256``. False without a certificate. This does not check
        the certificate's signature or inclusion proof."""
        if not self.certificate:
            return False
        return self.certificate.get("model_sha256") == self.sha256()

    def layer_shapes(self, input_dim: int = 784, classes: int = 10) -> List[Tuple[str, Tuple[int, ...]]]:
        """The names and shapes of the parameter tensors, in the order of
        the flat vector (package ``fl/model``).

        Args:
            input_dim: D, the number of input features (784 for
                Fashion-MNIST's 28×28 images; 60 for ``synthetic``).
            classes: C, the number of labels (10 for Fashion-MNIST).

        Returns:
            ``[(name, shape), …]``. logreg: W (C, D), b (C,). mlp: W1
            (200, D), b1, W2 (200, 200), b2, W3 (C, 200), b3. cnn on s×s
            images (D = s²), q = ⌊(s−4)/2⌋: W1 (32, 3, 3), b1 (32,), W2
            (64, 3, 3, 32) (window position-major, then input channel), b2
            (64,), W3 (128, q·q·64) (inputs in height-width-channel order),
            b3 (128,), W4 (C, 128), b4 (C,).

        Raises:
            ValueError: the architecture is unknown, or the shapes do not
                add up to ``num_params`` (pass the job's ``input_dim`` and
                ``classes``).
        """
        D, C = input_dim, classes
        if self.model == "logreg":
            shapes: List[Tuple[str, Tuple[int, ...]]] = [("W", (C, D)), ("b", (C,))]
        elif self.model == "mlp":
            sizes = (D,) + MLP_HIDDEN + (C,)
            shapes = []
            for i in range(len(sizes) - 1):
                shapes += [("W%d" % (i + 1), (sizes[i + 1], sizes[i])), ("b%d" % (i + 1), (sizes[i + 1],))]
        elif self.model == "cnn":
            s = math.isqrt(D)
            if s * s != D or s < 6:
                raise ValueError("cnn needs square single-channel images (input_dim = s², s ≥ 6), got input_dim %d" % D)
            q = (s - 4) // 2
            shapes = [
                ("W1", (CNN_C1, 3, 3)),
                ("b1", (CNN_C1,)),
                ("W2", (CNN_C2, 3, 3, CNN_C1)),
                ("b2", (CNN_C2,)),
                ("W3", (CNN_HIDDEN, q * q * CNN_C2)),
                ("b3", (CNN_HIDDEN,)),
                ("W4", (C, CNN_HIDDEN)),
                ("b4", (C,)),
            ]
        else:
            raise ValueError("unknown architecture %r: its layout is not known to this client" % self.model)
        total = sum(_prod(shape) for _, shape in shapes)
        if total != self.num_params:
            raise ValueError(
                "a %s with input_dim %d and classes %d has %d parameters, the model has %d: pass the job's input_dim and classes"
                % (self.model, D, C, total, self.num_params)
            )
        return shapes

    def layers(self, input_dim: int = 784, classes: int = 10) -> List[Layer]:
        """The parameter tensors, split out of :attr:`params` by
        :meth:`layer_shapes` (same arguments and errors).

        With numpy each :class:`Layer`'s ``values`` is a reshaped view of
        :attr:`params`; without it, a flat list of floats."""
        out: List[Layer] = []
        off = 0
        for name, shape in self.layer_shapes(input_dim, classes):
            n = _prod(shape)
            chunk = self.params[off : off + n]
            if _np is not None and isinstance(self.params, _np.ndarray):
                chunk = chunk.reshape(shape)
            out.append(Layer(name, shape, chunk))
            off += n
        return out


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for k in shape:
        n *= k
    return n


def params_from_json(values: Sequence[float], as_numpy: Optional[bool]) -> Any:
    """The wire's parameter list as a float32 numpy array (``as_numpy``
    True, or None with numpy importable) or a list of floats.

    Raises:
        ImportError: ``as_numpy`` is True and numpy is not importable.
    """
    if as_numpy is None:
        as_numpy = _np is not None
    if as_numpy:
        if _np is None:
            raise ImportError("numpy is not importable (Debian: apt-get install python3-numpy); pass as_numpy=False for a list")
        return _np.asarray(values, dtype=_np.float32)
    # Round each value to float32, as the server holds it: the JSON gives
    # the shortest decimal that reads back as the float32.
    n = len(values)
    return list(struct.unpack("<%df" % n, struct.pack("<%df" % n, *values)))
