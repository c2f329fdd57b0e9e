"""A small multi-layer perceptron in NumPy with its own forward and backward pass.

``score = w_out . h_L + b_out``, ``h_l = act(W_l h_{l-1} + b_l)``. The output is a linear
logit; the LTR plugin's RankLib RankNet applies a sigmoid to it, which is monotone and so
keeps the ranking (see models/export). ``hidden=()`` gives a linear model.
"""

from __future__ import annotations

import numpy as np


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


ACTIVATIONS = {
    # name: (f, derivative expressed through the activation's output a)
    "sigmoid": (_sigmoid, lambda a: a * (1.0 - a)),
    "tanh": (np.tanh, lambda a: 1.0 - a * a),
    "relu": (lambda x: np.maximum(x, 0.0), lambda a: (a > 0).astype(a.dtype)),
}


class MLP:
    def __init__(self, n_in: int, hidden=(64, 16), activation: str = "sigmoid",
                 seed: int = 0, dtype=np.float32, output_scale: float = 0.1):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}")
        self.n_in = int(n_in)
        self.hidden = tuple(int(h) for h in hidden)
        self.activation = activation
        self.dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed)
        sizes = [self.n_in, *self.hidden, 1]
        init: list[np.ndarray] = []
        for li, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            limit = np.sqrt(6.0 / (a + b))
            if li == len(sizes) - 2:
                limit *= output_scale  # small output weights: small logits
            init.append(rng.uniform(-limit, limit, size=(a, b)))
            init.append(np.zeros(b))
        # all parameters live in one flat buffer (the optimiser updates it in one go);
        # `params` are shaped views into it
        self.shapes = [p.shape for p in init]
        self.flat = np.concatenate([p.ravel() for p in init]).astype(self.dtype)
        self.params = self._views(self.flat)
        self.grad_flat = np.zeros_like(self.flat)
        self._grad_views = self._views(self.grad_flat)

    def _views(self, buf: np.ndarray) -> list[np.ndarray]:
        out, pos = [], 0
        for shape in self.shapes:
            size = int(np.prod(shape))
            out.append(buf[pos:pos + size].reshape(shape))
            pos += size
        return out

    # ------------------------------------------------------------------ passes
    @property
    def weights(self):
        return self.params[0::2]

    @property
    def biases(self):
        return self.params[1::2]

    def forward(self, X: np.ndarray, keep: bool = False):
        f, _ = ACTIVATIONS[self.activation]
        h = np.asarray(X, dtype=self.dtype)
        acts = [h]
        n_layers = len(self.weights)
        for li, (W, b) in enumerate(zip(self.weights, self.biases)):
            z = h @ W + b
            h = z if li == n_layers - 1 else f(z)
            if keep:
                acts.append(h)
        scores = h[:, 0]
        return (scores, acts) if keep else scores

    def backward(self, acts, dscores: np.ndarray) -> list[np.ndarray]:
        """Gradients of sum_i dscores_i * s_i w.r.t. every parameter: one backward pass
        over the batch of documents (the factorised update). Returns fresh arrays."""
        self.backward_flat(acts, dscores)
        return [g.copy() for g in self._grad_views]

    def backward_flat(self, acts, dscores: np.ndarray) -> np.ndarray:
        """As :meth:`backward`, into the flat gradient buffer (returned, reused)."""
        _, dact = ACTIVATIONS[self.activation]
        delta = np.asarray(dscores, dtype=self.dtype)[:, None]
        grads = self._grad_views
        n_layers = len(self.shapes) // 2
        for li in range(n_layers - 1, -1, -1):
            np.matmul(acts[li].T, delta, out=grads[2 * li])
            np.sum(delta, axis=0, out=grads[2 * li + 1])
            if li > 0:
                delta = (delta @ self.params[2 * li].T) * dact(acts[li])
        return self.grad_flat

    # ------------------------------------------------------------------ (de)serialise
    def state(self) -> dict:
        return {"n_in": self.n_in, "hidden": list(self.hidden), "activation": self.activation,
                "params": [p.tolist() for p in self.params]}

    @classmethod
    def from_state(cls, state: dict, dtype=np.float64) -> "MLP":
        m = cls(state["n_in"], tuple(state["hidden"]), state["activation"], dtype=dtype)
        for view, value in zip(m.params, state["params"]):
            view[...] = np.asarray(value, dtype=dtype).reshape(view.shape)
        return m

    def copy_params(self) -> np.ndarray:
        return self.flat.copy()

    def set_params(self, flat: np.ndarray) -> None:
        self.flat[:] = flat


class Adam:
    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params, grads):
        self.t += 1
        c1 = 1.0 - self.b1 ** self.t
        c2 = 1.0 - self.b2 ** self.t
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m *= self.b1
            m += (1.0 - self.b1) * g
            v *= self.b2
            v += (1.0 - self.b2) * (g * g)
            p -= (self.lr / c1) * m / (np.sqrt(v / c2) + self.eps)


class SGD:
    def __init__(self, params, lr=1e-3):
        self.lr = lr

    def step(self, params, grads):
        for p, g in zip(params, grads):
            p -= self.lr * g


OPTIMIZERS = {"adam": Adam, "sgd": SGD}
