//! [`LocalEmbedder`]: all-MiniLM-L6-v2 as an int8 ONNX model, run by ONNX Runtime in process.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ort::environment::Environment;
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{Encoding, PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::pooling::{l2_normalize, mean_pool};
use crate::{EmbedError, Embedder, MAX_TOKENS};

/// Intra-op threads of a session unless the options say otherwise.
pub const DEFAULT_THREADS: usize = 1;
/// Sessions (model runs that can go on at once) unless the options say otherwise.
pub const DEFAULT_SESSIONS: usize = 2;
/// Most texts run through the model at once unless the options say otherwise: one, so that a
/// text's vector never depends on the texts it came with (activations are quantized per run),
/// no compute goes to padding, and it is also the fastest on CPU.
pub const DEFAULT_MAX_BATCH: usize = 1;

const MODEL_ID: &str = "all-MiniLM-L6-v2-onnx-int8-dynamic";
const MODEL_FILE: &str = "model.onnx";
const TOKENIZER_FILE: &str = "tokenizer.json";
const OUTPUT: &str = "last_hidden_state";
const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const TOKEN_TYPE_IDS: &str = "token_type_ids";

/// Where the model and the runtime are, and how to run them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEmbedderOptions {
    /// Directory holding `model.onnx` and `tokenizer.json`.
    pub model_dir: PathBuf,
    /// Path of `libonnxruntime.so` (1.17 or newer), loaded once per process.
    pub runtime_lib: PathBuf,
    /// Intra-op threads of each ONNX Runtime session (default 1).
    pub threads: usize,
    /// Sessions of the model (default 2): batches run on all of them at once, each on its own
    /// `threads`. One single-threaded session per core beats one session spread over the cores
    /// for a model this small (no synchronisation inside a run).
    pub sessions: usize,
    /// Most texts per model run (default 1); longer inputs are split into runs of this size.
    /// Above one, a text's vector depends slightly on its batch (cosine above 0.99 to the
    /// vector of the text run alone), since activations are quantized over the whole run.
    pub max_batch: usize,
}

impl LocalEmbedderOptions {
    /// Options with the default thread count and batch size.
    pub fn new(model_dir: impl Into<PathBuf>, runtime_lib: impl Into<PathBuf>) -> Self {
        Self {
            model_dir: model_dir.into(),
            runtime_lib: runtime_lib.into(),
            threads: DEFAULT_THREADS,
            sessions: DEFAULT_SESSIONS,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }

    /// Options for the layout `scripts/setup_models.sh` writes under a cache directory.
    pub fn from_cache_dir(cache_dir: &Path) -> Self {
        Self::new(
            cache_dir.join("models/all-minilm-l6-v2-int8"),
            cache_dir.join("onnxruntime/libonnxruntime.so"),
        )
    }
}

/// all-MiniLM-L6-v2 (384 dimensions) from an int8 ONNX export, run by ONNX Runtime.
///
/// The model is the one `scripts/setup_models.sh` writes: its matrix products are
/// `DynamicQuantizeMatMul` (int8 weights as shipped, activations quantized to uint8 per run), so
/// they run on the int8 kernels; about twice as fast as the same weights in f32 on two cores,
/// cosine about 0.995 to the f32 model and the same SciFact nDCG@10 within 0.003.
///
/// Texts are truncated at [`MAX_TOKENS`] tokens. A call sorts its texts by token count and runs
/// them in batches of at most `max_batch`, each padded to its longest text, so little compute
/// goes to padding; the vectors come back in input order. The batches of a call run on every
/// free session at once; a session runs one batch at a time (it is behind a lock), on `threads`
/// cores, so concurrent calls share the sessions batch by batch.
pub struct LocalEmbedder {
    sessions: Vec<Mutex<Session>>,
    tokenizer: Tokenizer,
    /// The tokenizer without truncation, for [`crate::TokenCounter::token_spans`].
    whole: Tokenizer,
    padding: PaddingParams,
    token_type_ids: bool,
    dimension: usize,
    max_batch: usize,
}

impl LocalEmbedder {
    /// Loads the runtime (once per process), the tokenizer and the model.
    pub fn new(options: &LocalEmbedderOptions) -> Result<Self, EmbedError> {
        if options.threads == 0 {
            return Err(EmbedError::InvalidOptions("threads must be at least 1"));
        }
        if options.sessions == 0 {
            return Err(EmbedError::InvalidOptions("sessions must be at least 1"));
        }
        if options.max_batch == 0 {
            return Err(EmbedError::InvalidOptions("max_batch must be at least 1"));
        }
        let model_path = options.model_dir.join(MODEL_FILE);
        let tokenizer_path = options.model_dir.join(TOKENIZER_FILE);
        for (what, path) in [("model", &model_path), ("tokenizer", &tokenizer_path)] {
            if !path.is_file() {
                return Err(EmbedError::MissingFile {
                    what,
                    path: path.clone(),
                });
            }
        }
        let (tokenizer, padding) = load_tokenizer(&tokenizer_path)?;
        let environment = environment(&options.runtime_lib)?;
        let model_err = |reason: &str, source: ort::Error| EmbedError::Model {
            path: model_path.clone(),
            reason: reason.to_owned(),
            source: Some(Box::new(source)),
        };
        let sessions = (0..options.sessions)
            .map(|_| {
                Session::builder(&environment)
                    .and_then(|b| Ok(b.with_intra_threads(options.threads)?))
                    .and_then(|b| Ok(b.with_inter_threads(1)?))
                    .map_err(|e| model_err("cannot configure the session", e))?
                    .commit_from_file(&model_path)
                    .map_err(|e| model_err("cannot load", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (token_type_ids, dimension) = check_signature(&sessions[0], &model_path)?;
        let mut whole = tokenizer.clone();
        whole.with_truncation(None).map_err(EmbedError::Tokenizer)?;
        Ok(Self {
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            tokenizer,
            whole,
            padding,
            token_type_ids,
            dimension,
            max_batch: options.max_batch,
        })
    }

    /// The token ids the model sees for `text`: `[CLS]`, the text's tokens truncated so that
    /// the whole is at most [`MAX_TOKENS`], `[SEP]`. Useful to size chunks.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        Ok(self.encode(text)?.get_ids().to_vec())
    }

    fn encode(&self, text: &str) -> Result<Encoding, EmbedError> {
        self.tokenizer
            .encode_fast(text, true)
            .map_err(EmbedError::Tokenizer)
    }

    /// A free session, trying them from `first` on; waits for `first` when all are busy. A panic
    /// while a lock was held cannot leave a session half-changed: a poisoned lock is recovered.
    fn session(&self, first: usize) -> MutexGuard<'_, Session> {
        let n = self.sessions.len();
        (0..n)
            .find_map(|k| self.sessions[(first + k) % n].try_lock().ok())
            .unwrap_or_else(|| {
                self.sessions[first % n]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
    }

    /// Pads and runs the batches `order` is cut into, on up to every session at once; the
    /// vectors of each batch in its order.
    fn run_batches(
        &self,
        encodings: &mut [Encoding],
        order: &[usize],
    ) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
        let mut batches = order
            .chunks(self.max_batch)
            .map(|chunk| {
                let mut batch: Vec<Encoding> = chunk
                    .iter()
                    .map(|&i| std::mem::take(&mut encodings[i]))
                    .collect();
                tokenizers::pad_encodings(&mut batch, &self.padding)
                    .map_err(EmbedError::Tokenizer)?;
                Ok(Mutex::new((batch, None)))
            })
            .collect::<Result<Vec<Mutex<(Vec<Encoding>, Option<Result<_, _>>)>>, EmbedError>>()?;
        let runners = self.sessions.len().min(batches.len());
        let next = AtomicUsize::new(0);
        let run = |runner: usize| loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = batches.get(index) else {
                break;
            };
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let result = self.run_batch(&slot.0, runner);
            slot.1 = Some(result);
        };
        if runners <= 1 {
            run(0);
        } else {
            std::thread::scope(|scope| {
                for runner in 1..runners {
                    scope.spawn(move || run(runner));
                }
                run(0);
            });
        }
        batches
            .iter_mut()
            .map(|slot| {
                let slot = slot.get_mut().unwrap_or_else(PoisonError::into_inner);
                slot.1
                    .take()
                    .unwrap_or_else(|| Err(EmbedError::Inference("a batch was not run".into())))
            })
            .collect()
    }

    /// Runs one batch of encodings of equal (padded) length on a free session (trying
    /// `first` first); one unit vector per encoding.
    fn run_batch(&self, batch: &[Encoding], first: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let rows = batch.len();
        let cols = batch.first().map_or(0, Encoding::len);
        let mut ids = Vec::with_capacity(rows * cols);
        let mut mask = Vec::with_capacity(rows * cols);
        let mut types = Vec::with_capacity(rows * cols);
        for encoding in batch {
            ids.extend(encoding.get_ids().iter().map(|&v| i64::from(v)));
            mask.extend(encoding.get_attention_mask().iter().map(|&v| i64::from(v)));
            types.extend(encoding.get_type_ids().iter().map(|&v| i64::from(v)));
        }
        let shape = [rows as i64, cols as i64];
        let tensor = |data: Vec<i64>| -> Result<SessionInputValue<'static>, EmbedError> {
            Ok(Tensor::from_array((shape, data))
                .map_err(|e| EmbedError::Inference(Box::new(e)))?
                .into())
        };
        let mut inputs: Vec<(Cow<'static, str>, SessionInputValue<'static>)> = vec![
            (INPUT_IDS.into(), tensor(ids)?),
            (ATTENTION_MASK.into(), tensor(mask)?),
        ];
        if self.token_type_ids {
            inputs.push((TOKEN_TYPE_IDS.into(), tensor(types)?));
        }

        let mut session = self.session(first);
        let outputs = session
            .run(inputs)
            .map_err(|e| EmbedError::Inference(Box::new(e)))?;
        let output = outputs.get(OUTPUT).ok_or_else(|| {
            EmbedError::Inference(format!("the model returned no `{OUTPUT}`").into())
        })?;
        let (got, hidden) = output
            .try_extract_tensor::<f32>()
            .map_err(|e| EmbedError::Inference(Box::new(e)))?;
        let expected = [rows as i64, cols as i64, self.dimension as i64];
        if **got != expected {
            return Err(EmbedError::OutputShape {
                got: got.to_vec(),
                expected: expected.to_vec(),
            });
        }
        let per_row = cols * self.dimension;
        Ok(batch
            .iter()
            .zip(hidden.chunks_exact(per_row.max(1)))
            .map(|(encoding, rows)| {
                let mut v = mean_pool(rows, encoding.get_attention_mask(), self.dimension);
                l2_normalize(&mut v);
                v
            })
            .collect())
    }
}

/// Tokens with the model's tokenizer, special tokens excluded (a quarter of the bytes if the
/// tokenizer fails).
impl crate::TokenCounter for LocalEmbedder {
    fn count_tokens(&self, text: &str) -> usize {
        self.token_ids(text)
            .map_or(text.len() / 4, |ids| ids.len().saturating_sub(2))
    }

    fn token_spans(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let encoding = self.whole.encode(text, false).ok()?;
        Some(encoding.get_offsets().to_vec())
    }
}

impl Embedder for LocalEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encodings = texts
            .iter()
            .map(|text| self.encode(text))
            .collect::<Result<Vec<_>, _>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());

        let mut vectors = vec![Vec::new(); texts.len()];
        let batches = self.run_batches(&mut encodings, &order)?;
        for (chunk, batch) in order.chunks(self.max_batch).zip(batches) {
            for (&i, v) in chunk.iter().zip(batch) {
                vectors[i] = v;
            }
        }
        Ok(vectors)
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        MODEL_ID
    }
}

/// The tokenizer with engram's limits, and its padding. The shipped tokenizer.json pads every
/// text to 128 tokens and truncates at 128: padding to a fixed length changes the mean-pooled
/// vector and truncating at 128 loses half of a chunk, so both are replaced here.
fn load_tokenizer(path: &Path) -> Result<(Tokenizer, PaddingParams), EmbedError> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(EmbedError::Tokenizer)?;
    let truncation = TruncationParams {
        max_length: MAX_TOKENS,
        ..tokenizer.get_truncation().cloned().unwrap_or_default()
    };
    let padding = PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_to_multiple_of: None,
        ..tokenizer.get_padding().cloned().unwrap_or_default()
    };
    tokenizer
        .with_truncation(Some(truncation))
        .map_err(EmbedError::Tokenizer)?
        .with_padding(Some(padding.clone()));
    Ok((tokenizer, padding))
}

/// Checks that the model takes BERT's inputs and returns token vectors; gives whether it takes
/// `token_type_ids` and the vector dimension.
fn check_signature(session: &Session, path: &Path) -> Result<(bool, usize), EmbedError> {
    let unsupported = |reason: String| EmbedError::Model {
        path: path.to_path_buf(),
        reason,
        source: None,
    };
    let inputs: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
    for required in [INPUT_IDS, ATTENTION_MASK] {
        if !inputs.contains(&required) {
            return Err(unsupported(format!(
                "it has no input `{required}` (inputs: {inputs:?})"
            )));
        }
    }
    if let Some(other) = inputs
        .iter()
        .find(|i| ![INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS].contains(i))
    {
        return Err(unsupported(format!("it has an unknown input `{other}`")));
    }
    let output = session
        .outputs()
        .iter()
        .find(|o| o.name() == OUTPUT)
        .ok_or_else(|| unsupported(format!("it has no output `{OUTPUT}`")))?;
    let dimension = output
        .dtype()
        .tensor_shape()
        .and_then(|shape| match **shape {
            [_, _, d] if d > 0 => usize::try_from(d).ok(),
            _ => None,
        })
        .ok_or_else(|| unsupported(format!("`{OUTPUT}` is not [batch, sequence, dimension]")))?;
    Ok((inputs.contains(&TOKEN_TYPE_IDS), dimension))
}

/// The ONNX Runtime library is loaded once per process and has one environment: every embedder
/// shares it, and one asking for a different library is refused rather than silently given the
/// first.
static RUNTIME: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

fn environment(lib: &Path) -> Result<Environment, EmbedError> {
    if !lib.is_file() {
        return Err(EmbedError::MissingFile {
            what: "onnx runtime library",
            path: lib.to_path_buf(),
        });
    }
    let runtime_err = |source: crate::BoxError| EmbedError::Runtime {
        path: lib.to_path_buf(),
        source,
    };
    let lib = lib.canonicalize().map_err(|e| runtime_err(Box::new(e)))?;
    let mut runtime = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((loaded, environment)) = runtime.as_ref() {
        if *loaded != lib {
            return Err(EmbedError::RuntimeMismatch {
                loaded: loaded.clone(),
                requested: lib,
            });
        }
        return Ok(environment.clone());
    }
    let environment = ort::init_from(&lib)
        .map_err(|e| runtime_err(Box::new(e)))?
        .with_name("engram-embed")
        .with_telemetry(false)
        .build()
        .map_err(|e| runtime_err(Box::new(e)))?;
    *runtime = Some((lib, environment.clone()));
    Ok(environment)
}
