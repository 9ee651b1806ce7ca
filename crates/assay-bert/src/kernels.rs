//! The element-wise parts of the BERT forward pass (everything but the matrix multiplies),
//! written as plain loops over independent lanes so that the compiler vectorises them.
//!
//! Each public function runs its loop inside [`pulp::Arch::dispatch`], which detects the CPU's
//! instruction set once (AVX-512, AVX2+FMA, else baseline SSE2) and compiles the inlined body
//! for each: safe code, no `unsafe`, and the same results up to float rounding. `exp` and `erf`
//! are branch-free polynomial approximations (a few ulp), because libm's scalar calls do not
//! vectorise.

// `#[inline(always)]` is the point here: a body compiled for AVX-512/AVX2 must be inlined into
// pulp's `#[target_feature]` entry points, or it runs as baseline SSE2 code.
#![allow(clippy::inline_always)]

use pulp::Arch;

/// Runs `body` compiled for the best instruction set that `arch` detected.
///
/// `body` is called through `FnMut` (the closure's own body, inlined) rather than through
/// `FnOnce` (a shim that the compiler may keep out of line, which then runs without the target
/// features: baseline SSE2).
///
/// `body` gets a [`Madd`] that fuses multiply-adds where the instruction set has FMA.
#[inline(always)]
fn simd<R>(arch: Arch, body: impl FnMut(Madd) -> R) -> R {
    struct Body<F>(F);
    impl<R, F: FnMut(Madd) -> R> pulp::WithSimd for Body<F> {
        type Output = R;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(mut self, _simd: S) -> R {
            // x86-64's AVX2 and AVX-512 levels and aarch64's NEON have FMA instructions; the
            // scalar fallback may not (`mul_add` would then be a slow library call).
            let fused = !S::IS_SCALAR && cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
            (self.0)(Madd(fused))
        }
    }
    arch.dispatch(Body(body))
}

/// `a·b + c`, fused into one instruction (one rounding) when `.0` says the CPU can.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Madd(pub bool);

impl Madd {
    #[inline(always)]
    pub(crate) fn call(self, a: f32, b: f32, c: f32) -> f32 {
        if self.0 { a.mul_add(b, c) } else { a * b + c }
    }
}

/// Accumulator lanes: 16 `f32` are one AVX-512 register (two AVX2 ones).
const LANES: usize = 16;

/// Activation functions of the feed-forward layer (`hidden_act` in config.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact GELU, `x·Φ(x)` with `erf`.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

/// The sum of `xs`, in `LANES` independent partial sums (vectorisable).
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (a, x) in acc.iter_mut().zip(chunk) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// The sum of `(x - mean)²` over `xs`.
#[inline(always)]
fn sum_sq_dev(xs: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (a, x) in acc.iter_mut().zip(chunk) {
            let d = x - mean;
            *a += d * d;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>()
}

/// `e^x` for `x ≤ 88` (Cephes' `expf` polynomial after reduction by `ln 2`; relative error
/// about 2e-7). Inputs below -87 give ~1e-38 instead of denormals or 0.
#[inline(always)]
#[allow(clippy::many_single_char_names)]
pub(crate) fn exp(m: Madd, x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2^23: adding it rounds to an integer, kept in the low mantissa bits.
    const SHIFTER: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = m.call(x, LOG2E, SHIFTER);
    let n = shifted - SHIFTER;
    let r = m.call(-n, LN2_LO, m.call(-n, LN2_HI, x));
    let p = 1.987_569_1e-4;
    let p = m.call(p, r, 1.398_199_9e-3);
    let p = m.call(p, r, 8.333_452e-3);
    let p = m.call(p, r, 4.166_579_6e-2);
    let p = m.call(p, r, 1.666_666_5e-1);
    let p = m.call(p, r, 0.5);
    let p = m.call(p, r * r, r + 1.0);
    // 2^n from the integer in `shifted`'s mantissa: (n + 127) << 23.
    let bits = shifted
        .to_bits()
        .wrapping_sub(SHIFTER.to_bits())
        .wrapping_add(127)
        << 23;
    p * f32::from_bits(bits)
}

/// `erf(x)`: a rational approximation on [-4, 4] (outside it erf is ±1 in `f32`), as in
/// Eigen and XLA; a few ulp.
#[inline(always)]
pub(crate) fn erf(m: Madd, x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = -2.726_142_3e-10;
    let p = m.call(p, x2, 2.770_681_4e-8);
    let p = m.call(p, x2, -2.101_024e-6);
    let p = m.call(p, x2, -5.692_506_4e-5);
    let p = m.call(p, x2, -7.349_906_3e-4);
    let p = m.call(p, x2, -2.954_600_1e-3);
    let p = m.call(p, x2, -1.609_603_3e-2);
    let q = -1.456_607_2e-5;
    let q = m.call(q, x2, -2.133_740_6e-4);
    let q = m.call(q, x2, -1.682_827e-3);
    let q = m.call(q, x2, -7.373_329_2e-3);
    let q = m.call(q, x2, -1.426_473_9e-2);
    x * p / q
}

#[inline(always)]
fn gelu(m: Madd, x: f32) -> f32 {
    0.5 * x * (1.0 + erf(m, x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, with `tanh(y) = 1 - 2/(e^{2y} + 1)`.
#[inline(always)]
fn gelu_tanh(m: Madd, x: f32) -> f32 {
    let y = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    0.5 * x * (2.0 - 2.0 / (exp(m, 2.0 * y) + 1.0))
}

#[inline(always)]
fn relu(x: f32) -> f32 {
    x.max(0.0)
}

/// `x[r] = act(x[r] + bias)` for each row `r` (rows of `bias.len()`), in place.
pub(crate) fn bias_act(arch: Arch, x: &mut [f32], bias: &[f32], act: Activation) {
    // One loop per activation (a `match` inside the loop keeps it from vectorising).
    #[inline(always)]
    fn rows(x: &mut [f32], bias: &[f32], f: impl Fn(f32) -> f32) {
        for row in x.chunks_exact_mut(bias.len()) {
            for (x, b) in row.iter_mut().zip(bias) {
                *x = f(*x + b);
            }
        }
    }
    match act {
        Activation::Gelu => simd(
            arch,
            #[inline(always)]
            |m| rows(x, bias, |x| gelu(m, x)),
        ),
        Activation::GeluTanh => simd(
            arch,
            #[inline(always)]
            |m| rows(x, bias, |x| gelu_tanh(m, x)),
        ),
        Activation::Relu => simd(
            arch,
            #[inline(always)]
            |_| rows(x, bias, relu),
        ),
    }
}

/// Layer normalisation with learned scale and shift.
pub(crate) struct Norm<'a> {
    pub weight: &'a [f32],
    pub bias: &'a [f32],
    pub eps: f32,
}

/// `x[r] = layer_norm(x[r] + bias + residual[r])` for each row `r` (rows of `bias.len()`), in
/// place, mean and variance over the row, as `torch.nn.LayerNorm` (biased variance).
pub(crate) fn add_norm(arch: Arch, x: &mut [f32], bias: &[f32], residual: &[f32], norm: &Norm<'_>) {
    let width = bias.len();
    simd(
        arch,
        #[inline(always)]
        |_| {
            for (row, r_row) in x.chunks_exact_mut(width).zip(residual.chunks_exact(width)) {
                norm_row(row, bias, r_row, norm);
            }
        },
    );
}

/// `row = layer_norm(row + bias + residual)`.
#[inline(always)]
fn norm_row(row: &mut [f32], bias: &[f32], residual: &[f32], norm: &Norm<'_>) {
    for ((o, b), r) in row.iter_mut().zip(bias).zip(residual) {
        *o = *o + b + r;
    }
    let width = row.len() as f32;
    let mean = sum(row) / width;
    let inv = 1.0 / (sum_sq_dev(row, mean) / width + norm.eps).sqrt();
    for ((o, w), b) in row.iter_mut().zip(norm.weight).zip(norm.bias) {
        *o = (*o - mean) * inv * w + b;
    }
}

/// The token embeddings of one sequence: `out[t] = layer_norm(word[ids[t]] + position[t] +
/// token_type)`. `ids` must be below the vocabulary size and `ids.len()` at most the number of
/// positions (the caller checks both).
pub(crate) fn embed(
    arch: Arch,
    out: &mut [f32],
    ids: &[u32],
    word: &[f32],
    position: &[f32],
    token_type: &[f32],
    norm: &Norm<'_>,
) {
    let width = token_type.len();
    simd(
        arch,
        #[inline(always)]
        |_| {
            for ((o_row, &id), p_row) in out
                .chunks_exact_mut(width)
                .zip(ids)
                .zip(position.chunks_exact(width))
            {
                let start = id as usize * width;
                o_row.copy_from_slice(&word[start..start + width]);
                norm_row(o_row, token_type, p_row, norm);
            }
        },
    );
}

/// The shapes of multi-head self-attention.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub count: usize,
    pub size: usize,
}

/// Self-attention over one sequence of `len` tokens, all heads, no mask (the sequence has no
/// padding). `qkv` holds each token's query, key and value projections side by side (rows of
/// `3·hidden`, without their biases, which are `bias`); `ctx` receives the `len × hidden`
/// context. `scratch` is reused between calls.
///
/// The lengths here (a few dozen tokens, a head size of 32 or 64) are too short for the
/// compiler's own vector loops (they would spend their time in their scalar tails), and its
/// vectorisation of fixed-size blocks proved fragile, so the two products use explicit vectors.
pub(crate) fn attention(
    arch: Arch,
    ctx: &mut [f32],
    qkv: &[f32],
    bias: &[f32],
    heads: Heads,
    scratch: &mut Vec<f32>,
) {
    let hidden = heads.count * heads.size;
    let d = heads.size;
    let len = ctx.len() / hidden;
    // Keys transposed and zero-padded to whole blocks: `d × padded`.
    let padded = len.div_ceil(LANES) * LANES;
    scratch.clear();
    scratch.resize(d * padded + ROWS * d + ROWS * padded, 0.0);
    let (keys_t, rest) = scratch.split_at_mut(d * padded);
    let (queries, scores) = rest.split_at_mut(ROWS * d);
    arch.dispatch(Attention {
        ctx,
        qkv,
        bias,
        heads,
        keys_t,
        queries,
        scores,
    });
}

/// [`attention`]'s loops, with explicit vectors (`S::f32s`: 16 lanes with AVX-512, 8 with
/// AVX2, 1 in the scalar fallback) so that the accumulators stay in registers.
struct Attention<'a> {
    ctx: &'a mut [f32],
    qkv: &'a [f32],
    bias: &'a [f32],
    heads: Heads,
    keys_t: &'a mut [f32],
    queries: &'a mut [f32],
    scores: &'a mut [f32],
}

impl pulp::WithSimd for Attention<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Attention {
            ctx,
            qkv,
            bias,
            heads,
            keys_t,
            queries,
            scores,
        } = self;
        let m = madd::<S>();
        let hidden = heads.count * heads.size;
        let d = heads.size;
        let len = ctx.len() / hidden;
        let padded = scores.len() / ROWS;
        let scale = 1.0 / (d as f32).sqrt();
        for head in 0..heads.count {
            let q_off = head * d;
            let k_off = hidden + q_off;
            let v_off = 2 * hidden + q_off;
            let k_bias = &bias[k_off..k_off + d];
            for (j, row) in qkv.chunks_exact(3 * hidden).enumerate() {
                for (c, (k, b)) in row[k_off..k_off + d].iter().zip(k_bias).enumerate() {
                    keys_t[c * padded + j] = k + b;
                }
            }
            // ROWS queries at a time: ROWS independent accumulators per block.
            for first in (0..len).step_by(ROWS) {
                let rows = ROWS.min(len - first);
                queries.fill(0.0);
                for (q, row) in queries
                    .chunks_exact_mut(d)
                    .zip(qkv.chunks_exact(3 * hidden).skip(first).take(rows))
                {
                    for ((q, x), b) in q
                        .iter_mut()
                        .zip(&row[q_off..q_off + d])
                        .zip(&bias[q_off..q_off + d])
                    {
                        *q = (x + b) * scale;
                    }
                }
                attention_scores(simd, scores, queries, keys_t, d);
                for s in scores.chunks_exact_mut(padded).take(rows) {
                    softmax(m, s, len);
                }
                let out = &mut ctx[first * hidden..(first + rows) * hidden];
                attention_values(simd, out, scores, qkv, q_off, &bias[v_off..v_off + d], len);
            }
        }
    }
}

/// The [`Madd`] for instruction set `S`: x86-64's AVX2 and AVX-512 levels and aarch64's NEON
/// have FMA instructions; the scalar fallback may not (`mul_add` would be a library call).
#[inline(always)]
fn madd<S: pulp::Simd>() -> Madd {
    Madd(!S::IS_SCALAR && cfg!(any(target_arch = "x86_64", target_arch = "aarch64")))
}

/// Query rows per pass of [`attention`].
const ROWS: usize = 4;

/// `scores[r][j] = queries[r] · keys_t[.., j]` for the `ROWS` query rows (`scores` is `ROWS ×
/// padded`, `keys_t` is `d × padded`), one vector of keys at a time.
#[inline(always)]
fn attention_scores<S: pulp::Simd>(
    simd: S,
    scores: &mut [f32],
    queries: &[f32],
    keys_t: &[f32],
    d: usize,
) {
    let padded = scores.len() / ROWS;
    let vectors = S::as_simd_f32s(&keys_t[..padded]).0.len();
    for block in 0..vectors {
        let mut acc = [simd.splat_f32s(0.0); ROWS];
        for (c, k_row) in keys_t.chunks_exact(padded).enumerate() {
            let k = S::as_simd_f32s(k_row).0[block];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = simd.mul_add_e_f32s(simd.splat_f32s(queries[r * d + c]), k, *acc);
            }
        }
        for (r, acc) in acc.into_iter().enumerate() {
            S::as_mut_simd_f32s(&mut scores[r * padded..(r + 1) * padded]).0[block] = acc;
        }
    }
    // Only the scalar fallback can leave a tail (`padded` is whole blocks of LANES).
    let done = vectors * S::F32_LANES;
    for j in done..padded {
        for r in 0..ROWS {
            let mut acc = 0.0;
            for c in 0..d {
                acc += queries[r * d + c] * keys_t[c * padded + j];
            }
            scores[r * padded + j] = acc;
        }
    }
}

/// `out[r][q_off..q_off + d] = Σ_j scores[r][j] · v_j + v_bias` for the rows of `out` (the value
/// bias is added once because the weights sum to 1), one vector of dimensions at a time.
#[inline(always)]
fn attention_values<S: pulp::Simd>(
    simd: S,
    out: &mut [f32],
    scores: &[f32],
    qkv: &[f32],
    q_off: usize,
    v_bias: &[f32],
    len: usize,
) {
    let d = v_bias.len();
    let hidden = qkv.len() / len;
    let hidden = hidden / 3;
    let v_off = 2 * hidden + q_off;
    let padded = scores.len() / ROWS;
    let rows = out.len() / hidden;
    let vectors = S::as_simd_f32s(v_bias).0.len();
    for block in 0..vectors {
        let mut acc = [simd.splat_f32s(0.0); ROWS];
        for (j, v_row) in qkv.chunks_exact(3 * hidden).enumerate() {
            let v = S::as_simd_f32s(&v_row[v_off..v_off + d]).0[block];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = simd.mul_add_e_f32s(simd.splat_f32s(scores[r * padded + j]), v, *acc);
            }
        }
        let b = S::as_simd_f32s(v_bias).0[block];
        for (r, acc) in acc.into_iter().enumerate().take(rows) {
            let o = &mut out[r * hidden + q_off..r * hidden + q_off + d];
            S::as_mut_simd_f32s(o).0[block] = simd.add_f32s(acc, b);
        }
    }
    for c in vectors * S::F32_LANES..d {
        for r in 0..rows {
            let mut acc = 0.0;
            for (j, v_row) in qkv.chunks_exact(3 * hidden).enumerate() {
                acc += scores[r * padded + j] * v_row[v_off + c];
            }
            out[r * hidden + q_off + c] = acc + v_bias[c];
        }
    }
}

/// Softmax over `scores[..len]` in place; `scores` is whole blocks of [`LANES`], and the
/// entries from `len` on are set to 0.
#[inline(always)]
fn softmax(madd: Madd, scores: &mut [f32], len: usize) {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    for (block, s) in scores.chunks_exact(LANES).enumerate() {
        for (l, (m, s)) in lanes.iter_mut().zip(s).enumerate() {
            if block * LANES + l < len {
                *m = m.max(*s);
            }
        }
    }
    let max = lanes.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
    let mut total = [0.0f32; LANES];
    for (block, s) in scores.chunks_exact_mut(LANES).enumerate() {
        for (l, (t, s)) in total.iter_mut().zip(s.iter_mut()).enumerate() {
            let e = if block * LANES + l < len {
                exp(madd, *s - max)
            } else {
                0.0
            };
            *s = e;
            *t += e;
        }
    }
    let inv = 1.0 / total.iter().sum::<f32>();
    for s in scores.iter_mut() {
        *s *= inv;
    }
}

/// The L2-normalised mean of the rows of `hidden` (one sequence), into `out`.
pub(crate) fn mean_pool_normalise(arch: Arch, out: &mut [f32], hidden: &[f32]) {
    simd(
        arch,
        #[inline(always)]
        |_| {
            out.fill(0.0);
            let rows = hidden.chunks_exact(out.len());
            let count = rows.len().max(1) as f32;
            for row in rows {
                for (o, x) in out.iter_mut().zip(row) {
                    *o += x;
                }
            }
            for o in out.iter_mut() {
                *o /= count;
            }
            let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            for o in out.iter_mut() {
                *o /= norm;
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_close_to_libm() {
        let mut worst = 0.0f32;
        for i in -8700..=8800 {
            let x = i as f32 / 100.0;
            for fused in [false, true] {
                let rel = (exp(Madd(fused), x) - x.exp()).abs() / x.exp();
                worst = worst.max(rel);
            }
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
    }

    #[test]
    fn erf_is_close_to_the_series() {
        // erf from its Taylor series in f64 (converges well on [-4, 4] with enough terms).
        fn erf64(x: f64) -> f64 {
            let mut term = x;
            let mut sum = x;
            for n in 1..200 {
                term *= -x * x / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        }
        let mut worst = 0.0f64;
        for i in -600..=600 {
            let x = f64::from(i) / 100.0;
            let want = if x.abs() > 4.0 { x.signum() } else { erf64(x) };
            for fused in [false, true] {
                worst = worst.max((f64::from(erf(Madd(fused), x as f32)) - want).abs());
            }
        }
        assert!(worst < 5e-7, "worst absolute error {worst}");
    }

    #[test]
    fn attention_matches_a_direct_computation() {
        // Head sizes below, at and past a vector (tails), lengths past ROWS and LANES.
        let cases = [(2, 3, 4), (2, 19, 21), (1, 32, 5), (3, 16, 17)];
        for (arch, (count, size, len)) in [Arch::new(), Arch::Scalar]
            .into_iter()
            .flat_map(|arch| cases.map(|case| (arch, case)))
        {
            let heads = Heads { count, size };
            let hidden = count * size;
            let qkv: Vec<f32> = (0..len * 3 * hidden)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
                .collect();
            let bias: Vec<f32> = (0..3 * hidden)
                .map(|i| (i % 17) as f32 / 20.0 - 0.4)
                .collect();
            let mut ctx = vec![0.0; len * hidden];
            attention(arch, &mut ctx, &qkv, &bias, heads, &mut Vec::new());
            let at = |t: usize, c: usize| qkv[t * 3 * hidden + c] + bias[c];
            for h in 0..count {
                for i in 0..len {
                    let scores: Vec<f32> = (0..len)
                        .map(|j| {
                            (0..size)
                                .map(|c| at(i, h * size + c) * at(j, hidden + h * size + c))
                                .sum::<f32>()
                                / (size as f32).sqrt()
                        })
                        .collect();
                    let m = scores.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
                    let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
                    let z: f32 = e.iter().sum();
                    for c in 0..size {
                        let want: f32 = (0..len)
                            .map(|j| e[j] / z * at(j, 2 * hidden + h * size + c))
                            .sum();
                        let got = ctx[i * hidden + h * size + c];
                        assert!(
                            (got - want).abs() < 1e-4,
                            "{got} vs {want} ({count} heads of {size}, {len} tokens, {arch:?})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn add_norm_normalises_rows() {
        let a = [1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 2.0];
        let bias = [0.5, 0.0, 0.0, -0.5];
        let residual = [0.0; 8];
        let weight = [1.0; 4];
        let shift = [0.0; 4];
        let norm = Norm {
            weight: &weight,
            bias: &shift,
            eps: 1e-12,
        };
        let mut out = a;
        add_norm(Arch::new(), &mut out, &bias, &residual, &norm);
        for row in out.chunks(4) {
            let mean: f32 = row.iter().sum::<f32>() / 4.0;
            let var: f32 = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / 4.0;
            assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{row:?}");
        }
    }
}
