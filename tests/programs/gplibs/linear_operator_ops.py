"""linear_operator (GPyTorch's structured linear algebra) used directly, as
its README does: dense, diagonal, Kronecker, low-rank-plus-diagonal,
Toeplitz, block-diagonal, triangular, sum / product / constant-multiplied
operators; matmul, solve, inv_quad_logdet, logdet, diagonal, root and
inverse-root decompositions (Cholesky, Lanczos), pivoted Cholesky,
eigendecomposition, SVD, and the iterative solvers (linear_cg, Lanczos
tridiagonalization) against dense torch.linalg; gradients through solves
and log-determinants, in float64 and float32."""
import torch
import linear_operator
from linear_operator import settings
from linear_operator.operators import (BlockDiagLinearOperator, ConstantMulLinearOperator,
                                       DenseLinearOperator, DiagLinearOperator,
                                       KroneckerProductLinearOperator,
                                       LowRankRootAddedDiagLinearOperator,
                                       LowRankRootLinearOperator, MatmulLinearOperator,
                                       ToeplitzLinearOperator, TriangularLinearOperator)
from linear_operator.utils import linear_cg, minres, stable_pinverse, stable_qr
from linear_operator.utils.lanczos import lanczos_tridiag, lanczos_tridiag_to_diag

torch.manual_seed(0)


def fmt(t, d=5):
    return [f"{v:.{d}f}" for v in torch.as_tensor(t).detach().flatten().tolist()]


def spd(n, dtype=torch.float64, jitter=1.0):
    a = torch.randn(n, n, dtype=dtype)
    return a @ a.mT / n + jitter * torch.eye(n, dtype=dtype)


# README: a structured operator behaves as the dense matrix it represents
D = torch.rand(6, dtype=torch.float64) + 0.5
U = torch.randn(6, 2, dtype=torch.float64)
lo = LowRankRootAddedDiagLinearOperator(LowRankRootLinearOperator(U), DiagLinearOperator(D))
dense = U @ U.mT + torch.diag(D)
rhs = torch.randn(6, 3, dtype=torch.float64)
print(type(lo).__name__, tuple(lo.shape), f"{(lo.to_dense() - dense).abs().max().item():.2e}")
print("solve", fmt(lo.solve(rhs)[:2]), "dense", fmt(torch.linalg.solve(dense, rhs)[:2]))
iq, ld = lo.inv_quad_logdet(inv_quad_rhs=rhs, logdet=True)
print("inv_quad_logdet", f"{iq.item():.8f}", f"{ld.item():.8f}",
      "dense", f"{torch.logdet(dense).item():.8f}")
print("diagonal", fmt(lo.diagonal()))

# Kronecker products
A, B = spd(3), spd(4)
K = KroneckerProductLinearOperator(DenseLinearOperator(A), DenseLinearOperator(B))
Kd = torch.kron(A, B)
v = torch.randn(12, 2, dtype=torch.float64)
print("kron matmul", fmt((K @ v)[:3]), fmt((Kd @ v)[:3]))
print("kron logdet", f"{K.logdet().item():.8f}", f"{torch.logdet(Kd).item():.8f}")
print("kron solve", fmt(K.solve(v)[:3]), fmt(torch.linalg.solve(Kd, v)[:3]))
evals, evecs = K.eigh()
print("kron eigvals", fmt(torch.sort(evals)[0][:4]),
      fmt(torch.linalg.eigvalsh(Kd)[:4]))
print("kron diag", fmt(K.diagonal()[:5]))

# Toeplitz
col = torch.tensor([4.0, 1.0, 0.5, 0.25, 0.1], dtype=torch.float64)
T = ToeplitzLinearOperator(col)
print("toeplitz", fmt(T.to_dense()[1]), "solve", fmt(T.solve(torch.ones(5, 1, dtype=torch.float64))))

# block diagonal, triangular, sums, products, constant multiples
blocks = torch.stack([spd(3), spd(3)])
BD = BlockDiagLinearOperator(DenseLinearOperator(blocks))
print("blockdiag", tuple(BD.shape), f"{BD.logdet().item():.8f}",
      f"{torch.logdet(torch.block_diag(*blocks)).item():.8f}")
L = torch.linalg.cholesky(spd(5))
TL = TriangularLinearOperator(L)
b = torch.randn(5, 1, dtype=torch.float64)
print("triangular solve", fmt(TL.solve(b)), fmt(torch.linalg.solve_triangular(L, b, upper=False)))
S = DenseLinearOperator(spd(5)) + DiagLinearOperator(torch.full((5,), 0.3, dtype=torch.float64))
print("sum", type(S).__name__, f"{S.logdet().item():.8f}")
C = ConstantMulLinearOperator(DenseLinearOperator(spd(5)), torch.tensor(2.5, dtype=torch.float64))
print("constmul", f"{C.to_dense().trace().item():.8f}")
M = MatmulLinearOperator(torch.randn(5, 3, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64))
print("matmul op", fmt(M.diagonal()))

# decompositions
Sigma = spd(8)
op = DenseLinearOperator(Sigma)
R = op.root_decomposition(method="cholesky").root.to_dense()
print("root cholesky", f"{(R @ R.mT - Sigma).abs().max().item():.2e}")
Rl = op.root_decomposition(method="lanczos").root.to_dense()
print("root lanczos", tuple(Rl.shape), f"{(Rl @ Rl.mT - Sigma).abs().max().item():.2e}")
Ri = op.root_inv_decomposition(method="cholesky").root.to_dense()
print("root inv", f"{(Ri @ Ri.mT - torch.linalg.inv(Sigma)).abs().max().item():.2e}")
ev, evec = op.eigh()
print("eigh", fmt(ev, 6), fmt(torch.linalg.eigvalsh(Sigma), 6))
u, s, vt = op.svd()
print("svd", fmt(s, 6))
pc = DenseLinearOperator(Sigma).pivoted_cholesky(rank=4)
print("pivoted cholesky", tuple(pc.shape), fmt((pc @ pc.mT).diagonal(), 4), fmt(Sigma.diagonal(), 4))

# iterative solvers
rhs = torch.randn(8, 2, dtype=torch.float64)
x = linear_cg(Sigma.matmul, rhs, max_iter=50, tolerance=1e-10)
print("linear_cg", fmt(x[:3]), fmt(torch.linalg.solve(Sigma, rhs)[:3]))
q, t = lanczos_tridiag(Sigma.matmul, max_iter=8, dtype=torch.float64, device=Sigma.device,
                       matrix_shape=Sigma.shape, init_vecs=torch.ones(8, 1, dtype=torch.float64))
teval, tevec = lanczos_tridiag_to_diag(t)
print("lanczos", tuple(q.shape), tuple(t.shape), fmt(torch.sort(teval)[0], 5))

with settings.max_cholesky_size(0), settings.cg_tolerance(1e-10), settings.max_cg_iterations(100), \
        settings.num_trace_samples(100), settings.max_lanczos_quadrature_iterations(8):
    torch.manual_seed(3)
    op = DenseLinearOperator(Sigma)
    iq, ld = op.inv_quad_logdet(inv_quad_rhs=rhs[:, :1], logdet=True)
    print("iterative inv_quad", f"{iq.item():.6f}", "logdet (stochastic)", f"{ld.item():.4f}",
          "exact", f"{torch.logdet(Sigma).item():.4f}")

# gradients through solve and logdet, float64 and float32
for dtype in (torch.float64, torch.float32):
    A0 = spd(6, dtype)
    A0.requires_grad_(True)
    r = torch.randn(6, 1, dtype=dtype)
    op = DenseLinearOperator(A0) + DiagLinearOperator(torch.full((6,), 0.1, dtype=dtype))
    iq, ld = op.inv_quad_logdet(inv_quad_rhs=r, logdet=True)
    (iq + ld).backward()
    print(dtype, "loss", f"{(iq + ld).item():.5f}", "grad", fmt(A0.grad.diagonal(), 5),
          f"{A0.grad.sum().item():.5f}")
    A1 = A0.detach().clone().requires_grad_(True)
    sol = linear_operator.solve(DenseLinearOperator(A1), r)
    sol.sum().backward()
    print(dtype, "solve grad", fmt(A1.grad[0], 5))

# batch operators and broadcasting
batch = DenseLinearOperator(torch.stack([spd(4) for _ in range(3)]))
print("batch logdet", fmt(batch.logdet(), 6))
print("batch matmul", tuple((batch @ torch.randn(4, 2, dtype=torch.float64)).shape),
      "batch diag sum", f"{batch.diagonal().sum().item():.6f}")
print("add_jitter", fmt(batch.add_jitter(1e-3).diagonal()[0], 5))
print("to_dense sum", f"{linear_operator.to_dense(batch).sum().item():.6f}")
print("minres", fmt(minres(lambda v: Sigma @ v, rhs[:, :1], max_iter=20)[:3, 0]))
print("stable_pinverse", f"{stable_pinverse(torch.randn(5, 3, dtype=torch.float64)).abs().sum().item():.6f}")
q, r = stable_qr(torch.randn(5, 3, dtype=torch.float64))
print("stable_qr", tuple(q.shape), fmt(r.diagonal().abs(), 5))
