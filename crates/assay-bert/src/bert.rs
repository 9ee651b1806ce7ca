//! A BERT encoder forward pass for sentence embeddings, written for this one job.
//!
//! Each sequence is run at its own length: the tokens of a batch are laid end to end (no
//! padding, so no attention mask), the four matrix multiplies of each layer run on all of them
//! at once (candle's `matmul`, i.e. the `gemm` crate), and everything else is fused into one
//! pass each in [`crate::kernels`]: query/key/value in one multiply, bias + GELU, bias +
//! residual + layer norm, attention per sequence and head. Those passes write into buffers that
//! already exist (candle's in-place custom ops on the multiplies' results, and one attention
//! buffer per forward pass), so the only fresh buffers in a layer are the four multiplies'
//! results; fewer zeroed allocations and page faults, ~5% less CPU time per sentence than
//! writing each pass into a new buffer. With more than one rayon thread the
//! batch is cut into one group of sequences per thread (about equal token counts), each run
//! through all the layers on its own; a batch of one sequence splits each step instead.
//!
//! The weights are the `BertModel` ones of `model.safetensors` (`embeddings.*`,
//! `encoder.layer.N.*`, optionally under `bert.` or `<model_type>.`); the pooler is not used.

use std::collections::HashMap;

use candle_core::{CpuStorage, DType, Device, InplaceOp1, InplaceOp2, Layout, Tensor};
use pulp::Arch;
use rayon::prelude::*;
use serde::Deserialize;

use crate::kernels::{self, Activation, Heads, Norm};

/// The fields of a Hugging Face `config.json` that the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of the hidden states.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// The feed-forward activation (`gelu`, `gelu_new`, `gelu_pytorch_tanh`, `relu`).
    pub hidden_act: String,
    /// The longest sequence the position embeddings cover.
    pub max_position_embeddings: usize,
    /// Token types (segments).
    pub type_vocab_size: usize,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// Only `absolute` (or absent) is supported.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// The model family (`bert`, …), also a possible prefix of the tensor names.
    #[serde(default)]
    pub model_type: Option<String>,
}

impl Config {
    /// The activation, or why this config cannot be run.
    pub fn check(&self) -> Result<Activation, String> {
        if self.hidden_size == 0
            || self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a positive multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.type_vocab_size == 0 {
            return Err("type_vocab_size must be positive".to_owned());
        }
        if let Some(kind) = &self.position_embedding_type
            && kind != "absolute"
        {
            return Err(format!(
                "position_embedding_type {kind:?} is not supported (only \"absolute\")"
            ));
        }
        match self.hidden_act.as_str() {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(format!(
                "hidden_act {other:?} is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)"
            )),
        }
    }
}

/// Why the weights could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a safetensors file.
    #[error("not a safetensors file: {0}")]
    NotSafetensors(candle_core::Error),
    /// The tensors are not those of a BERT model with this config.
    #[error("the weights do not match config.json (is this a BERT model?): {0}")]
    Mismatch(String),
}

struct NormWeights {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl NormWeights {
    fn get(&self, eps: f32) -> Norm<'_> {
        Norm {
            weight: &self.weight,
            bias: &self.bias,
            eps,
        }
    }
}

/// One encoder layer; the matrices are stored input-major (`in × out`), as the multiplies read
/// them.
struct Layer {
    qkv: Tensor,
    qkv_bias: Vec<f32>,
    attn_out: Tensor,
    attn_out_bias: Vec<f32>,
    attn_norm: NormWeights,
    up: Tensor,
    up_bias: Vec<f32>,
    down: Tensor,
    down_bias: Vec<f32>,
    out_norm: NormWeights,
}

/// A loaded BERT encoder.
pub struct Encoder {
    arch: Arch,
    hidden: usize,
    intermediate: usize,
    vocab: usize,
    positions: usize,
    heads: Heads,
    activation: Activation,
    eps: f32,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: NormWeights,
    layers: Vec<Layer>,
}

/// The tensors of a safetensors file under the prefix that its BERT weights use.
struct Weights {
    tensors: HashMap<String, Tensor>,
    prefix: String,
}

impl Weights {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, String> {
        let full = format!("{}{name}", self.prefix);
        let tensor = self
            .tensors
            .get(&full)
            .ok_or_else(|| format!("no tensor {full}"))?;
        if tensor.dims() != shape {
            return Err(format!(
                "{full} has shape {:?}, expected {shape:?}",
                tensor.dims()
            ));
        }
        tensor
            .to_dtype(DType::F32)
            .map_err(|e| format!("{full}: {e}"))
    }

    fn vec(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        self.tensor(name, shape)?
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| format!("{}{name}: {e}", self.prefix))
    }

    /// `LayerNorm.weight`/`.bias`, or the older `gamma`/`beta`.
    fn norm(&self, name: &str, size: usize) -> Result<NormWeights, String> {
        let get = |w: &str, b: &str| -> Result<NormWeights, String> {
            Ok(NormWeights {
                weight: self.vec(&format!("{name}.{w}"), &[size])?,
                bias: self.vec(&format!("{name}.{b}"), &[size])?,
            })
        };
        get("weight", "bias").or_else(|e| get("gamma", "beta").map_err(|_| e))
    }

    /// A `torch.nn.Linear` (`weight` is `out × in`): the weight as `in × out` and the bias.
    fn linear(
        &self,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<(Tensor, Vec<f32>), String> {
        let weight = self.tensor(&format!("{name}.weight"), &[outputs, inputs])?;
        let bias = self.vec(&format!("{name}.bias"), &[outputs])?;
        Ok((
            input_major(&weight).map_err(|e| format!("{name}: {e}"))?,
            bias,
        ))
    }
}

/// `out × in` → a contiguous `in × out`.
fn input_major(weight: &Tensor) -> candle_core::Result<Tensor> {
    weight.t()?.contiguous()
}

impl Encoder {
    /// Reads the weights from the bytes of `model.safetensors`; `activation` is what
    /// [`Config::check`] found `config` to ask for.
    pub fn load(
        bytes: &[u8],
        config: &Config,
        activation: Activation,
    ) -> Result<Encoder, LoadError> {
        let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)
            .map_err(LoadError::NotSafetensors)?;
        let mut prefixes = vec![String::new(), "bert.".to_owned()];
        if let Some(model_type) = &config.model_type {
            prefixes.push(format!("{model_type}."));
        }
        let prefix = prefixes
            .into_iter()
            .find(|p| tensors.contains_key(&format!("{p}embeddings.word_embeddings.weight")))
            .ok_or_else(|| {
                LoadError::Mismatch("no tensor embeddings.word_embeddings.weight".to_owned())
            })?;
        let weights = Weights { tensors, prefix };
        Encoder::from_weights(&weights, config, activation).map_err(LoadError::Mismatch)
    }

    fn from_weights(
        w: &Weights,
        config: &Config,
        activation: Activation,
    ) -> Result<Encoder, String> {
        let hidden = config.hidden_size;
        let intermediate = config.intermediate_size;
        let token_types = w.vec(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, hidden],
        )?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| -> Result<Layer, String> {
                let at = |name: &str| format!("encoder.layer.{i}.{name}");
                let (q, q_bias) = w.linear(&at("attention.self.query"), hidden, hidden)?;
                let (k, k_bias) = w.linear(&at("attention.self.key"), hidden, hidden)?;
                let (v, v_bias) = w.linear(&at("attention.self.value"), hidden, hidden)?;
                let qkv = Tensor::cat(&[&q, &k, &v], 1).map_err(|e| e.to_string())?;
                let (attn_out, attn_out_bias) =
                    w.linear(&at("attention.output.dense"), hidden, hidden)?;
                let (up, up_bias) = w.linear(&at("intermediate.dense"), hidden, intermediate)?;
                let (down, down_bias) = w.linear(&at("output.dense"), intermediate, hidden)?;
                Ok(Layer {
                    qkv,
                    qkv_bias: [q_bias, k_bias, v_bias].concat(),
                    attn_out,
                    attn_out_bias,
                    attn_norm: w.norm(&at("attention.output.LayerNorm"), hidden)?,
                    up,
                    up_bias,
                    down,
                    down_bias,
                    out_norm: w.norm(&at("output.LayerNorm"), hidden)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Encoder {
            arch: Arch::new(),
            hidden,
            intermediate,
            vocab: config.vocab_size,
            positions: config.max_position_embeddings,
            heads: Heads {
                count: config.num_attention_heads,
                size: hidden / config.num_attention_heads,
            },
            activation,
            eps: config.layer_norm_eps as f32,
            word: w.vec(
                "embeddings.word_embeddings.weight",
                &[config.vocab_size, hidden],
            )?,
            position: w.vec(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, hidden],
            )?,
            token_type: token_types[..hidden].to_vec(),
            embed_norm: w.norm("embeddings.LayerNorm", hidden)?,
            layers,
        })
    }

    /// Whether every sequence fits the model: its length and its token ids.
    fn check(&self, sequences: &[Vec<u32>]) -> Result<(), String> {
        for ids in sequences {
            if ids.len() > self.positions {
                return Err(format!(
                    "{} tokens, more than max_position_embeddings {}",
                    ids.len(),
                    self.positions
                ));
            }
            if let Some(id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(format!(
                    "token id {id} is outside the vocabulary of {}",
                    self.vocab
                ));
            }
        }
        Ok(())
    }

    /// The mean-pooled, L2-normalised embedding of each sequence of token ids (special tokens
    /// included, no padding).
    pub fn embed(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, String> {
        self.check(sequences)?;
        // With several threads, each takes a group of whole sequences through all the layers
        // (no synchronisation until the end; measured ~1.3× the throughput of splitting each
        // step across the threads at 2 threads); a lone sequence splits each step instead.
        let threads = rayon::current_num_threads();
        if threads > 1 && sequences.len() > 1 {
            let groups = groups(sequences, threads);
            let parts: Vec<Result<Vec<Vec<f32>>, String>> = groups
                .into_par_iter()
                .map(|g| self.forward(g, false))
                .collect();
            let mut out = Vec::with_capacity(sequences.len());
            for part in parts {
                out.extend(part?);
            }
            return Ok(out);
        }
        self.forward(sequences, threads > 1)
    }

    /// [`Encoder::embed`] without the checks; `parallel`: split each step across the pool.
    fn forward(&self, sequences: &[Vec<u32>], parallel: bool) -> Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let lengths: Vec<usize> = sequences.iter().map(Vec::len).collect();
        let total: usize = lengths.iter().sum();
        if total == 0 {
            return Ok(vec![vec![0.0; h]; sequences.len()]);
        }
        let mut x = vec![0.0f32; total * h];
        for (out, ids) in split_rows(&mut x, &lengths, h).into_iter().zip(sequences) {
            kernels::embed(
                self.arch,
                out,
                ids,
                &self.word,
                &self.position,
                &self.token_type,
                &self.embed_norm.get(self.eps),
            );
        }
        let mut x = Tensor::from_vec(x, (total, h), &Device::Cpu).map_err(|e| e.to_string())?;
        // The attention's output, rewritten in place by every layer.
        let ctx = Tensor::zeros((total, h), DType::F32, &Device::Cpu).map_err(|e| e.to_string())?;
        for layer in &self.layers {
            x = self
                .layer(layer, &x, &ctx, &lengths, parallel)
                .map_err(|e| e.to_string())?;
        }
        with_slice(&x, |x| {
            let mut vectors = vec![vec![0.0f32; h]; sequences.len()];
            let mut offset = 0;
            for (vector, len) in vectors.iter_mut().zip(&lengths) {
                kernels::mean_pool_normalise(self.arch, vector, &x[offset * h..(offset + len) * h]);
                offset += len;
            }
            vectors
        })
        .map_err(|e| e.to_string())
    }

    /// One encoder layer on `x`; `ctx` (`total × hidden`) is scratch for the attention. Only the
    /// four multiplies allocate (their results); the other passes write into those in place.
    fn layer(
        &self,
        layer: &Layer,
        x: &Tensor,
        ctx: &Tensor,
        lengths: &[usize],
        parallel: bool,
    ) -> candle_core::Result<Tensor> {
        let (arch, h) = (self.arch, self.hidden);
        let qkv = x.matmul(&layer.qkv)?;
        in_place_with(ctx, &qkv, |ctx, qkv| {
            let mut jobs = Vec::with_capacity(lengths.len());
            let mut offset = 0;
            for (out, len) in split_rows(ctx, lengths, h).into_iter().zip(lengths) {
                jobs.push((out, &qkv[offset * 3 * h..(offset + len) * 3 * h]));
                offset += len;
            }
            let run = |scratch: &mut Vec<f32>, (out, qkv): (&mut [f32], &[f32])| {
                kernels::attention(arch, out, qkv, &layer.qkv_bias, self.heads, scratch);
            };
            if parallel {
                jobs.into_par_iter().for_each_init(Vec::new, run);
            } else {
                let mut scratch = Vec::new();
                for job in jobs {
                    run(&mut scratch, job);
                }
            }
        })?;
        let x1 = ctx.matmul(&layer.attn_out)?;
        add_norm(
            arch,
            &x1,
            &layer.attn_out_bias,
            x,
            &layer.attn_norm.get(self.eps),
            parallel,
        )?;
        let up = x1.matmul(&layer.up)?;
        in_place(&up, |up| {
            let f = |o: &mut [f32]| kernels::bias_act(arch, o, &layer.up_bias, self.activation);
            if parallel {
                up.par_chunks_mut(ROWS_PER_TASK * self.intermediate)
                    .for_each(f);
            } else {
                f(up);
            }
        })?;
        let out = up.matmul(&layer.down)?;
        add_norm(
            arch,
            &out,
            &layer.down_bias,
            &x1,
            &layer.out_norm.get(self.eps),
            parallel,
        )?;
        Ok(out)
    }
}

/// `sequences` cut into at most `count` consecutive groups of about equal token counts.
fn groups(sequences: &[Vec<u32>], count: usize) -> Vec<&[Vec<u32>]> {
    let total: usize = sequences.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(count);
    let mut start = 0;
    let mut seen = 0;
    for (i, s) in sequences.iter().enumerate() {
        seen += s.len();
        if seen * count >= total * (out.len() + 1) && out.len() + 1 < count {
            out.push(&sequences[start..=i]);
            start = i + 1;
        }
    }
    if start < sequences.len() {
        out.push(&sequences[start..]);
    }
    out
}

/// Rows per rayon task in the row-wise passes.
const ROWS_PER_TASK: usize = 32;

/// `x = layer_norm(x + bias + residual)`, row by row, in place.
fn add_norm(
    arch: Arch,
    x: &Tensor,
    bias: &[f32],
    residual: &Tensor,
    norm: &Norm<'_>,
    parallel: bool,
) -> candle_core::Result<()> {
    in_place_with(x, residual, |x, residual| {
        let chunk = ROWS_PER_TASK * bias.len();
        let f = |(x, r): (&mut [f32], &[f32])| kernels::add_norm(arch, x, bias, r, norm);
        if parallel {
            x.par_chunks_mut(chunk)
                .zip(residual.par_chunks(chunk))
                .for_each(f);
        } else {
            f((x, residual));
        }
    })
}

/// `data` cut into consecutive pieces of `lengths[i] · width`.
fn split_rows<'a>(mut data: &'a mut [f32], lengths: &[usize], width: usize) -> Vec<&'a mut [f32]> {
    let mut parts = Vec::with_capacity(lengths.len());
    for len in lengths {
        let (part, rest) = data.split_at_mut(len * width);
        parts.push(part);
        data = rest;
    }
    parts
}

/// Runs `f` on the contiguous `f32` data of a CPU tensor.
fn with_slice<R>(tensor: &Tensor, f: impl FnOnce(&[f32]) -> R) -> candle_core::Result<R> {
    let (storage, layout) = tensor.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("the tensor is not on the CPU")
    };
    Ok(f(contiguous(cpu.as_slice::<f32>()?, layout)?))
}

/// The part of `data` that `layout` covers, if it is contiguous.
fn contiguous<'a>(data: &'a [f32], layout: &Layout) -> candle_core::Result<&'a [f32]> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("the tensor is not contiguous"),
    }
}

/// The part of `storage` that `layout` covers, writable, if it is contiguous `f32`.
fn contiguous_mut<'a>(
    storage: &'a mut CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a mut [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("the tensor is not f32")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&mut data[start..end]),
        None => candle_core::bail!("the tensor is not contiguous"),
    }
}

/// Runs `f` on the data of `tensor`, writable (candle's in-place custom op: no new buffer).
fn in_place(tensor: &Tensor, f: impl Fn(&mut [f32])) -> candle_core::Result<()> {
    struct Op<F>(F);
    impl<F: Fn(&mut [f32])> InplaceOp1 for Op<F> {
        fn name(&self) -> &'static str {
            "assay-in-place"
        }
        fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
            (self.0)(contiguous_mut(storage, layout)?);
            Ok(())
        }
    }
    tensor.inplace_op1(&Op(f))
}

/// Runs `f` on the data of `tensor`, writable, and of `other` (another tensor), read-only.
fn in_place_with(
    tensor: &Tensor,
    other: &Tensor,
    f: impl Fn(&mut [f32], &[f32]),
) -> candle_core::Result<()> {
    struct Op<F>(F);
    impl<F: Fn(&mut [f32], &[f32])> InplaceOp2 for Op<F> {
        fn name(&self) -> &'static str {
            "assay-in-place-with"
        }
        fn cpu_fwd(
            &self,
            storage: &mut CpuStorage,
            layout: &Layout,
            other: &CpuStorage,
            other_layout: &Layout,
        ) -> candle_core::Result<()> {
            let other = contiguous(other.as_slice::<f32>()?, other_layout)?;
            (self.0)(contiguous_mut(storage, layout)?, other);
            Ok(())
        }
    }
    tensor.inplace_op2(other, &Op(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_consecutive_and_balanced_by_tokens() {
        let seqs = |lens: &[usize]| -> Vec<Vec<u32>> { lens.iter().map(|&n| vec![1; n]).collect() };
        let lens = |groups: &[&[Vec<u32>]]| -> Vec<Vec<usize>> {
            groups
                .iter()
                .map(|g| g.iter().map(Vec::len).collect())
                .collect()
        };
        let s = seqs(&[10, 10, 10, 10]);
        assert_eq!(lens(&groups(&s, 2)), [vec![10, 10], vec![10, 10]]);
        let s = seqs(&[40, 5, 5, 5]);
        assert_eq!(lens(&groups(&s, 2)), [vec![40], vec![5, 5, 5]]);
        let s = seqs(&[7]);
        assert_eq!(lens(&groups(&s, 4)), [vec![7]]);
        let s = seqs(&[9, 8, 7, 6, 5, 4, 3]);
        let g = groups(&s, 3);
        assert!(g.len() <= 3);
        assert_eq!(g.concat(), s);
    }
}
